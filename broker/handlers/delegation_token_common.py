"""What the four delegation-token handlers (keys 38-41, KIP-48) share: Kafka's
``KafkaApis.allowTokenRequests`` and the cluster's token manager.

Tokens are asked for over an authenticated channel only: not over PLAINTEXT, not over a
one-way TLS connection (SSL without a client certificate, ``User:ANONYMOUS``), and never
over a connection that itself logged in with a token (a token cannot make, renew or
expire tokens) -- DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, as Kafka's broker answers before
the request reaches its controller.
"""

from __future__ import annotations

from broker.security.delegation_token_manager import DelegationTokenManager
from broker.security.principal import ANONYMOUS, KafkaPrincipal
from broker.server.context import RequestContext

#: Kafka's ``DelegationTokenManager.ErrorTimestamp``: the timestamps of an error answer.
ERROR_TIMESTAMP = -1


def allow_token_requests(ctx: RequestContext) -> bool:
    """Kafka's ``allowTokenRequests``."""
    connection = ctx.connection
    protocol = connection.security_protocol
    return not (
        connection.principal.token_authenticated
        or protocol == "PLAINTEXT"
        or (protocol == "SSL" and connection.principal == ANONYMOUS)
    )


def enabled_manager(ctx: RequestContext) -> DelegationTokenManager | None:
    """The cluster's tokens when ``delegation.token.secret.key`` turns them on, else None
    (DELEGATION_TOKEN_AUTH_DISABLED)."""
    manager = ctx.services.security.delegation_tokens
    return manager if manager is not None and manager.enabled else None


def principal_of(principal_type: str, name: str) -> KafkaPrincipal:
    return KafkaPrincipal(principal_type, name)
