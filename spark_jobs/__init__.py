"""The Spark jobs: workload, replay of a capture against a target, and the analysis.

A capture (``captures``, or Kafka's own request log, ``request_log``) is read with an
explicit schema (``schema``), replayed from executors over TCP with its original spacing
and its ids rewritten (``replay``, ``replay_client``, ``replay_rewrite``), and compared with
the target's own capture like for like (``fidelity``, ``report``, ``compare``: tables,
plots, pages). ``workload`` is a client-side traffic mix. The SparkSession is built in
the entry points only (``session``). It talks to brokers only over TCP: it imports
``protocol`` and ``client_io``, never ``broker``.
"""
