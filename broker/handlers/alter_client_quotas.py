"""AlterClientQuotas (key 49): set and remove client quotas, with Kafka's validation.

Each entry names an entity (``user``, ``client-id``, both, or ``ip``; a null name is the
default) and operations (a key and a value, or a removal). Entries are validated one by
one as Kafka's controller does (``ClientQuotaControlManager``) and answered one by one,
in order: a bad entry gets INVALID_REQUEST with Kafka's message and changes nothing,
the good ones are applied together (durably, with a data directory) — unless
``validate_only``. The change reaches every broker's quota managers at once.

Differences from Kafka: no controller round trip (the quotas are shared in-process);
the answer lists entities in the request's order, as Kafka's does for its request map.

With an authorizer, ALTER_CONFIGS on the cluster (else CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.handlers.base import error_message
from broker.quota.client_quota_store import ClientQuotaStore, QuotaAlteration
from broker.security.authorizer.authorization import AclOperation, cluster_denied
from broker.server.context import RequestContext
from protocol.builders import response_builder

API_KEY = 49
MIN_VERSION = 0
MAX_VERSION = 1


def handle(ctx: RequestContext, request: Any) -> Any:
    if cluster_denied(ctx, AclOperation.ALTER_CONFIGS):
        return error_response(ctx, request, ErrorCode.cluster_authorization_failed)
    quotas = ctx.services.quota_managers
    store = quotas.store if quotas is not None else ClientQuotaStore()
    alterations = [
        QuotaAlteration(
            entity=tuple((e.entity_type, e.entity_name) for e in entry.entity),
            ops=tuple((op.key, None if op.remove else float(op.value)) for op in entry.ops),
        )
        for entry in request.entries
    ]
    results = store.alter(alterations, bool(request.validate_only))
    b = response_builder(API_KEY, ctx.api_version)
    return b.AlterClientQuotasResponse(
        throttle_time=0,
        entries=tuple(
            b.EntryData(
                error_code=result.error,
                error_message=result.message,
                entity=_entity(b, entry),
            )
            for entry, result in zip(request.entries, results, strict=True)
        ),
    )


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    return b.AlterClientQuotasResponse(
        throttle_time=0,
        entries=tuple(
            b.EntryData(
                error_code=error, error_message=error_message(error), entity=_entity(b, entry)
            )
            for entry in request.entries
        ),
    )


def _entity(b: Any, entry: Any) -> tuple[Any, ...]:
    return tuple(
        b.EntityData(entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity
    )
