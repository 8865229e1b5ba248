"""ApiVersions (key 18): which APIs and versions this broker speaks.

Feature flags (v3+, KIP-584) as Kafka 4 reports the ones that change what clients may
do here: ``group.version``, supported 0-1, finalized at level 1 while the consumer group
protocol (KIP-848) is enabled (``group.coordinator.rebalance.protocols`` has ``consumer``);
``share.version``, supported 0-1, finalized at level 1 while share groups (KIP-932) are
on (``group.share.enable``); as Kafka's, v3 leaves out supported features whose minimum
is 0.

Differences from Kafka: no other feature (``metadata.version``, ``kraft.version``,
``transaction.version``: nothing here depends on them, and librdkafka does not ask); the
finalized features' epoch is 0. An unsupported request version is answered by the
connection layer with Kafka's v0-encoded UNSUPPORTED_VERSION response.
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

GROUP_VERSION = "group.version"
GROUP_VERSION_SUPPORTED = (0, 1)
# KIP-932's share groups: finalized 1 while they are on (group.share.enable)
SHARE_VERSION = "share.version"
SHARE_VERSION_SUPPORTED = (0, 1)


def handle(ctx: RequestContext, request: Any) -> Any:
    # The answer depends on the version only: encoded once, served from the broker's
    # response cache (which starts over when the cluster changes; cheap to rebuild).
    services = ctx.services
    key = (API_KEY, ctx.api_version)
    cached = services.response_cache.get(key)
    if cached is not None:
        return cached
    version = services.metadata.version
    specs = services.api_specs
    b = response_builder(API_KEY, ctx.api_version)
    features: dict[str, Any] = {}
    if ctx.api_version >= 3:
        supported, finalized = [], []
        for name, (low, high), enabled in (
            (
                GROUP_VERSION,
                GROUP_VERSION_SUPPORTED,
                services.coordinators.consumer_group.config.consumer_protocol_enabled,
            ),
            (
                SHARE_VERSION,
                SHARE_VERSION_SUPPORTED,
                services.coordinators.share_group.config.group_share_enable,
            ),
        ):
            if ctx.api_version >= 4 or low > 0:
                supported.append(
                    b.SupportedFeatureKey(name=name, min_version=low, max_version=high)
                )
            if enabled:
                finalized.append(
                    b.FinalizedFeatureKey(name=name, max_version_level=high, min_version_level=high)
                )
        if supported:
            features["supported_features"] = tuple(supported)
        if finalized:
            features["finalized_features_epoch"] = 0
            features["finalized_features"] = tuple(finalized)
    answer = b.ApiVersionsResponse(
        error_code=ErrorCode.none,
        api_keys=tuple(
            b.ApiVersion(api_key=s.api_key, min_version=s.min_version, max_version=s.max_version)
            for s in specs
        ),
        throttle_time=0,
        **features,
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
