"""CreateDelegationToken (key 38, v1-3): a token for the requester, or for another owner.

Behavior (Kafka 4's ``KafkaApis.handleCreateTokenRequest`` then the controller's
``DelegationTokenControlManager.createDelegationToken``):

- DELEGATION_TOKEN_REQUEST_NOT_ALLOWED over PLAINTEXT, one-way TLS or a token-authenticated
  connection (``delegation_token_common.py``);
- the owner is the requester, or (v3, KIP-373) the named owner: asking for another owner
  needs CREATE_TOKENS on that USER resource (``User:bob``), else
  DELEGATION_TOKEN_AUTHORIZATION_FAILED;
- a renewer that is not a ``User`` is INVALID_PRINCIPAL_TYPE;
- without ``delegation.token.secret.key``, DELEGATION_TOKEN_AUTH_DISABLED;
- else a token: id, HMAC, issue, expiry and max timestamps (``delegation_token_manager.py``),
  kept by the cluster. Error answers carry the owner and requester, timestamps -1, an
  empty id and HMAC, as Kafka's ``prepareResponse``.

Version notes: v1 as v0 (removed in Kafka 4, KIP-896); v2 flexible; v3 names the owner
and answers the token requester.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.handlers.delegation_token_common import (
    ERROR_TIMESTAMP,
    allow_token_requests,
    enabled_manager,
    principal_of,
)
from broker.security.authorizer.authorization import AclOperation, ResourceType, authorize
from broker.security.delegation_token_store import TokenInformation
from broker.security.principal import USER_TYPE, KafkaPrincipal
from broker.server.context import RequestContext
from protocol.builders import response_builder

API_KEY = 38
MIN_VERSION = 1
MAX_VERSION = 3


def _owner(ctx: RequestContext, request: Any) -> KafkaPrincipal:
    name = getattr(request, "owner_principal_name", None)
    if not name:
        return ctx.connection.principal
    return principal_of(request.owner_principal_type or USER_TYPE, name)


def handle(ctx: RequestContext, request: Any) -> Any:
    requester = ctx.connection.principal
    owner = _owner(ctx, request)
    if not allow_token_requests(ctx):
        return _error(ctx, ErrorCode.delegation_token_request_not_allowed, owner)
    if owner != requester and not authorize(
        ctx, AclOperation.CREATE_TOKENS, ResourceType.USER, str(owner)
    ):
        return _error(ctx, ErrorCode.delegation_token_authorization_failed, owner)
    renewers = [principal_of(r.principal_type, r.principal_name) for r in request.renewers]
    if any(r.principal_type != USER_TYPE for r in renewers):
        return _error(ctx, ErrorCode.invalid_principal_type, owner)
    manager = enabled_manager(ctx)
    if manager is None:
        return _error(ctx, ErrorCode.delegation_token_auth_disabled, owner)
    lifetime_ms = int(request.max_lifetime.total_seconds() * 1000)
    result = manager.create(requester, owner, renewers, lifetime_ms)
    if result.token is None:
        return _error(ctx, result.error, owner)
    return _response(ctx, result.token, result.hmac)


def _response(ctx: RequestContext, token: TokenInformation, hmac: bytes) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    return b.CreateDelegationTokenResponse(
        error_code=ErrorCode.none,
        principal_type=token.owner.principal_type,
        principal_name=token.owner.name,
        token_requester_principal_type=token.token_requester.principal_type,
        token_requester_principal_name=token.token_requester.name,
        issue_timestamp=token.issue_timestamp_ms,
        expiry_timestamp=token.expiry_timestamp_ms,
        max_timestamp=token.max_timestamp_ms,
        token_id=token.token_id,
        hmac=hmac,
        throttle_time=0,
    )


def _error(ctx: RequestContext, error: ErrorCode, owner: KafkaPrincipal) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    requester = ctx.connection.principal
    return b.CreateDelegationTokenResponse(
        error_code=error,
        principal_type=owner.principal_type,
        principal_name=owner.name,
        token_requester_principal_type=requester.principal_type,
        token_requester_principal_name=requester.name,
        issue_timestamp=ERROR_TIMESTAMP,
        expiry_timestamp=ERROR_TIMESTAMP,
        max_timestamp=ERROR_TIMESTAMP,
        token_id="",
        hmac=b"",
        throttle_time=0,
    )


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    return _error(ctx, error, _owner(ctx, request))
