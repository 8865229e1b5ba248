"""ApiVersions (key 18): which APIs and versions this broker speaks.

Versions 0-4.

Behavior:
- every API of the handler registry at its range (``api_specs``); an unsupported request
  version is answered by the connection layer with Kafka's v0-encoded UNSUPPORTED_VERSION
  response (KIP-511).
- v3+ (KIP-511): the client's software name and version are kept on its connection
  (Kafka's ``ClientInformation``), for client telemetry's ``match``.
- v3+ (KIP-584): the features this broker supports (``SupportedFeatures``: Kafka 4.2's
  table, ``broker/cluster/features.py``) and the levels the cluster finalized
  (``FinalizedFeatures``: those above 0) with their epoch (``FinalizedFeaturesEpoch``,
  moved by every UpdateFeatures). Clients read them: a Java or librdkafka producer uses
  transactions v2 when ``transaction.version`` >= 2 is finalized.

Version notes:
- v3: as Kafka's, leaves out supported features whose minimum is 0 (a v3 client would
  read a range starting at 0 as invalid).
- v4: every supported feature.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.server.context import RequestContext
from protocol.builders import response_builder
from protocol.codec import encode_response_body

API_KEY = 18
MIN_VERSION = 0
MAX_VERSION = 4


def handle(ctx: RequestContext, request: Any) -> Any:
    if ctx.api_version >= 3:
        # Kafka's SocketServer keeps these on the channel (ClientInformation).
        ctx.connection.client_software_name = request.client_software_name
        ctx.connection.client_software_version = request.client_software_version
    # The answer depends on the version only: encoded once, served from the broker's
    # response cache (which starts over when the cluster changes; cheap to rebuild).
    services = ctx.services
    features = services.features
    key = (API_KEY, ctx.api_version, features.epoch)
    cached = services.response_cache.get(key)
    if cached is not None:
        return cached
    version = services.metadata.version
    specs = services.api_specs
    b = response_builder(API_KEY, ctx.api_version)
    feature_fields: dict[str, Any] = {}
    if ctx.api_version >= 3:
        supported = tuple(
            b.SupportedFeatureKey(name=f.name, min_version=f.min_level, max_version=f.max_level)
            for f in features.supported()
            if ctx.api_version >= 4 or f.min_level > 0
        )
        finalized = tuple(
            b.FinalizedFeatureKey(name=name, max_version_level=level, min_version_level=level)
            for name, level in features.finalized().items()
        )
        feature_fields = {
            "supported_features": supported,
            "finalized_features_epoch": features.epoch,
            "finalized_features": finalized,
        }
    answer = b.ApiVersionsResponse(
        error_code=ErrorCode.none,
        api_keys=tuple(
            b.ApiVersion(api_key=s.api_key, min_version=s.min_version, max_version=s.max_version)
            for s in specs
        ),
        throttle_time=0,
        **feature_fields,
    )
    encoded = encode_response_body(API_KEY, ctx.api_version, answer)
    services.response_cache.put(key, encoded, version)
    return encoded


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    """``error`` at the top level; with UNSUPPORTED_VERSION, ApiVersions' own range, as
    Kafka (KIP-511) answers so that the client can retry with a version we speak."""
    b = response_builder(API_KEY, ctx.api_version)
    api_keys: tuple[Any, ...] = ()
    if error is ErrorCode.unsupported_version:
        api_keys = tuple(
            b.ApiVersion(api_key=s.api_key, min_version=s.min_version, max_version=s.max_version)
            for s in ctx.services.api_specs
            if s.api_key == API_KEY
        )
    return b.ApiVersionsResponse(error_code=error, api_keys=api_keys, throttle_time=0)
