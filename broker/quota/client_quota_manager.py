"""Kafka's ClientQuotaManager and ClientRequestQuotaManager, on the injected clock.

One manager per quota type (Kafka's ``QuotaType``): Produce (``producer_byte_rate``),
Fetch (``consumer_byte_rate``), Request (``request_percentage``) and ControllerMutation
(``controller_mutation_rate``). A request is measured against the quota of the most
specific entity that has one, in Kafka's precedence order (``DefaultQuotaCallback``):

1. user and client-id  2. user and default client-id  3. user
4. default user and client-id  5. default user and default client-id  6. default user
7. client-id  8. default client-id

The sensor a request records into is named by its *metric tags* (user, client-id), which
depend on the levels at which quotas exist (``quotaMetricTags``): with client-id quotas
only, every client id has its own sensor (user tag ""); with user quotas only, every
user; otherwise the tags of the entity that matched. So clients sharing a user quota
share one rate. Nothing is recorded while the type has no quota at all
(``quotasEnabled``): a broker without quotas pays one attribute read per request.

The rate is Kafka's (``sampled_rate.py``); the throttle time is ``QuotaUtils``'s — time
for the rate to come back to the bound — unbounded for the byte-rate managers, capped
at one window (``quota.window.size.seconds``) for the Request manager, as Kafka's
``ClientRequestQuotaManager``. Request time is recorded as a percentage of one thread
per second (``nanosToPercentage``). A sensor idle for an hour is dropped
(``InactiveSensorExpirationTimeSeconds``), so idle client ids cost nothing.

Differences from Kafka: the levels in use are recomputed from the store on every change
(Kafka only ever adds levels until a restart). ControllerMutation's token bucket is
``controller_mutation_quota.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from broker.quota.client_quota_store import (
    CLIENT_ID,
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    USER,
    ClientQuotaStore,
    Entity,
    entity_of,
)
from broker.quota.sampled_rate import MetricConfig, QuotaSensor
from purgatory import Clock

INACTIVE_SENSOR_EXPIRATION_MS = 3_600_000
NANOS_TO_PERCENTAGE_PER_SECOND = 100.0 / 1_000_000_000


class QuotaType(StrEnum):
    """Kafka's ``QuotaType`` names (the metric group of each manager)."""

    PRODUCE = "Produce"
    FETCH = "Fetch"
    REQUEST = "Request"
    CONTROLLER_MUTATION = "ControllerMutation"


QUOTA_KEYS: dict[QuotaType, str] = {
    QuotaType.PRODUCE: PRODUCER_BYTE_RATE,
    QuotaType.FETCH: CONSUMER_BYTE_RATE,
    QuotaType.REQUEST: REQUEST_PERCENTAGE,
    QuotaType.CONTROLLER_MUTATION: CONTROLLER_MUTATION_RATE,
}

MetricTags = tuple[str, str]  # (user, client-id); "" where the level is not used


@dataclass(slots=True)
class ClientSensors:
    """A tag's quota sensor and its throttle-time average (Kafka's ``Avg``)."""

    quota: QuotaSensor
    throttle_count: int = 0
    throttle_sum_ms: int = 0

    def throttle_time_avg(self) -> float:
        return self.throttle_sum_ms / self.throttle_count if self.throttle_count else 0.0


def _user(name: str | None) -> tuple[str, str | None]:
    return (USER, name)


def _client(name: str | None) -> tuple[str, str | None]:
    return (CLIENT_ID, name)


