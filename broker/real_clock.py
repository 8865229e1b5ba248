"""The real clocks: the only place in ``broker/`` that reads the machine's time.

The composition root (`broker.app`) hands these down when it serves; a simulation hands in
its loop's virtual time instead, and a test its `ManualClock`. Everything else in
``broker/``, ``purgatory/`` and ``protocol/`` takes time from what it is given: a ruff rule
(``TID251``, banned-api in ``pyproject.toml``) makes ``time.time``, ``time.monotonic``,
``time.perf_counter``, ``datetime.now`` and the like errors anywhere else. The defaults of a
few constructors point here, so that a component built alone (a unit test, a tool) still
works; the broker always passes its own.
"""

from __future__ import annotations

import time


def wall_clock_ms() -> int:
    """Epoch milliseconds (Kafka's ``time.milliseconds()``): dates, not durations."""
    return time.time_ns() // 1_000_000


def wall_ms() -> float:
    """Epoch milliseconds with a fraction (the capture's dates)."""
    return time.time() * 1000.0


def wall_s() -> float:
    """Epoch seconds: what `LoopClock` wraps for SASL's session lifetimes."""
    return time.time()


def monotonic_s() -> float:
    """The monotonic clock the event loop's ``time()`` reads (seconds)."""
    return time.monotonic()


#: Nanoseconds for durations (a request's breakdown, capture's event stamps): the builtin
#: itself, not a wrapper, since a request is stamped several times on the hot path.
monotonic_ns = time.perf_counter_ns
