"""Clocks for the timer: everything in purgatory/ reads time through one of these.

The timer never reads ``time.*`` itself. Production code hands it a :class:`LoopClock`
over ``loop.time`` so that the wheel and the event loop agree on "now" (the reaper
sleeps on the loop, so any other clock would drift from the loop's timers). Tests use
:class:`ManualClock`, which moves only when the test says so: no sleeping, no flakiness.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "LoopClock", "ManualClock"]


@runtime_checkable
class Clock(Protocol):
    """A monotonic source of integer milliseconds."""

    def now_ms(self) -> int: ...


class LoopClock:
    """Milliseconds from a float-seconds time function, normally ``loop.time``.

    ``now_ms`` rounds down, so a deadline computed from it is never reported as reached
    before the underlying clock has actually reached it.
    """

    __slots__ = ("_time_fn",)

    def __init__(self, time_fn: Callable[[], float]) -> None:
        self._time_fn = time_fn

    def now_ms(self) -> int:
        return int(self._time_fn() * 1000.0)

    def __repr__(self) -> str:
        return f"LoopClock(now_ms={self.now_ms()})"


class ManualClock:
    """A clock that only moves when told to; for deterministic tests.

    It refuses to go backwards: the timing wheel, like Kafka's, assumes a monotonic
    clock, and a test that moves time back is testing something the broker never sees.
    """

    __slots__ = ("_now_ms",)

    def __init__(self, start_ms: int = 0) -> None:
        self._now_ms = int(start_ms)

    def now_ms(self) -> int:
        return self._now_ms

    def advance(self, ms: int) -> None:
        if ms < 0:
            raise ValueError(f"a clock cannot go backwards (advance by {ms} ms)")
        self._now_ms += int(ms)

    def set(self, ms: int) -> None:
        if ms < self._now_ms:
            raise ValueError(f"a clock cannot go backwards (from {self._now_ms} to {ms} ms)")
        self._now_ms = int(ms)

    def __repr__(self) -> str:
        return f"ManualClock(now_ms={self._now_ms})"
