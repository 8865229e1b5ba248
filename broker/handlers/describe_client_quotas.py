"""DescribeClientQuotas (key 48): the cluster's client quotas matching a filter.

As Kafka 4's broker (``ClientQuotasImage.describe``): each filter component names an
entity type (``user``, ``client-id``, ``ip``) and a match — an exact name, the default
(``<default>``), or any specified name; ``strict`` leaves out entities with other types.
A bad filter answers its error at the top with no entries: INVALID_REQUEST (an empty or
repeated type, a match string where the match type takes none or none where it needs
one, an unknown match type, an ip beside a user or client id) or UNSUPPORTED_VERSION for
an unknown entity type. An entity's default name is null.

Differences from Kafka: none known (the quotas are ``broker/quota/client_quota_store.py``).

With an authorizer, DESCRIBE_CONFIGS on the cluster (else CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.handlers.base import error_message
from broker.quota.client_quota_store import ClientQuotaStore, QuotaFilterError
from broker.security.authorizer.authorization import AclOperation, cluster_denied
from broker.server.context import RequestContext
from protocol.builders import response_builder

API_KEY = 48
MIN_VERSION = 0
MAX_VERSION = 1


def handle(ctx: RequestContext, request: Any) -> Any:
    if cluster_denied(ctx, AclOperation.DESCRIBE_CONFIGS):
        return error_response(ctx, request, ErrorCode.cluster_authorization_failed)
    store = _store(ctx)
    components = [(c.entity_type, int(c.match_type), c.match) for c in request.components]
    try:
        found = store.describe(components, bool(request.strict))
    except QuotaFilterError as exc:
        return _response(ctx, exc.error, exc.message, None)
    b = response_builder(API_KEY, ctx.api_version)
    entries = tuple(
        b.EntryData(
            entity=tuple(b.EntityData(entity_type=k, entity_name=n) for k, n in entity),
            values=tuple(b.ValueData(key=k, value=v) for k, v in sorted(values.items())),
        )
        for entity, values in found
    )
    return _response(ctx, ErrorCode.none, None, entries)


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    return _response(ctx, error, error_message(error), None)


def _store(ctx: RequestContext) -> ClientQuotaStore:
    quotas = ctx.services.quota_managers
    return quotas.store if quotas is not None else ClientQuotaStore()


def _response(
    ctx: RequestContext, error: ErrorCode, message: str | None, entries: tuple[Any, ...] | None
) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    return b.DescribeClientQuotasResponse(
        throttle_time=0, error_code=error, error_message=message, entries=entries
    )
