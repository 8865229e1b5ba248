"""A skewed broker's clocks: the wall clock steps and steps back, the monotonic one drifts
and never goes back; a broker without a skew reads the virtual time exactly."""

from __future__ import annotations

import pytest

from simulation.faults.clock_skew import SkewedClocks

EPOCH_S = 1_700_000_000.0


def test_an_unskewed_broker_reads_the_virtual_time() -> None:
    now = [12.345]
    clock, request_clock = SkewedClocks(lambda: now[0], EPOCH_S).of_broker(0)
    assert clock.now_ms() == 12345
    assert request_clock.wall_ms() == (EPOCH_S + 12.345) * 1000.0
    assert request_clock.monotonic_ns() == round(12.345 * 1e9)


def test_a_skew_steps_the_wall_clock_and_drifts_the_monotonic_one_which_never_goes_back() -> None:
    now = [100.0]
    clocks = SkewedClocks(lambda: now[0], EPOCH_S)
    clock, request_clock = clocks.of_broker(1)
    clocks.skew(1).start(now[0], offset_s=-30.0, drift=-0.05)
    assert request_clock.wall_ms() == pytest.approx((EPOCH_S + 70.0) * 1000.0)  # a step back
    now[0] = 110.0
    assert clock.now_ms() == pytest.approx(109_500, abs=1)  # 5% slow
    clocks.skew(1).stop(now[0])
    now[0] = 120.0
    assert clock.now_ms() == pytest.approx(119_500, abs=1)  # the lag stays, no jump
    assert request_clock.wall_ms() == pytest.approx((EPOCH_S + 119.5) * 1000.0)
    restarted, _ = clocks.of_broker(1)  # a restarted broker reads the same clocks
    assert restarted.now_ms() == clock.now_ms()
    assert clocks.of_broker(0)[0].now_ms() == 120_000  # the others never moved
