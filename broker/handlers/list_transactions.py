"""ListTransactions (key 66): the transactional ids this broker coordinates.

As Kafka: filtered by state names (an unknown name is listed in
``unknown_state_filters`` and matches nothing), producer ids, v1's ``duration_filter``
(open longer than that many ms) and v2's ``transactional_id_pattern`` (a regular
expression the whole id must match); COORDINATOR_LOAD_IN_PROGRESS while any
``__transaction_state`` partition led here is loading. An invalid pattern is
INVALID_REQUEST.

Differences from Kafka: no ACLs (every id is listed); the pattern is a Python regular
expression (Java's, in Kafka; they agree on the common syntax).

With an authorizer, only the transactional ids the principal may DESCRIBE are listed.
"""

from __future__ import annotations

import re
from typing import Any

from kio.schema.errors import ErrorCode

from broker.security.authorizer.authorization import (
    AclOperation,
    ResourceType,
    filter_by_authorized,
)
from broker.server.context import RequestContext
from protocol.builders import response_builder

API_KEY = 66
MIN_VERSION = 0
MAX_VERSION = 2


def handle(ctx: RequestContext, request: Any) -> Any:
    pattern = getattr(request, "transactional_id_pattern", None)
    if pattern:
        try:
            re.compile(pattern)
        except re.error:
            return error_response(ctx, request, ErrorCode.invalid_request)
    error, listed, unknown = ctx.services.coordinators.txn.handle_list_transactions(
        [int(p) for p in request.producer_id_filters],
        list(request.state_filters),
        int(getattr(request, "duration_filter", -1)),
        pattern or None,
    )
    if ctx.services.security.authorizer is not None:
        allowed = filter_by_authorized(
            ctx,
            AclOperation.DESCRIBE,
            ResourceType.TRANSACTIONAL_ID,
            (t.transactional_id for t in listed),
            log_if_denied=False,
        )
        listed = [t for t in listed if t.transactional_id in allowed]
    b = response_builder(API_KEY, ctx.api_version)
    return b.ListTransactionsResponse(
        throttle_time=0,
        error_code=error,
        unknown_state_filters=tuple(unknown),
        transaction_states=tuple(
            b.TransactionState(
                transactional_id=t.transactional_id,
                producer_id=t.producer_id,
                transaction_state=t.state.value,
            )
            for t in listed
        ),
    )


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    return b.ListTransactionsResponse(
        throttle_time=0, error_code=error, unknown_state_filters=(), transaction_states=()
    )
