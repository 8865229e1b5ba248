"""The broker process's garbage collector: a server's policy, and a log of its pauses.

CPython frees almost everything by reference counting; the cyclic collector only looks
for cycles, but to do so it walks every tracked container of the generations it
collects, and nothing else runs meanwhile. A parked request lives for its wait (a
long-poll Fetch for ``max_wait``): long enough to survive the young collections and be
promoted, never long enough to stop being promoted. CPython 3.11's defaults (700, 10, 10)
then run a full collection after every ten middle ones, about once a second with 10,000
fetches parked for 2 s (5,000 a second): each walked everything alive, ~450,000 objects
(connections, parked requests, and start-up's ~57,000: modules, classes, kio's schemas)
and took 100-900 ms, 35-55 % of the broker's time, and the fetches were answered up to a
second late (``bench/request_cost/request_cost.py --kinds fetch-parked``).

:func:`apply_gc_policy` is what long-running Python servers do, measured on that bench
(10,000 connections, max_wait 2 s, 20-150 s windows on a shared 2-core machine):

* ``gc.freeze()`` before any broker is built, once everything is imported: the modules,
  classes and schemas then live in the permanent generation, which no collection walks
  again (each full collection is that much shorter). Frozen objects are still freed by
  reference counting; only a cycle among them would wait for ``gc.unfreeze()``, which is
  why the brokers themselves (stopped and started again by fault injection) are built
  after it.
* The thresholds ``DEFAULT_GC_THRESHOLDS`` = (700, 2, 4000). Young collections as
  often as CPython's, so each walks little: a parked request is walked once there and
  once in a middle collection whatever the thresholds, so the total is the same and only
  the pauses change. A middle collection after 2 young ones rather than 10: it walks a
  few young collections' survivors, 2 ms where 10 gave 10-20 ms (5 gave 6-10 ms). A full
  collection once per 4,000 middle ones, i.e. every ~12,000 young ones: every 1-2
  minutes at 5,000 parked fetches a second, far less often at lower rates (CPython's
  25 % rule holds too, but with parked requests promoted all the time it always does).
  Then, at 10,000 parked fetches: no full collection in 30-150 s windows but one
  (~280 ms) about every 100 s, no other pause over ~2 ms, 5 % of the broker's time
  collecting (from 35-55 %), fetches answered +1-2 ms (p50) / +6-10 ms (p99) after
  max_wait (from +200 / +450-630 ms), broker CPU per request ~95 µs (from ~180).

What did not help: a large young threshold (10,000 or 50,000, as some servers use). A
young collection walks every young object still alive, and with requests parked for
seconds those are the parked requests: a collection every 10-20 s, but each walked
~250,000 objects (100-300 ms). Young thresholds of 1,000-2,000 made the middle pauses
longer (10-63 ms); freezing alone, with CPython's thresholds, left a full collection
every second.

The cost of the rare full collection: garbage in cycles that reached the old generation
waits for it. A request makes none; a closed connection does (``KafkaConnection`` and
its ``ConnectionInfo.close``, a bound method of it), about ten objects each, so with many
long-lived connections closing and little else happening, closed connections wait
longer to be freed than with CPython's thresholds.

``serve --gc-threshold T0,T1,T2`` (``python``: the interpreter's) and ``--no-gc-freeze``
change the policy (Kafka runs on the JVM and has no name for it). Unit tests never
apply it: they run with the interpreter's defaults.

:class:`GcLog` (``MINIKAFKA_GC_LOG=FILE`` in the environment of ``serve``) writes one
line per full collection, per pause of ``slow_ms`` or more, and at least every quarter
second, with running totals: ``bench/request_cost/request_cost.py`` reads it to report collections
and their pauses within its measured window.
"""

from __future__ import annotations

import gc
import os
import time
from typing import Any, TextIO

__all__ = [
    "DEFAULT_GC_THRESHOLDS",
    "GC_LOG_ENV",
    "GcLog",
    "apply_gc_policy",
    "install_gc_log_from_env",
    "parse_gc_thresholds",
]

#: Environment variable naming the file :class:`GcLog` appends to (unset: no log).
GC_LOG_ENV = "MINIKAFKA_GC_LOG"

#: ``gc.set_threshold`` for the broker process (CPython's: 700, 10, 10); the module
#: docstring gives the measurements behind each number.
DEFAULT_GC_THRESHOLDS: tuple[int, int, int] = (700, 2, 4000)


def parse_gc_thresholds(text: str) -> tuple[int, int, int] | None:
    """``serve --gc-threshold``: ``T0,T1,T2`` (positive integers), or ``python``: None,
    the interpreter's own."""
    if text.strip().lower() == "python":
        return None
    try:
        values = tuple(int(part) for part in text.split(","))
    except ValueError:
        values = ()
    if len(values) != 3 or min(values) <= 0:
        raise ValueError(f"not T0,T1,T2 (three positive integers) or 'python': {text!r}")
    return values[0], values[1], values[2]


def apply_gc_policy(thresholds: tuple[int, int, int] | None, *, freeze: bool) -> None:
    """Set the broker process's collector policy: once, when everything is imported and
    before any broker is built (the module docstring says why).

    ``thresholds`` go to ``gc.set_threshold`` (None keeps the interpreter's); ``freeze``
    collects once, then moves every object alive now to the permanent generation, which
    collections no longer walk.
    """
    if thresholds is not None:
        gc.set_threshold(*thresholds)
    if freeze:
        gc.collect()
        gc.freeze()


class GcLog:
    """A ``gc.callbacks`` entry that logs pauses to a file: cheap enough to leave on.

    Each line: ``monotonic_s generation pause_ms collected young middle full total_ms
    longest_ms`` — the collection that wrote it, then running totals since the log
    started (collections per generation, their pause time and the longest pause).
    ``monotonic_s`` is ``time.monotonic()``, which another process on the same machine
    can compare with its own.
    """

    def __init__(self, out: TextIO, slow_ms: float = 5.0, every_s: float = 0.25) -> None:
        self._out = out
        self._slow_ns = int(slow_ms * 1e6)
        self._every_s = every_s
        self._started_ns = 0
        self._counts = [0, 0, 0]
        self._total_ns = 0
        self._longest_ns = 0
        self._last_line_s = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started_ns = time.perf_counter_ns()
            return
        pause_ns = time.perf_counter_ns() - self._started_ns
        generation = int(info["generation"])
        counts = self._counts
        counts[generation] += 1
        self._total_ns += pause_ns
        self._longest_ns = max(self._longest_ns, pause_ns)
        now_s = time.monotonic()
        if (
            generation == 2
            or pause_ns >= self._slow_ns
            or now_s - self._last_line_s >= self._every_s
        ):
            self._last_line_s = now_s
            self._out.write(
                f"{now_s:.6f} {generation} {pause_ns / 1e6:.3f} {info['collected']} "
                f"{counts[0]} {counts[1]} {counts[2]} {self._total_ns / 1e6:.3f} "
                f"{self._longest_ns / 1e6:.3f}\n"
            )
            self._out.flush()

    def close(self) -> None:
        if self in gc.callbacks:
            gc.callbacks.remove(self)
        self._out.close()


def install_gc_log_from_env() -> GcLog | None:
    """Start a :class:`GcLog` on the file ``MINIKAFKA_GC_LOG`` names, if it names one."""
    path = os.environ.get(GC_LOG_ENV)
    if not path:
        return None
    gc_log = GcLog(open(path, "a", encoding="utf-8"))  # noqa: SIM115 - closed by close()
    gc.callbacks.append(gc_log)
    return gc_log
