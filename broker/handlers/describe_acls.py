"""DescribeAcls (key 29): the cluster's ACLs that match a filter (``AclApis``).

Without an authorizer, SECURITY_DISABLED at the top ("No Authorizer is configured."), no
resources, as Kafka. With one, the caller needs CLUSTER DESCRIBE (else
CLUSTER_AUTHORIZATION_FAILED); a filter with an unknown part is INVALID_REQUEST; the
matching ACLs are grouped by resource pattern.

Differences from Kafka: none known. Throttle time 0.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.handlers import acls
from broker.handlers.base import error_message
from broker.security.authorizer.authorization import AclOperation, authorize_cluster
from broker.server.context import RequestContext

API_KEY = 29
MIN_VERSION = 1
MAX_VERSION = 3


def handle(ctx: RequestContext, request: Any) -> Any:
    services = ctx.services
    version = ctx.api_version
    if services.security.authorizer is None:
        return acls.describe_acls(API_KEY, version, ErrorCode.security_disabled, acls.NO_AUTHORIZER)
    if not authorize_cluster(ctx, AclOperation.DESCRIBE):
        return acls.describe_acls(
            API_KEY, version, ErrorCode.cluster_authorization_failed, acls.CLUSTER_DENIED
        )
    acl_filter = acls.binding_filter(request)
    if acl_filter.is_unknown:
        return acls.describe_acls(
            API_KEY, version, ErrorCode.invalid_request, "The filter has unknown elements."
        )
    matching = services.security.acls.describe(acl_filter)
    return acls.describe_acls(API_KEY, version, ErrorCode.none, None, matching)


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    return acls.describe_acls(API_KEY, ctx.api_version, error, error_message(error))
