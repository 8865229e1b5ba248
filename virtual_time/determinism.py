"""The process-wide sources of nondeterminism, pinned to the simulation while it runs.

Our own code takes time from its injected clock and ids from injected sources; the clients a
simulation runs (aiokafka, above all) do not: they read `time.time()` and `time.monotonic()`
for deadlines and timestamps, draw from the module-level `random` (node choice, the default
partitioner) and `uuid.uuid4()`. The brokers need none of this (they read the virtual
`RequestClock`, the seeded `IdSource` and a load scheduler on virtual time that the scenario
hands `MiniKafka`; a ruff rule keeps broker code off these functions, and
tests/integration/test_broker_determinism.py shows a run of our own client repeats under any
``PYTHONHASHSEED``). `pinned_process` replaces exactly those functions for the length of
a run — wall time becomes ``epoch + loop.time()``, monotonic and performance-counter time
become ``loop.time()``, `random`'s global generator is seeded and `uuid4` draws from the seed — and
puts the originals back afterwards. Code that bound them at import (``from time import
monotonic``) is not reached; none of the clients we run does that for anything that
decides behaviour.

One more order is aiokafka's own: ``ClusterMetadata.brokers()`` returns a *set* of
``BrokerMetadata`` tuples, which ``get_random_node`` and ``_metadata_update`` turn into the
list they draw from (with the seeded `random`), so the set's iteration order decides which
broker a client asks first. That order follows the tuples' hashes: the host strings' (the
hash seed) and ``rack=None``'s, which before Python 3.12 is the address of ``None`` — it
moves with address-space randomisation and with the interpreter binary. `pinned_process`
therefore makes ``brokers()`` return a list in the order the last metadata response (or
the bootstrap list) named them; callers only iterate it and take its ``len``. Elsewhere
aiokafka still follows the hash seed (an assignment is a set of ``TopicPartition``, e.g. in
``Fetcher._get_actions_per_node``), and hash randomisation is per process, not per run, so
`minikafka simulate` still starts its child with a fixed seed.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# 2026-01-01T00:00:00Z: record timestamps in a simulation start here, whatever the real date.
DEFAULT_EPOCH_S = 1_767_225_600.0


def _listed_brokers(cluster: Any) -> list[Any]:
    """aiokafka's ``ClusterMetadata.brokers()`` in the order the metadata listed them, not
    in a set's hash order (see the module docstring)."""
    return list(cluster._brokers.values()) or list(cluster._bootstrap_brokers.values())


# The functions of the `time` module a run replaces (most of them read through the module).
_CLOCKS = ("time", "time_ns", "monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns")


@contextmanager
def pinned_process(loop: Any, seed: int, epoch_s: float = DEFAULT_EPOCH_S) -> Iterator[None]:
    """Wall and monotonic clocks follow ``loop.time()``; `random` and `uuid4` follow ``seed``;
    aiokafka's ``ClusterMetadata.brokers()`` is in listed order (when aiokafka is installed)."""
    try:
        from aiokafka.cluster import ClusterMetadata
    except ImportError:  # no aiokafka client to run
        ClusterMetadata = None
    saved_brokers = None if ClusterMetadata is None else ClusterMetadata.brokers
    saved_clocks = {name: getattr(time, name) for name in _CLOCKS}
    saved_uuid4 = uuid.uuid4
    saved_random = random.getstate()
    ids = random.Random(f"{seed}/uuid")

    def wall() -> float:
        return float(epoch_s + loop.time())

    def monotonic() -> float:
        return float(loop.time())

    def uuid4() -> uuid.UUID:
        return uuid.UUID(int=ids.getrandbits(128), version=4)

    pinned = {
        "time": wall,
        "time_ns": lambda: int(wall() * 1e9),
        "monotonic": monotonic,
        "monotonic_ns": lambda: int(monotonic() * 1e9),
        "perf_counter": monotonic,
        "perf_counter_ns": lambda: int(monotonic() * 1e9),
    }
    for name, function in pinned.items():
        setattr(time, name, function)
    uuid.uuid4 = uuid4
    random.seed(seed)
    if ClusterMetadata is not None:
        ClusterMetadata.brokers = _listed_brokers
    try:
        yield
    finally:
        for name, function in saved_clocks.items():
            setattr(time, name, function)
        uuid.uuid4 = saved_uuid4
        if ClusterMetadata is not None:
            ClusterMetadata.brokers = saved_brokers
        random.setstate(saved_random)