class ClientQuotaManager:
    """One quota type's sensors and quota lookups (Kafka's ``ClientQuotaManager``)."""

    def __init__(
        self,
        quota_type: QuotaType,
        store: ClientQuotaStore,
        clock: Clock,
        samples: int = 11,
        window_seconds: int = 1,
    ) -> None:
        self.quota_type = quota_type
        self.key = QUOTA_KEYS[quota_type]
        self._store = store
        self._clock = clock
        self._samples = samples
        self._window_ms = window_seconds * 1000
        self.sensors: dict[MetricTags, ClientSensors] = {}
        self._overridden: dict[Entity, float] = {}
        self._levels: frozenset[str] = frozenset()
        self._last_purge_ms = clock.now_ms()
        self.quotas_enabled = False
        self.update_quotas()

    # -- quotas ---------------------------------------------------------------------------

    def update_quotas(self) -> None:
        """Read this type's quotas from the store, re-bound the existing sensors."""
        self._overridden = {}
        levels = set()
        for entity in self._store.entities_with(self.key):
            value = self._store.value(entity, self.key)
            assert value is not None
            self._overridden[entity] = value
            kinds = frozenset(kind for kind, _ in entity)
            levels.add("user+client" if len(kinds) == 2 else next(iter(kinds)))
        self._levels = frozenset(levels)
        self.quotas_enabled = bool(self._overridden)
        for tags, sensors in self.sensors.items():
            sensors.quota.config = self._metric_config(self.quota_limit(tags))

    def quota_metric_tags(self, user: str, client_id: str) -> MetricTags:
        """Kafka's ``quotaMetricTags``: the sensor a (user, client id) records into."""
        levels = self._levels
        if not levels or levels == {CLIENT_ID}:
            return ("", client_id)
        if levels == {USER}:
            return (user, "")
        if levels == {"user+client"}:
            return (user, client_id)
        q = self._overridden
        if (
            entity_of((_user(user), _client(client_id))) in q
            or entity_of((_user(user), _client(None))) in q
        ):
            return (user, client_id)
        if entity_of((_user(user),)) in q:
            return (user, "")
        if (
            entity_of((_user(None), _client(client_id))) in q
            or entity_of((_user(None), _client(None))) in q
        ):
            return (user, client_id)
        if entity_of((_user(None),)) in q:
            return (user, "")
        return ("", client_id)

    def quota_limit(self, tags: MetricTags) -> float | None:
        """Kafka's ``DefaultQuotaCallback.quotaLimit``: the precedence walk."""
        user, client_id = tags
        q = self._overridden
        if user and client_id:
            candidates = (
                (_user(user), _client(client_id)),
                (_user(user), _client(None)),
                (_user(None), _client(client_id)),
                (_user(None), _client(None)),
            )
        elif user:
            candidates = ((_user(user),), (_user(None),))  # type: ignore[assignment]
        elif client_id:
            candidates = ((_client(client_id),), (_client(None),))  # type: ignore[assignment]
        else:
            return None
        for pairs in candidates:
            value = q.get(entity_of(pairs))
            if value is not None:
                return value
        return None

    def quota(self, user: str, client_id: str) -> float | None:
        """The quota a (user, client id) is held to, None for none."""
        return self.quota_limit(self.quota_metric_tags(user, client_id))

    # -- recording ------------------------------------------------------------------------

    def maybe_record_and_get_throttle_time_ms(
        self, user: str, client_id: str, value: float, now_ms: int
    ) -> int:
        if not self.quotas_enabled:
            return 0
        return self.record_and_get_throttle_time_ms(user, client_id, value, now_ms)

    def record_and_get_throttle_time_ms(
        self, user: str, client_id: str, value: float, now_ms: int
    ) -> int:
        sensor = self.get_or_create_quota_sensors(user, client_id, now_ms).quota
        measured = sensor.record(value, now_ms)
        return self.throttle_time(sensor, measured, now_ms)

    def throttle_time(self, sensor: QuotaSensor, measured: float, now_ms: int) -> int:
        return sensor.throttle_time_ms(measured, now_ms)

    def record_no_throttle(self, user: str, client_id: str, value: float, now_ms: int) -> None:
        self.get_or_create_quota_sensors(user, client_id, now_ms).quota.record(value, now_ms)

    def unrecord_quota_sensor(self, user: str, client_id: str, value: float, now_ms: int) -> None:
        self.get_or_create_quota_sensors(user, client_id, now_ms).quota.rate.record(
            self._sensor_config(user, client_id), -value, now_ms
        )

    def record_throttle_time(self, user: str, client_id: str, throttle_time_ms: int) -> None:
        """The throttle-time sensor of ``throttle`` (the channel is muted elsewhere)."""
        sensors = self.get_or_create_quota_sensors(user, client_id, self._clock.now_ms())
        sensors.throttle_count += 1
        sensors.throttle_sum_ms += throttle_time_ms

    def get_max_value_in_quota_window(self, user: str, client_id: str) -> float:
        """``getMaxValueInQuotaWindow``: what the quota allows over samples - 1 windows."""
        if not self.quotas_enabled:
            return float("inf")
        limit = self.quota(user, client_id)
        if limit is None:
            return float("inf")
        return limit * (self._samples - 1) * (self._window_ms / 1000)

    def get_or_create_quota_sensors(self, user: str, client_id: str, now_ms: int) -> ClientSensors:
        tags = self.quota_metric_tags(user, client_id)
        sensors = self.sensors.get(tags)
        if sensors is None:
            if now_ms - self._last_purge_ms >= 30_000:
                self._purge_inactive(now_ms)
            config = self._metric_config(self.quota_limit(tags))
            sensors = self.sensors[tags] = ClientSensors(QuotaSensor(config, now_ms))
        return sensors

    def measured_rate(self, tags: MetricTags) -> float:
        sensors = self.sensors.get(tags)
        if sensors is None:
            return 0.0
        return sensors.quota.rate.measure(sensors.quota.config, self._clock.now_ms())

    def _sensor_config(self, user: str, client_id: str) -> MetricConfig:
        return self.sensors[self.quota_metric_tags(user, client_id)].quota.config

    def _metric_config(self, limit: float | None) -> MetricConfig:
        return MetricConfig(samples=self._samples, window_ms=self._window_ms, quota=limit)

    def _purge_inactive(self, now_ms: int) -> None:
        self._last_purge_ms = now_ms
        for tags in [
            tags
            for tags, sensors in self.sensors.items()
            if now_ms - sensors.quota.last_record_ms >= INACTIVE_SENSOR_EXPIRATION_MS
        ]:
            del self.sensors[tags]


class ClientRequestQuotaManager(ClientQuotaManager):
    """The Request quota: handler time as a percentage, throttle capped at one window."""

    def __init__(
        self, store: ClientQuotaStore, clock: Clock, samples: int = 11, window_seconds: int = 1
    ) -> None:
        super().__init__(QuotaType.REQUEST, store, clock, samples, window_seconds)
        self.max_throttle_time_ms = window_seconds * 1000

    def throttle_time(self, sensor: QuotaSensor, measured: float, now_ms: int) -> int:
        return min(super().throttle_time(sensor, measured, now_ms), self.max_throttle_time_ms)

    def maybe_record_request_time(
        self, user: str, client_id: str, time_ns: int, now_ms: int
    ) -> int:
        if not self.quotas_enabled:
            return 0
        return self.record_and_get_throttle_time_ms(
            user, client_id, time_ns * NANOS_TO_PERCENTAGE_PER_SECOND, now_ms
        )
