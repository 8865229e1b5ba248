"""The one question a handler asks: may this request's principal do this? (Kafka's
``AuthHelper``.)

Every function takes the request's context: the principal and the client's host come from
its connection, the authorizer from its services. Without an authorizer
(``authorizer.class.name`` unset) everything is allowed, after a single ``is None`` check,
so the hot path costs nothing when security is off. Handlers on the hot path test
``ctx.services.security.authorizer is None`` themselves before building anything to ask about.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

from broker.security.authorizer.acl import CLUSTER_NAME, AclOperation, ResourceType
from broker.server.context import RequestContext
from protocol.api_registry import api_name

__all__ = [
    "AclOperation",
    "ResourceType",
    "authorize",
    "authorize_by_resource_type",
    "authorize_cluster",
    "filter_by_authorized",
]

_T = TypeVar("_T")


def authorize(
    ctx: RequestContext,
    operation: AclOperation,
    resource_type: ResourceType,
    name: str,
    *,
    log_if_denied: bool = True,
) -> bool:
    """``AuthHelper.authorize``: one resource, one operation."""
    authorizer = ctx.services.security.authorizer
    if authorizer is None:
        return True
    connection = ctx.connection
    return authorizer.authorize(
        connection.principal,
        connection.client_host,
        operation,
        resource_type,
        name,
        api_name=_api_name(ctx),
        log_if_denied=log_if_denied,
    )


def authorize_cluster(ctx: RequestContext, operation: AclOperation) -> bool:
    """The CLUSTER resource (``kafka-cluster``): admin and inter-broker APIs."""
    return authorize(ctx, operation, ResourceType.CLUSTER, CLUSTER_NAME)


def authorize_by_resource_type(
    ctx: RequestContext, operation: AclOperation, resource_type: ResourceType
) -> bool:
    """``AuthHelper.authorizeByResourceType``: some resource of the type."""
    authorizer = ctx.services.security.authorizer
    if authorizer is None:
        return True
    connection = ctx.connection
    return authorizer.authorize_by_resource_type(
        connection.principal, connection.client_host, operation, resource_type
    )


def filter_by_authorized(
    ctx: RequestContext,
    operation: AclOperation,
    resource_type: ResourceType,
    names: Iterable[_T],
    *,
    log_if_denied: bool = True,
) -> set[_T]:
    """``AuthHelper.filterByAuthorized``: the names (each asked once) that are allowed."""
    distinct = set(names)
    if ctx.services.security.authorizer is None:
        return distinct
    return {
        name
        for name in distinct
        if authorize(ctx, operation, resource_type, str(name), log_if_denied=log_if_denied)
    }


def _api_name(ctx: RequestContext) -> str:
    try:
        return api_name(ctx.header.api_key)
    except Exception:  # an API minikafka does not serve has no name
        return str(ctx.header.api_key)


def cluster_denied(ctx: RequestContext, operation: AclOperation) -> bool:
    """``AuthHelper.authorizeClusterOperation`` as a question: whether an authorizer
    refuses ``operation`` on the cluster (the handler then answers its request's error
    response with CLUSTER_AUTHORIZATION_FAILED)."""
    return ctx.services.security.authorizer is not None and not authorize_cluster(ctx, operation)
