"""Clock tests."""

from __future__ import annotations

import pytest

from purgatory.clock import Clock, LoopClock, ManualClock


def test_manual_clock_moves_only_forward() -> None:
    clock = ManualClock(5)
    clock.advance(10)
    assert clock.now_ms() == 15
    clock.set(20)
    assert clock.now_ms() == 20
    with pytest.raises(ValueError):
        clock.advance(-1)
    with pytest.raises(ValueError):
        clock.set(19)


def test_loop_clock_converts_seconds_to_floored_ms() -> None:
    now = [12.3456789]
    clock = LoopClock(lambda: now[0])
    assert clock.now_ms() == 12345
    now[0] = 12.3459999
    assert clock.now_ms() == 12345
    assert isinstance(clock, Clock) and isinstance(ManualClock(), Clock)
