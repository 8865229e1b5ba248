"""Client telemetry's broker side (KIP-714): Kafka's ``ClientMetricsManager``.

A client that sees GetTelemetrySubscriptions (71) and PushTelemetry (72) in ApiVersions
asks which metrics to push and how often, then pushes them every interval; this manager
answers both, per broker, over the cluster's subscriptions (``ClientMetricsStore``).

**Instances.** A GetTelemetrySubscriptions with the zero id gets a new instance id (a
random Uuid, never the zero or one Uuid Kafka reserves). The first request of an
instance this broker has not seen creates it from the request's client attributes
(``ClientAttributes``: a client that moves to another broker is a new instance there,
with the same id). Its subscription is computed from every subscription whose ``match``
selects it: the union of their ``metrics`` (only ``*`` when one has ``*``), the smallest
of their ``interval.ms`` (Kafka's 300000 when none matches) and the subscription id,
Kafka's formula: CRC32C of the metrics set's text and the interval, XOR the instance
id's hash (``subscription_id``). When the store has changed since, the next request of
the instance recomputes it (and its interval clock starts over, as Kafka's new
``ClientMetricsInstance`` does). An instance is dropped when its connection closes or
``max(60 s, 3 x push interval)`` after its last request, and the cache holds at most
16384 (the least recently used goes first), Kafka's bounds.

**GetTelemetrySubscriptions** before the push interval has passed since the instance's
last accepted get or push is THROTTLING_QUOTA_EXCEEDED, unless its last push failed
with UNKNOWN_SUBSCRIPTION_ID or UNSUPPORTED_COMPRESSION_TYPE (the client must then get
its new subscription at once).

**PushTelemetry**, Kafka's checks in Kafka's order: no instance id or a reserved one,
INVALID_REQUEST; a push after a terminating push, INVALID_REQUEST; too early (see
``ClientMetricsInstance.accept_push``) and not terminating, THROTTLING_QUOTA_EXCEEDED; a
subscription id other than the instance's, UNKNOWN_SUBSCRIPTION_ID; a compression type
that is no Kafka codec, UNSUPPORTED_COMPRESSION_TYPE; compressed metrics larger than
``telemetry.max.bytes``, TELEMETRY_TOO_LARGE. Then the payload goes to the receiver
(Kafka's ``ClientTelemetryExporterPlugin``): larger than ``telemetry.max.bytes`` once
decompressed, TELEMETRY_TOO_LARGE; not decodable, INVALID_RECORD (which tells the client
to stop pushing).

Differences from Kafka: the order of the metric names in the text the subscription id
is hashed from is sorted here (Java's HashSet order there): the id differs from a Kafka
broker's for more than one metric prefix, which no client can see (it only echoes the
id). Kafka's ``client-metrics`` broker metrics (instance count, throttles, plugin
exports) are not kept; the receiver's own counts are at ``/metrics``.
"""

from __future__ import annotations

import logging
import uuid
from collections import OrderedDict
from collections.abc import Iterable
from typing import Final, Protocol

import crc32c
from kio.schema.errors import ErrorCode

from broker.ids import IdSource
from broker.observability.client_telemetry.client_metrics_configs import (
    ALL_SUBSCRIBED_METRICS,
    INTERVAL_MS_DEFAULT,
)
from broker.observability.client_telemetry.client_metrics_instance import (
    ClientAttributes,
    ClientMetricsInstance,
)
from broker.observability.client_telemetry.client_metrics_store import ClientMetricsStore
from protocol.compression import CODEC_NAMES
from purgatory import Clock

__all__ = [
    "SUPPORTED_COMPRESSION_TYPES",
    "ClientMetricsManager",
    "TelemetryExporter",
    "TelemetryTooLarge",
    "subscription_id",
]

log = logging.getLogger(__name__)

#: What GetTelemetrySubscriptions offers, Kafka's preference first: zstd, lz4, gzip, snappy.
SUPPORTED_COMPRESSION_TYPES: Final = (4, 3, 1, 2)
CACHE_MAX_SIZE: Final = 16384
CACHE_EXPIRY_MS: Final = 60 * 1000
_RESERVED_IDS: Final = frozenset((uuid.UUID(int=0), uuid.UUID(int=1)))


