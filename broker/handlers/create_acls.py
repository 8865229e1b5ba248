"""CreateAcls (key 30): the cluster's ACLs, added (``AclApis.handleCreateAcls``).

Without an authorizer, SECURITY_DISABLED for every creation ("No Authorizer is
configured."), as Kafka. With one, the caller needs CLUSTER ALTER (else
CLUSTER_AUTHORIZATION_FAILED for every creation); each creation is validated as Kafka's
broker and controller do (INVALID_REQUEST with Kafka's message, ``acl_store.py``) and the
valid ones are added in one durable write.

Differences from Kafka: the ACLs are in force when the answer leaves (Kafka's brokers see
them once the metadata log reaches them); a principal that is not ``type:name`` is
refused. Throttle time 0.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.handlers import acls
from broker.handlers.base import error_message
from broker.security.authorizer.acl_store import binding_of
from broker.security.authorizer.authorization import AclOperation, authorize_cluster
from broker.server.context import RequestContext

API_KEY = 30
MIN_VERSION = 1
MAX_VERSION = 3


def handle(ctx: RequestContext, request: Any) -> Any:
    services = ctx.services
    if services.security.authorizer is None:
        return acls.create_acls(
            API_KEY, ctx.api_version, request, ErrorCode.security_disabled, acls.NO_AUTHORIZER
        )
    if not authorize_cluster(ctx, AclOperation.ALTER):
        return acls.create_acls(
            API_KEY,
            ctx.api_version,
            request,
            ErrorCode.cluster_authorization_failed,
            acls.CLUSTER_DENIED,
        )
    bindings = [
        binding_of(
            c.resource_type,
            c.resource_name,
            c.resource_pattern_type,
            c.principal,
            c.host,
            c.operation,
            c.permission_type,
        )
        for c in request.creations
    ]
    return acls.create_acls_results(
        API_KEY, ctx.api_version, services.security.acls.create(bindings)
    )


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    return acls.create_acls(API_KEY, ctx.api_version, request, error, error_message(error))
