"""RenewDelegationToken (key 39, v1-2): push a token's expiry further, up to its max.

Behavior (Kafka 4's ``KafkaApis.handleRenewTokenRequest`` then the controller's
``DelegationTokenControlManager.renewDelegationToken``):

- DELEGATION_TOKEN_REQUEST_NOT_ALLOWED over PLAINTEXT, one-way TLS or a token-authenticated
  connection;
- DELEGATION_TOKEN_AUTH_DISABLED without ``delegation.token.secret.key``;
- the token is found by its HMAC (DELEGATION_TOKEN_NOT_FOUND), must not have expired
  (DELEGATION_TOKEN_EXPIRED) and is renewed by its owner or a renewer only
  (DELEGATION_TOKEN_OWNER_MISMATCH); the new expiry is ``min(max, now +
  min(delegation.token.expiry.time.ms, the period when > 0))``. Errors answer expiry -1.

Version notes: v1 as v0 (removed in Kafka 4, KIP-896); v2 flexible.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.handlers.delegation_token_common import (
    ERROR_TIMESTAMP,
    allow_token_requests,
    enabled_manager,
)
from broker.server.context import RequestContext
from protocol.builders import response_builder

API_KEY = 39
MIN_VERSION = 1
MAX_VERSION = 2


def handle(ctx: RequestContext, request: Any) -> Any:
    if not allow_token_requests(ctx):
        return error_response(ctx, request, ErrorCode.delegation_token_request_not_allowed)
    manager = enabled_manager(ctx)
    if manager is None:
        return error_response(ctx, request, ErrorCode.delegation_token_auth_disabled)
    period_ms = int(request.renew_period.total_seconds() * 1000)
    result = manager.renew(ctx.connection.principal, bytes(request.hmac), period_ms)
    if result.token is None:
        return error_response(ctx, request, result.error)
    b = response_builder(API_KEY, ctx.api_version)
    return b.RenewDelegationTokenResponse(
        error_code=ErrorCode.none,
        expiry_timestamp=result.token.expiry_timestamp_ms,
        throttle_time=0,
    )


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    return b.RenewDelegationTokenResponse(
        error_code=error, expiry_timestamp=ERROR_TIMESTAMP, throttle_time=0
    )