class TelemetryTooLarge(Exception):
    """A pushed payload larger than ``telemetry.max.bytes`` once decompressed."""


class TelemetryExporter(Protocol):
    """Where an accepted push goes (Kafka's ``ClientTelemetryExporterPlugin``).

    ``export`` raises ``TelemetryTooLarge`` past ``max_bytes`` decompressed, anything
    else for a payload it cannot read."""

    def export(
        self,
        instance: ClientMetricsInstance,
        compression_type: int,
        metrics: bytes,
        max_bytes: int,
    ) -> None: ...


def subscription_id(metrics: Iterable[str], push_interval_ms: int, instance_id: uuid.UUID) -> int:
    """Kafka's ``computeSubscriptionId``: CRC32C of ``[m1, m2, ...]`` + the interval, as
    a signed int, XOR the instance id's ``Uuid.hashCode``."""
    text = "[" + ", ".join(metrics) + "]" + str(push_interval_ms)
    crc = crc32c.crc32c(text.encode("utf-8"))
    most, least = instance_id.int >> 64, instance_id.int & (2**64 - 1)
    hilo = most ^ least
    uuid_hash = ((hilo >> 32) ^ hilo) & 0xFFFFFFFF
    value = crc ^ uuid_hash
    return value - 2**32 if value >= 2**31 else value


