"""DeleteAcls (key 31): the cluster's ACLs matching each filter, removed and returned.

Without an authorizer, SECURITY_DISABLED for every filter ("No Authorizer is
configured."), as Kafka. With one, the caller needs CLUSTER ALTER (else
CLUSTER_AUTHORIZATION_FAILED for every filter); a filter with an unknown part is
INVALID_REQUEST ("Unknown patternFilter." / "Unknown entryFilter."); each filter's result
lists the ACLs it removed (``AclControlManager.deleteAcls``), all in one durable write.

Differences from Kafka: none known. Throttle time 0.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.handlers import acls
from broker.handlers.base import error_message
from broker.security.authorizer.authorization import AclOperation, authorize_cluster
from broker.server.context import RequestContext

API_KEY = 31
MIN_VERSION = 1
MAX_VERSION = 3


def handle(ctx: RequestContext, request: Any) -> Any:
    services = ctx.services
    if services.security.authorizer is None:
        return acls.delete_acls(
            API_KEY, ctx.api_version, request, ErrorCode.security_disabled, acls.NO_AUTHORIZER
        )
    if not authorize_cluster(ctx, AclOperation.ALTER):
        return acls.delete_acls(
            API_KEY,
            ctx.api_version,
            request,
            ErrorCode.cluster_authorization_failed,
            acls.CLUSTER_DENIED,
        )
    filters = [acls.binding_filter(f) for f in request.filters]
    results = services.security.acls.delete(filters)
    return acls.delete_acls_results(API_KEY, ctx.api_version, results)


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    return acls.delete_acls(API_KEY, ctx.api_version, request, error, error_message(error))
