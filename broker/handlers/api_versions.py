"""ApiVersions (key 18): which APIs and versions this broker speaks.

Differences from Kafka: no feature flags are advertised (``supported_features`` and
``finalized_features`` are empty). An unsupported request version is answered by the
connection layer with Kafka's v0-encoded UNSUPPORTED_VERSION response.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.context import RequestContext
from protocol.builders import response_builder
from protocol.codec import encode_response_body

API_KEY = 18
MIN_VERSION = 0
MAX_VERSION = 4


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
    answer = b.ApiVersionsResponse(
        error_code=ErrorCode.none,
        api_keys=tuple(
            b.ApiVersion(api_key=s.api_key, min_version=s.min_version, max_version=s.max_version)
            for s in specs
        ),
        throttle_time=0,
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
