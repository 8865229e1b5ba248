"""Kafka's sampled rate: ``SampledStat`` windows summed by ``Rate``, checked by a sensor.

A client's bytes (or request time) per second is measured as Kafka's metrics library
measures it (``org.apache.kafka.common.metrics``): a ring of ``samples + 1`` windows of
``window_ms`` each (``quota.window.num`` 11, ``quota.window.size.seconds`` 1). A value is
added to the current window; a window that has lasted ``window_ms`` is complete and the
next value starts the next one (reusing the oldest slot). A window with no event for
``samples * window_ms`` is reset (``purgeObsoleteSamples``). The rate is the sum of the
windows divided by the elapsed time since the oldest window started, but never less
than ``samples - 1`` full windows (``Rate.windowSize``): a client's first bytes are
spread over ten seconds, which is the burst Kafka allows before throttling.

``QuotaSensor.record`` records and checks the bound in one call, as ``Sensor.record(v,
t, checkQuotas=true)``; instead of raising ``QuotaViolationException`` it returns the
measured rate, and ``throttle_time_ms`` is ``QuotaUtils.throttleTime``: the time the
rate needs, at its window size, to come back to the bound, ``(rate - bound) / bound *
window_size_ms``, rounded.

Everything reads the time it is given (the injected clock's milliseconds).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class MetricConfig:
    """Kafka's ``MetricConfig`` as a quota uses it: windows and the upper bound."""

    samples: int = 11
    window_ms: int = 1000
    quota: float | None = None


class _Sample:
    __slots__ = ("event_count", "last_event_ms", "start_ms", "value")

    def __init__(self, now_ms: int) -> None:
        self.value = 0.0
        self.event_count = 0
        self.start_ms = now_ms
        self.last_event_ms = now_ms

    def reset(self, now_ms: int) -> None:
        self.value = 0.0
        self.event_count = 0
        self.start_ms = now_ms
        self.last_event_ms = now_ms


class Rate:
    """Kafka's ``Rate`` over a ``WindowedSum`` (per second)."""

    __slots__ = ("_current", "_samples")

    def __init__(self) -> None:
        self._samples: list[_Sample] = []
        self._current = 0

    def record(self, config: MetricConfig, value: float, now_ms: int) -> None:
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= config.window_ms:
            sample = self._advance(config, now_ms)
        sample.value += value
        sample.event_count += 1
        sample.last_event_ms = now_ms

    def measure(self, config: MetricConfig, now_ms: int) -> float:
        """Units per second over the windows (``Rate.measure``)."""
        self._purge_obsolete(config, now_ms)
        total = sum(sample.value for sample in self._samples)
        return total / (self.window_size_ms(config, now_ms) / 1000.0)

    def window_size_ms(self, config: MetricConfig, now_ms: int) -> int:
        """``Rate.windowSize``: elapsed since the oldest window, at least samples - 1
        full windows, at least 1 ms."""
        self._purge_obsolete(config, now_ms)
        elapsed = now_ms - self._oldest(now_ms).start_ms
        full_windows = elapsed // config.window_ms
        min_full_windows = config.samples - 1
        if full_windows < min_full_windows:
            elapsed += (min_full_windows - full_windows) * config.window_ms
        return max(elapsed, 1)

    def _current_sample(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        return self._samples[self._current]

    def _advance(self, config: MetricConfig, now_ms: int) -> _Sample:
        self._current = (self._current + 1) % (config.samples + 1)
        if self._current >= len(self._samples):
            sample = _Sample(now_ms)
            self._samples.append(sample)
            return sample
        sample = self._samples[self._current]
        sample.reset(now_ms)
        return sample

    def _oldest(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        return min(self._samples, key=lambda sample: sample.start_ms)

    def _purge_obsolete(self, config: MetricConfig, now_ms: int) -> None:
        expire_age = config.samples * config.window_ms
        for sample in self._samples:
            if now_ms - sample.last_event_ms >= expire_age:
                sample.reset(now_ms)


class SimpleRate(Rate):
    """Kafka's ``SimpleRate`` (the replication quotas' rate): over the time since the
    oldest window started, at least one window — no ``samples - 1`` windows of
    allowance, so a replication throttle bites from the first second."""

    __slots__ = ()

    def window_size_ms(self, config: MetricConfig, now_ms: int) -> int:
        self._purge_obsolete(config, now_ms)
        return max(now_ms - self._oldest(now_ms).start_ms, config.window_ms)


class QuotaSensor:
    """One quota's sensor (Kafka's ``Sensor`` with one ``Rate`` and a ``Quota``):
    ``record`` adds a value and returns the rate it measures now; ``last_record_ms``
    tells the manager when it may drop an idle sensor."""

    __slots__ = ("config", "last_record_ms", "rate")

    def __init__(self, config: MetricConfig, now_ms: int) -> None:
        self.config = config
        self.rate = Rate()
        self.last_record_ms = now_ms

    def record(self, value: float, now_ms: int) -> float:
        self.rate.record(self.config, value, now_ms)
        self.last_record_ms = now_ms
        return self.rate.measure(self.config, now_ms)

    def throttle_time_ms(self, value: float, now_ms: int) -> int:
        """``QuotaUtils.throttleTime`` for a measured ``value`` over the bound; 0 when
        the value is within it (``Quota.acceptable``: an upper bound, inclusive)."""
        bound = self.config.quota
        if bound is None or value <= bound:
            return 0
        window_ms = self.rate.window_size_ms(self.config, now_ms)
        # An int32 in the response: a quota of one byte a second could ask for more.
        return min(round_half_up((value - bound) / bound * window_ms), 2**31 - 1)


def round_half_up(value: float) -> int:
    """Java's ``Math.round`` (floor of value + 0.5), not Python's banker's rounding."""
    return math.floor(value + 0.5)
