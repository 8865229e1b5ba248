"""What the tests and the benchmarks both use, owned by neither.

``tests/`` and ``bench/`` never import each other; what both need lives here: a raw
client that speaks our codec over a real socket (``raw_client``), the request fields the
tests and benches send (``requests``), the fuzzed-frame generator (``fuzz_frames`` over
``kio_samples``), a broker in a child process (``broker_process``), a Spark standalone
cluster (``spark_standalone``, needs the ``spark`` extra) and the one "wait until a
condition holds" loop (``polling``).

It may import ``protocol`` and ``client_io`` (import-linter holds it to that), never the
broker: a bench or test that measures a broker starts one (``broker_process``) or builds
one itself. No module imports another package of the project at import time beyond those,
so ``bench/request_cost`` can load another checkout's ``protocol`` first.
"""