class ClientMetricsManager:
    """One broker's client instances and its answers to APIs 71 and 72."""

    def __init__(
        self,
        store: ClientMetricsStore,
        clock: Clock,
        ids: IdSource,
        telemetry_max_bytes: int,
        exporter: TelemetryExporter,
    ) -> None:
        self._store = store
        self._clock = clock
        self._ids = ids
        self.telemetry_max_bytes = telemetry_max_bytes
        self._exporter = exporter
        self._instances: OrderedDict[uuid.UUID, ClientMetricsInstance] = OrderedDict()
        self._connections: dict[str, uuid.UUID] = {}
        self._next_sweep_ms = 0

    @property
    def instance_count(self) -> int:
        return len(self._instances)

    def instance(self, instance_id: uuid.UUID) -> ClientMetricsInstance | None:
        """The cached instance, if any (tests, the control endpoint)."""
        return self._instances.get(instance_id)

    # -- the two APIs ---------------------------------------------------------------------

    def get_telemetry_subscriptions(
        self, instance_id: uuid.UUID | None, client: ClientAttributes
    ) -> tuple[ErrorCode, ClientMetricsInstance]:
        """The instance's subscription, or THROTTLING_QUOTA_EXCEEDED (module doc)."""
        now = self._clock.now_ms()
        if instance_id is None or instance_id.int == 0:
            instance_id = self._new_instance_id()
        instance = self._instance(instance_id, client, now)
        if not instance.accept_get(now) and instance.last_known_error not in (
            ErrorCode.unknown_subscription_id,
            ErrorCode.unsupported_compression_type,
        ):
            return ErrorCode.throttling_quota_exceeded, instance
        instance.last_known_error = ErrorCode.none
        return ErrorCode.none, instance

    def push_telemetry(
        self,
        instance_id: uuid.UUID | None,
        subscription: int,
        terminating: bool,
        compression_type: int,
        metrics: bytes,
        client: ClientAttributes,
    ) -> ErrorCode:
        """Validate a push and hand its metrics to the exporter (module doc)."""
        if instance_id is None or instance_id in _RESERVED_IDS:
            return ErrorCode.invalid_request
        now = self._clock.now_ms()
        instance = self._instance(instance_id, client, now)
        try:
            error = _validate_push(instance, now, subscription, terminating, compression_type)
            if error is not ErrorCode.none:
                instance.last_known_error = error
                return error
            if len(metrics) > self.telemetry_max_bytes:
                instance.last_known_error = ErrorCode.telemetry_too_large
                return ErrorCode.telemetry_too_large
        finally:
            instance.terminating = terminating
        if metrics:
            try:
                self._exporter.export(instance, compression_type, metrics, self.telemetry_max_bytes)
            except TelemetryTooLarge:
                instance.last_known_error = ErrorCode.telemetry_too_large
                return ErrorCode.telemetry_too_large
            except Exception as exc:
                log.warning("Error exporting client metrics of instance %s: %s", instance_id, exc)
                instance.last_known_error = ErrorCode.invalid_record
                return ErrorCode.invalid_record
        instance.last_known_error = ErrorCode.none
        return ErrorCode.none

    def connection_closed(self, connection_id: str) -> None:
        """Kafka's ``ClientConnectionDisconnectListener``: the instance goes with it."""
        instance_id = self._connections.pop(connection_id, None)
        if instance_id is not None:
            self._instances.pop(instance_id, None)

    # -- instances ------------------------------------------------------------------------

    def _new_instance_id(self) -> uuid.UUID:
        while True:
            candidate = self._ids.uuid4()
            if candidate not in _RESERVED_IDS and candidate not in self._instances:
                return candidate

    def _instance(
        self, instance_id: uuid.UUID, client: ClientAttributes, now: int
    ) -> ClientMetricsInstance:
        """The cached instance (recomputed if the subscriptions changed since), or a new
        one; its expiry moved to ``max(60 s, 3 x interval)`` from now."""
        self._sweep(now)
        instance = self._instances.get(instance_id)
        if instance is not None and instance.expires_at_ms <= now:
            self._drop(instance)
            instance = None
        version = self._store.version
        if instance is None:
            instance = self._create(instance_id, client, version)
        elif instance.subscription_version < version:
            instance = self._create(instance_id, instance.attributes, version)
        else:
            self._instances.move_to_end(instance_id)
        instance.expires_at_ms = now + max(CACHE_EXPIRY_MS, 3 * instance.push_interval_ms)
        return instance

    def _create(
        self, instance_id: uuid.UUID, client: ClientAttributes, version: int
    ) -> ClientMetricsInstance:
        attributes = client.for_matching(instance_id)
        metrics: set[str] = set()
        interval = INTERVAL_MS_DEFAULT
        for subscription in self._store.subscriptions():
            if subscription.matches(attributes):
                metrics |= subscription.metrics
                interval = min(interval, subscription.interval_ms)
        if ALL_SUBSCRIBED_METRICS in metrics:
            metrics = {ALL_SUBSCRIBED_METRICS}
        ordered = tuple(sorted(metrics))
        instance = ClientMetricsInstance(
            instance_id,
            client,
            subscription_id(ordered, interval, instance_id),
            version,
            ordered,
            interval,
        )
        self._instances[instance_id] = instance
        self._instances.move_to_end(instance_id)
        self._connections[client.connection_id] = instance_id
        while len(self._instances) > CACHE_MAX_SIZE:
            _, evicted = self._instances.popitem(last=False)
            self._connections.pop(evicted.attributes.connection_id, None)
        return instance

    def _drop(self, instance: ClientMetricsInstance) -> None:
        self._instances.pop(instance.instance_id, None)
        connection = instance.attributes.connection_id
        if self._connections.get(connection) == instance.instance_id:
            del self._connections[connection]

    def _sweep(self, now: int) -> None:
        """Drop the expired instances, at most once a minute (Kafka's timers, lazily)."""
        if now < self._next_sweep_ms:
            return
        self._next_sweep_ms = now + CACHE_EXPIRY_MS
        for instance in [i for i in self._instances.values() if i.expires_at_ms <= now]:
            self._drop(instance)


def _validate_push(
    instance: ClientMetricsInstance, now: int, subscription: int, terminating: bool, codec: int
) -> ErrorCode:
    """Kafka's ``validatePushRequest`` before the size check, in its order."""
    if instance.terminating:
        return ErrorCode.invalid_request
    if not instance.accept_push(now) and not terminating:
        return ErrorCode.throttling_quota_exceeded
    if subscription != instance.subscription_id:
        return ErrorCode.unknown_subscription_id
    if codec not in CODEC_NAMES:
        return ErrorCode.unsupported_compression_type
    return ErrorCode.none
