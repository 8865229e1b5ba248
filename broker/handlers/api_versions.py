"""ApiVersions (key 18): which APIs and versions this broker speaks.

Differences from Kafka: no feature flags are advertised (``supported_features`` and
``finalized_features`` are empty). An unsupported request version is answered by the
connection layer with Kafka's v0-encoded UNSUPPORTED_VERSION response.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.context import RequestContext
from protocol.api_registry import ApiSpec
from protocol.builders import response_builder

API_KEY = 18
MIN_VERSION = 0
MAX_VERSION = 4


#: The answer never changes for a broker and a version: built once (kio's messages are
#: frozen dataclasses, safe to share). Keyed by the identity of the broker's spec tuple.
_ANSWERS: dict[tuple[int, int], tuple[tuple[ApiSpec, ...], Any]] = {}


def handle(ctx: RequestContext, request: Any) -> Any:
    specs = ctx.services.api_specs
    key = (id(specs), ctx.api_version)
    cached = _ANSWERS.get(key)
    if cached is not None and cached[0] is specs:
        return cached[1]
    b = response_builder(API_KEY, ctx.api_version)
    answer = b.ApiVersionsResponse(
        error_code=ErrorCode.none,
        api_keys=tuple(
            b.ApiVersion(api_key=s.api_key, min_version=s.min_version, max_version=s.max_version)
            for s in specs
        ),
        throttle_time=0,
    )
    _ANSWERS[key] = (specs, answer)
    return answer


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
