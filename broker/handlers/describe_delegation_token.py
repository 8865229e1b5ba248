"""DescribeDelegationToken (key 41, v1-3): the tokens the requester may see.

Behavior (Kafka 4's ``KafkaApis.handleDescribeTokensRequest`` and
``DelegationTokenManager.filterToken``):

- DELEGATION_TOKEN_REQUEST_NOT_ALLOWED over PLAINTEXT, one-way TLS or a token-authenticated
  connection; DELEGATION_TOKEN_AUTH_DISABLED without ``delegation.token.secret.key``;
- an empty owners list describes nothing; null describes every token; else the tokens
  one of the owners owns or renews;
- of those, a token is shown to its owner and renewers, and to a principal allowed
  DESCRIBE on its DELEGATION_TOKEN resource (the token id) or DESCRIBE_TOKENS on its
  owner's USER resource (KIP-373); others are left out without an error;
- each with its HMAC, owner, requester, renewers and timestamps.

Version notes: v1 as v0 (removed in Kafka 4, KIP-896); v2 flexible; v3 answers the token
requester.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.handlers.delegation_token_common import (
    allow_token_requests,
    enabled_manager,
    principal_of,
)
from broker.security.authorizer.authorization import AclOperation, ResourceType, authorize
from broker.security.delegation_token_store import TokenInformation
from broker.security.principal import KafkaPrincipal
from broker.server.context import RequestContext
from protocol.builders import response_builder

API_KEY = 41
MIN_VERSION = 1
MAX_VERSION = 3


def handle(ctx: RequestContext, request: Any) -> Any:
    if not allow_token_requests(ctx):
        return error_response(ctx, request, ErrorCode.delegation_token_request_not_allowed)
    manager = enabled_manager(ctx)
    if manager is None:
        return error_response(ctx, request, ErrorCode.delegation_token_auth_disabled)
    b = response_builder(API_KEY, ctx.api_version)
    if request.owners is not None and not request.owners:
        return b.DescribeDelegationTokenResponse(
            error_code=ErrorCode.none, tokens=(), throttle_time=0
        )
    owners = (
        None
        if request.owners is None
        else [principal_of(o.principal_type, o.principal_name) for o in request.owners]
    )
    requester = ctx.connection.principal

    def eligible(token: TokenInformation) -> bool:
        return _filter_token(ctx, requester, owners, token)

    tokens = tuple(_described(b, token, hmac) for token, hmac in manager.tokens(eligible))
    return b.DescribeDelegationTokenResponse(
        error_code=ErrorCode.none, tokens=tokens, throttle_time=0
    )


def _filter_token(
    ctx: RequestContext,
    requester: KafkaPrincipal,
    owners: list[KafkaPrincipal] | None,
    token: TokenInformation,
) -> bool:
    """Kafka's ``DelegationTokenManager.filterToken``."""
    if owners is not None and not any(token.owner_or_renewer(o) for o in owners):
        return False
    if token.owner_or_renewer(requester):
        return True
    return authorize(
        ctx, AclOperation.DESCRIBE, ResourceType.DELEGATION_TOKEN, token.token_id
    ) or authorize(ctx, AclOperation.DESCRIBE_TOKENS, ResourceType.USER, str(token.owner))


def _described(b: Any, token: TokenInformation, hmac: bytes) -> Any:
    return b.DescribedDelegationToken(
        principal_type=token.owner.principal_type,
        principal_name=token.owner.name,
        token_requester_principal_type=token.token_requester.principal_type,
        token_requester_principal_name=token.token_requester.name,
        issue_timestamp=token.issue_timestamp_ms,
        expiry_timestamp=token.expiry_timestamp_ms,
        max_timestamp=token.max_timestamp_ms,
        token_id=token.token_id,
        hmac=hmac,
        renewers=tuple(
            b.DescribedDelegationTokenRenewer(
                principal_type=r.principal_type, principal_name=r.name
            )
            for r in token.renewers
        ),
    )


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    return b.DescribeDelegationTokenResponse(error_code=error, tokens=(), throttle_time=0)
