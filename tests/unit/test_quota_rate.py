"""Kafka's sampled rate and throttle-time formula, on plain millisecond times."""

from __future__ import annotations

import pytest

from broker.quota.sampled_rate import MetricConfig, QuotaSensor, Rate, round_half_up

CONFIG = MetricConfig(samples=11, window_ms=1000)


def test_a_first_record_is_spread_over_samples_minus_one_windows() -> None:
    rate = Rate()
    rate.record(CONFIG, 1000.0, 0)
    # Elapsed 0 ms, but Rate.windowSize counts at least 10 full windows: 10 s.
    assert rate.window_size_ms(CONFIG, 0) == 10_000
    assert rate.measure(CONFIG, 0) == pytest.approx(100.0)


def test_window_size_is_the_elapsed_time_once_past_the_minimum() -> None:
    rate = Rate()
    for t in range(0, 15_000, 100):
        rate.record(CONFIG, 100.0, t)  # 1000 B/s, steadily
    now = 14_900
    # 12 windows in the ring (samples + 1), 3000..14000; the one of 3000 had its last
    # event at 3900, 11 s ago: purged (reset to now). The oldest left started at 4000.
    assert rate.window_size_ms(CONFIG, now) == now - 4_000
    assert rate.measure(CONFIG, now) == pytest.approx(1000.0, rel=0.02)


def test_windows_idle_for_samples_times_window_are_reset() -> None:
    rate = Rate()
    rate.record(CONFIG, 5000.0, 0)
    assert rate.measure(CONFIG, 10_999) > 0
    assert rate.measure(CONFIG, 11_000) == 0.0  # purgeObsoleteSamples
    rate.record(CONFIG, 100.0, 11_000)
    assert rate.measure(CONFIG, 11_000) == pytest.approx(10.0)


def test_a_negative_record_takes_bytes_back() -> None:
    rate = Rate()
    rate.record(CONFIG, 1000.0, 0)
    rate.record(CONFIG, -1000.0, 0)
    assert rate.measure(CONFIG, 0) == 0.0


def test_throttle_time_is_the_time_to_come_back_under_the_bound() -> None:
    sensor = QuotaSensor(MetricConfig(samples=11, window_ms=1000, quota=50.0), 0)
    measured = sensor.record(1000.0, 0)
    assert measured == pytest.approx(100.0)
    # QuotaUtils.throttleTime: (100 - 50) / 50 * 10000 ms
    assert sensor.throttle_time_ms(measured, 0) == 10_000


def test_no_throttle_within_the_bound_inclusive() -> None:
    sensor = QuotaSensor(MetricConfig(samples=11, window_ms=1000, quota=100.0), 0)
    measured = sensor.record(1000.0, 0)
    assert sensor.throttle_time_ms(measured, 0) == 0
    assert sensor.throttle_time_ms(measured + 0.001, 0) == 0  # rounds to 0 ms


def test_throttle_time_fits_an_int32() -> None:
    sensor = QuotaSensor(MetricConfig(samples=11, window_ms=1000, quota=1.0), 0)
    measured = sensor.record(1e15, 0)
    assert sensor.throttle_time_ms(measured, 0) == 2**31 - 1


def test_rounding_is_javas_half_up() -> None:
    assert round_half_up(2.5) == 3
    assert round_half_up(0.49) == 0
