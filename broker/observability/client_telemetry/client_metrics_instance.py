"""One client instance's telemetry state: Kafka's ``ClientMetricsInstance`` and
``ClientMetricsInstanceMetadata``.

A client instance (a producer, a consumer, an admin client: one id per instance, which
the broker assigns at its first GetTelemetrySubscriptions) has the attributes a
subscription's ``match`` selects on, the subscription it was given (metrics, push
interval and its id) and the times of its last requests, which enforce the interval:

* a GetTelemetrySubscriptions is accepted when ``push_interval_ms`` has passed since the
  later of the last accepted get and push (``accept_get``);
* a PushTelemetry is accepted at once after a get (the client applies a jitter, so its
  first push may come early), otherwise when the interval has passed since the last
  accepted push (``accept_push``).

Kafka keeps the instance in an LRU cache with a timer per instance that drops it
``max(60 s, 3 x push interval)`` after its last request; here the deadline is kept on
the instance and the manager drops it when it next looks (``expires_at_ms``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from broker.observability.client_telemetry.client_metrics_configs import (
    CLIENT_ID,
    CLIENT_INSTANCE_ID,
    CLIENT_SOFTWARE_NAME,
    CLIENT_SOFTWARE_VERSION,
    CLIENT_SOURCE_ADDRESS,
    CLIENT_SOURCE_PORT,
)


@dataclass(frozen=True, slots=True)
class ClientAttributes:
    """What the broker knows of the client sending a telemetry request: its connection,
    its request header's client id and what its ApiVersions request said it runs."""

    connection_id: str
    client_id: str | None
    software_name: str | None
    software_version: str | None
    source_address: str
    source_port: int

    def for_matching(self, instance_id: uuid.UUID) -> dict[str, str | None]:
        """The attributes by the names of ``match`` selectors."""
        return {
            CLIENT_INSTANCE_ID: str(instance_id),
            CLIENT_ID: self.client_id,
            CLIENT_SOFTWARE_NAME: self.software_name,
            CLIENT_SOFTWARE_VERSION: self.software_version,
            CLIENT_SOURCE_ADDRESS: self.source_address,
            CLIENT_SOURCE_PORT: str(self.source_port),
        }


@dataclass(slots=True)
class ClientMetricsInstance:
    """A client instance, its subscription and the times of its last requests."""

    instance_id: uuid.UUID
    attributes: ClientAttributes
    subscription_id: int
    #: The store's version the subscription was computed at.
    subscription_version: int
    metrics: tuple[str, ...]
    push_interval_ms: int
    expires_at_ms: int = 0
    last_get_ms: int = field(default=-(2**62))
    last_push_ms: int = field(default=-(2**62))
    terminating: bool = False
    last_known_error: ErrorCode = ErrorCode.none

    def accept_get(self, now_ms: int) -> bool:
        """Kafka's ``maybeUpdateGetRequestTimestamp``: the interval has passed since the
        last accepted get or push (then the get is recorded)."""
        if now_ms - max(self.last_get_ms, self.last_push_ms) >= self.push_interval_ms:
            self.last_get_ms = now_ms
            return True
        return False

    def accept_push(self, now_ms: int) -> bool:
        """Kafka's ``maybeUpdatePushRequestTimestamp``: the first push after a get, or
        one a whole interval after the last accepted push (then the push is recorded)."""
        accepted = self.last_get_ms > self.last_push_ms
        if not accepted:
            accepted = now_ms - self.last_push_ms >= self.push_interval_ms
        if accepted:
            self.last_push_ms = now_ms
        return accepted
