"""PushTelemetry (key 72, KIP-714): a client's metrics, every push interval.

Versions 0.

Behavior:
- Served (and advertised) only with the client-telemetry receiver on, as
  GetTelemetrySubscriptions (``get_telemetry_subscriptions.py``).
- Kafka's checks in Kafka's order (``ClientMetricsManager``): no or a reserved instance
  id, or a push after a terminating one, INVALID_REQUEST; too early and not terminating,
  THROTTLING_QUOTA_EXCEEDED; another subscription id, UNKNOWN_SUBSCRIPTION_ID; a codec
  Kafka does not know, UNSUPPORTED_COMPRESSION_TYPE; more than ``telemetry.max.bytes``
  compressed or decompressed, TELEMETRY_TOO_LARGE; a payload that is not OTLP
  ``MetricsData`` in the codec named, INVALID_RECORD.
- An accepted payload is decoded and kept by the receiver (``/metrics``) and written to
  the capture beside the client's requests (one ``client_telemetry`` record per push).
- ``terminating`` (a client closing) is accepted early once; any push after it is
  INVALID_REQUEST.
- No ACL is checked (Kafka checks none); throttle time 0.

Version notes:
- v0 (Kafka 3.7) is the only version.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.handlers.get_telemetry_subscriptions import client_attributes
from broker.server.context import RequestContext
from protocol.builders import response_builder

API_KEY = 72
MIN_VERSION = 0
MAX_VERSION = 0


def handle(ctx: RequestContext, request: Any) -> Any:
    telemetry = ctx.services.client_telemetry
    if telemetry is None:  # not served: the registry leaves the key out
        return error_response(ctx, request, ErrorCode.unsupported_version)
    manager = telemetry.manager
    error = manager.push_telemetry(
        request.client_instance_id,
        int(request.subscription_id),
        bool(request.terminating),
        int(request.compression_type),
        bytes(request.metrics),
        client_attributes(ctx),
    )
    return error_response(ctx, request, error)


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    """The whole answer is its error code."""
    del request
    b = response_builder(API_KEY, ctx.api_version)
    return b.PushTelemetryResponse(throttle_time=0, error_code=error)
