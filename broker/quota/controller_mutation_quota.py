"""Kafka's ControllerMutationQuotaManager (KIP-599): a token bucket of partition mutations.

CreateTopics, CreatePartitions and DeleteTopics cost their partitions (created, added,
deleted) against the client's ``controller_mutation_rate`` (mutations per second). Kafka
measures it with a ``TokenBucket``: ``quota`` tokens a second refill a bucket of at most
``quota.window.num x quota.window.size.seconds x quota`` (the burst); a mutation takes
its permits, and the bucket may go below zero once. The throttle time is the time to
refill to zero: ``-tokens / quota`` seconds.

Per request, as Kafka's ``newQuotaFor(request, strictSinceVersion)``:

- **strict** (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+): a topic asked
  for while the bucket is below zero is refused, THROTTLING_QUOTA_EXCEEDED "The throttling
  quota has been exceeded."; the one that takes it below zero is accepted;
- **permissive** (older versions): every topic is accepted, the bucket still recorded.

Either way the response carries the throttle time (the larger of this and the Request
quota's) and the channel is throttled for it. What the three handlers call (a request's
quota, a topic's permits, the throttle time left for the dispatcher) is
``broker/handlers/controller_mutation_common.py``.
"""

from __future__ import annotations

from broker.quota.client_quota_manager import ClientQuotaManager, QuotaType
from broker.quota.client_quota_store import ClientQuotaStore
from broker.quota.sampled_rate import MetricConfig, QuotaSensor, round_half_up
from purgatory import Clock

THROTTLING_QUOTA_EXCEEDED_MESSAGE = "The throttling quota has been exceeded."


class ThrottlingQuotaExceeded(Exception):
    def __init__(self, throttle_time_ms: int) -> None:
        super().__init__(THROTTLING_QUOTA_EXCEEDED_MESSAGE)
        self.throttle_time_ms = throttle_time_ms


class TokenBucket:
    """Kafka's ``TokenBucket`` (per second): starts empty at time 0, refills at quota."""

    __slots__ = ("last_update_ms", "tokens")

    def __init__(self) -> None:
        self.tokens = 0.0
        self.last_update_ms = 0

    def measure(self, config: MetricConfig, now_ms: int) -> float:
        if config.quota is None:
            return float(2**63 - 1)
        self._refill(config, now_ms)
        return self.tokens

    def record(self, config: MetricConfig, value: float, now_ms: int) -> None:
        if config.quota is None:
            return
        self._refill(config, now_ms)
        self.tokens = min(_burst(config), self.tokens - value)

    def _refill(self, config: MetricConfig, now_ms: int) -> None:
        assert config.quota is not None
        elapsed_s = (now_ms - self.last_update_ms) / 1000
        self.tokens = min(_burst(config), self.tokens + config.quota * elapsed_s)
        self.last_update_ms = now_ms


def _burst(config: MetricConfig) -> float:
    assert config.quota is not None
    return config.samples * (config.window_ms / 1000) * config.quota


class ControllerMutationQuota:
    """One request's quota (Kafka's Strict/PermissiveControllerMutationQuota); with no
    bucket, the unbounded one."""

    def __init__(
        self,
        clock: Clock,
        bucket: TokenBucket | None,
        config: MetricConfig | None,
        strict: bool,
    ) -> None:
        self._clock = clock
        self._bucket = bucket
        self._config = config
        self.strict = strict
        self._last_throttle_ms = 0
        self._last_recorded_ms = 0

    def record(self, permits: float) -> None:
        """Take ``permits``; strict: raises ``ThrottlingQuotaExceeded`` (taking nothing)
        while the bucket is below zero."""
        bucket, config = self._bucket, self._config
        if bucket is None or config is None or config.quota is None:
            return
        now = self._clock.now_ms()
        if self.strict:
            tokens = bucket.measure(config, now)
            if tokens < 0:
                self._violated(tokens, config.quota, now)
                raise ThrottlingQuotaExceeded(self._last_throttle_ms)
            bucket.record(config, permits, now)
        else:
            bucket.record(config, permits, now)
            tokens = bucket.measure(config, now)
            if tokens < 0:
                self._violated(tokens, config.quota, now)

    def throttle_time(self) -> int:
        """The last violation's throttle time, less what has passed since."""
        delta = self._clock.now_ms() - self._last_recorded_ms
        return max(0, self._last_throttle_ms - delta)

    def _violated(self, tokens: float, quota: float, now_ms: int) -> None:
        self._last_throttle_ms = min(round_half_up(-tokens / quota * 1000), 2**31 - 1)
        self._last_recorded_ms = now_ms


class ControllerMutationQuotaManager(ClientQuotaManager):
    """The ControllerMutation manager: a token bucket per sensor, besides the base
    class's rate (Kafka's ``mutation-rate`` metric)."""

    def __init__(
        self, store: ClientQuotaStore, clock: Clock, samples: int = 11, window_seconds: int = 1
    ) -> None:
        super().__init__(QuotaType.CONTROLLER_MUTATION, store, clock, samples, window_seconds)
        self._buckets: dict[tuple[str, str], TokenBucket] = {}

    def new_quota_for(
        self, user: str, client_id: str, version: int, strict_since_version: int
    ) -> ControllerMutationQuota:
        strict = version >= strict_since_version
        if not self.quotas_enabled:
            return ControllerMutationQuota(self._clock, None, None, strict)
        now = self._clock.now_ms()
        sensors = self.get_or_create_quota_sensors(user, client_id, now)
        tags = self.quota_metric_tags(user, client_id)
        bucket = self._buckets.get(tags)
        if bucket is None:
            bucket = self._buckets[tags] = TokenBucket()
        quota = _RecordingQuota(self._clock, bucket, sensors.quota.config, strict)
        quota.rate_sensor = sensors.quota
        return quota

    def tokens(self, tags: tuple[str, str]) -> float | None:
        bucket = self._buckets.get(tags)
        sensors = self.sensors.get(tags)
        if bucket is None or sensors is None:
            return None
        return bucket.measure(sensors.quota.config, self._clock.now_ms())

    def _purge_inactive(self, now_ms: int) -> None:
        super()._purge_inactive(now_ms)
        for tags in [tags for tags in self._buckets if tags not in self.sensors]:
            del self._buckets[tags]


class _RecordingQuota(ControllerMutationQuota):
    """Also records the permits into the sensor's rate (``mutation-rate``)."""

    rate_sensor: QuotaSensor | None = None

    def record(self, permits: float) -> None:
        super().record(permits)
        sensor = self.rate_sensor
        if sensor is not None:
            sensor.rate.record(sensor.config, permits, self._clock.now_ms())
            sensor.last_record_ms = self._clock.now_ms()
