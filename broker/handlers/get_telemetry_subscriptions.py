"""GetTelemetrySubscriptions (key 71, KIP-714): which metrics a client pushes, how often.

Versions 0.

Behavior:
- Served (and advertised in ApiVersions) only with the client-telemetry receiver on
  (``metric.reporters`` names it: ``serve --client-telemetry``), as a Kafka broker serves
  it only with a ``ClientTelemetry`` metrics reporter; without it the key is unknown and
  a request for it closes the connection, as Kafka's does.
- The zero ``client_instance_id`` gets a new instance id; the answer carries the
  instance's subscription (``broker/observability/client_telemetry/``): its id, the
  requested metric prefixes (``*`` for all, none for nothing), the push interval, the
  accepted compression types (zstd, lz4, gzip, snappy: Kafka's order of preference),
  ``telemetry.max.bytes`` and delta temporality.
- A request before the push interval has passed is THROTTLING_QUOTA_EXCEEDED (unless
  the client's last push failed with UNKNOWN_SUBSCRIPTION_ID or
  UNSUPPORTED_COMPRESSION_TYPE); an error answer carries only the error code.
- No ACL is checked (Kafka checks none); throttle time 0.

Version notes:
- v0 (Kafka 3.7) is the only version.
"""

from __future__ import annotations

import datetime
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from broker.observability.client_telemetry.client_metrics_instance import ClientAttributes
from broker.observability.client_telemetry.client_metrics_manager import (
    SUPPORTED_COMPRESSION_TYPES,
)
from broker.server.context import RequestContext
from protocol.builders import response_builder

API_KEY = 71
MIN_VERSION = 0
MAX_VERSION = 0

_ZERO = uuid.UUID(int=0)


def client_attributes(ctx: RequestContext) -> ClientAttributes:
    """The requesting client as KIP-714's ``match`` sees it (Kafka's
    ``ClientMetricsInstanceMetadata``): client id, software from its ApiVersions, address."""
    connection = ctx.connection
    return ClientAttributes(
        connection.connection_id,
        ctx.header.client_id,
        connection.client_software_name,
        connection.client_software_version,
        connection.client_host,
        connection.client_port,
    )


def handle(ctx: RequestContext, request: Any) -> Any:
    telemetry = ctx.services.client_telemetry
    if telemetry is None:  # not served: the registry leaves the key out
        return error_response(ctx, request, ErrorCode.unsupported_version)
    manager = telemetry.manager
    error, instance = manager.get_telemetry_subscriptions(
        request.client_instance_id, client_attributes(ctx)
    )
    if error is not ErrorCode.none:
        return error_response(ctx, request, error)
    b = response_builder(API_KEY, ctx.api_version)
    return b.GetTelemetrySubscriptionsResponse(
        throttle_time=0,
        error_code=ErrorCode.none,
        client_instance_id=instance.instance_id,
        subscription_id=instance.subscription_id,
        accepted_compression_types=SUPPORTED_COMPRESSION_TYPES,
        push_interval=datetime.timedelta(milliseconds=instance.push_interval_ms),
        telemetry_max_bytes=manager.telemetry_max_bytes,
        delta_temporality=True,
        requested_metrics=instance.metrics,
    )


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    """``error`` and Kafka's defaults everywhere else (the zero instance id)."""
    del request
    b = response_builder(API_KEY, ctx.api_version)
    return b.GetTelemetrySubscriptionsResponse(
        throttle_time=0,
        error_code=error,
        client_instance_id=_ZERO,
        subscription_id=0,
        accepted_compression_types=(),
        push_interval=0,
        telemetry_max_bytes=0,
        delta_temporality=False,
        requested_metrics=(),
    )
