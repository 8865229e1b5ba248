"""EndTxn (key 26): commit or abort the producer's transaction.

The coordinator (``TransactionCoordinator.handle_end_transaction``) writes PrepareCommit
or PrepareAbort to ``__transaction_state`` — the request waits in the Produce purgatory
until the in-sync replicas have it — and answers then; the markers (WriteTxnMarkers to
every partition's leader) and CompleteCommit/CompleteAbort follow in the background.
Errors are Kafka's: INVALID_TXN_STATE (ending a transaction that is not open, or
committing one being aborted), CONCURRENT_TRANSACTIONS (the same end already in
progress), PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v2), INVALID_PRODUCER_ID_MAPPING,
NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE.

Differences from Kafka: v5 (KIP-890 part 2, an epoch bump per transaction) is not
served; throttle time 0. With an authorizer, WRITE on the transactional id (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from broker.handlers.group_common import answer_when_called
from broker.handlers.txn_common import fenced_error_for_version, txn_id_denied
from broker.server.context import RequestContext
from protocol.builders import response_builder

API_KEY = 26
MIN_VERSION = 0
MAX_VERSION = 4

PRODUCER_FENCED_VERSION = 2


def _response(ctx: RequestContext, error: ErrorCode) -> Any:
    error = fenced_error_for_version(error, ctx.api_version, PRODUCER_FENCED_VERSION)
    b = response_builder(API_KEY, ctx.api_version)
    return b.EndTxnResponse(throttle_time=0, error_code=error)


def handle(ctx: RequestContext, request: Any) -> Any:
    if txn_id_denied(ctx, request.transactional_id):
        return error_response(ctx, request, ErrorCode.transactional_id_authorization_failed)

    def start(callback: Callable[[ErrorCode], None]) -> None:
        ctx.services.coordinators.txn.handle_end_transaction(
            request.transactional_id,
            int(request.producer_id),
            int(request.producer_epoch),
            bool(request.committed),
            callback,
            parked_request=ctx,
        )

    return answer_when_called(start, lambda error: _response(ctx, error))


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    return _response(ctx, error)
