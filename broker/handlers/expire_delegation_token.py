"""ExpireDelegationToken (key 40, v1-2): bring a token's expiry nearer, or end it now.

Behavior (Kafka 4's ``KafkaApis.handleExpireTokenRequest`` then the controller's
``DelegationTokenControlManager.expireDelegationToken``):

- DELEGATION_TOKEN_REQUEST_NOT_ALLOWED over PLAINTEXT, one-way TLS or a token-authenticated
  connection;
- DELEGATION_TOKEN_AUTH_DISABLED without ``delegation.token.secret.key``;
- found by its HMAC (DELEGATION_TOKEN_NOT_FOUND), not expired (DELEGATION_TOKEN_EXPIRED),
  asked by its owner or a renewer (DELEGATION_TOKEN_OWNER_MISMATCH);
- a negative period removes the token at once and the answer's expiry is that period (as
  Kafka's); else the expiry becomes ``min(max, now + period)``. Errors answer expiry -1.

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

API_KEY = 40
MIN_VERSION = 1
MAX_VERSION = 2


def handle(ctx: RequestContext, request: Any) -> Any:
    if not allow_token_requests(ctx):
        return error_response(ctx, request, ErrorCode.delegation_token_request_not_allowed)
    manager = enabled_manager(ctx)
    if manager is None:
        return error_response(ctx, request, ErrorCode.delegation_token_auth_disabled)
    period_ms = int(request.expiry_time_period.total_seconds() * 1000)
    error, expiry = manager.expire(ctx.connection.principal, bytes(request.hmac), period_ms)
    if error is not ErrorCode.none:
        return error_response(ctx, request, error)
    b = response_builder(API_KEY, ctx.api_version)
    return b.ExpireDelegationTokenResponse(
        error_code=ErrorCode.none, expiry_timestamp=expiry, throttle_time=0
    )


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    return b.ExpireDelegationTokenResponse(
        error_code=error, expiry_timestamp=ERROR_TIMESTAMP, throttle_time=0
    )
