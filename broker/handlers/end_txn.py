"""EndTxn (key 26): commit or abort the producer's transaction.

Versions 0-5.

Behavior:
- The coordinator (``TransactionCoordinator.handle_end_transaction``, ``txn_end.py``)
  writes PrepareCommit or PrepareAbort to ``__transaction_state`` — the request waits in
  the Produce purgatory until the in-sync replicas have it — and answers then; the
  markers (WriteTxnMarkers to every partition's leader) and CompleteCommit/CompleteAbort
  follow in the background.
- Errors are Kafka's: INVALID_TXN_STATE (ending a transaction that is not open, or
  committing one being aborted), CONCURRENT_TRANSACTIONS (the same end already in
  progress), PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v2),
  INVALID_PRODUCER_ID_MAPPING, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
  COORDINATOR_NOT_AVAILABLE.
- With an authorizer, WRITE on the transactional id (else
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED).

Version notes:
- v0-1: INVALID_PRODUCER_EPOCH for a fenced producer; v2+: PRODUCER_FENCED (KIP-588).
- v3: flexible.
- v4: TRANSACTION_ABORTABLE may be answered (KIP-890); nothing here produces it.
- v5 (KIP-890 part 2, transactions v2, Kafka's ``transactionVersionForEndTxn``): the
  client runs transactions v2 — every end bumps the producer epoch, the answer carries
  the producer id and epoch to use next, a retry is recognised by its epoch, and an abort
  with nothing added is allowed. Clients send v5 once the cluster finalized
  ``transaction.version`` 2 (ApiVersions); older versions keep the v1 rules whatever
  the level.

Differences from Kafka: throttle time 0.
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
MAX_VERSION = 5

PRODUCER_FENCED_VERSION = 2
# The first version of a transactions-v2 client (``transactionVersionForEndTxn``).
TRANSACTIONS_V2_VERSION = 5

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1

EndTxnResult = tuple[ErrorCode, int, int]


def _response(
    ctx: RequestContext,
    error: ErrorCode,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
) -> Any:
    error = fenced_error_for_version(error, ctx.api_version, PRODUCER_FENCED_VERSION)
    b = response_builder(API_KEY, ctx.api_version)
    if ctx.api_version >= TRANSACTIONS_V2_VERSION:
        return b.EndTxnResponse(
            throttle_time=0,
            error_code=error,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
        )
    return b.EndTxnResponse(throttle_time=0, error_code=error)


def handle(ctx: RequestContext, request: Any) -> Any:
    if txn_id_denied(ctx, request.transactional_id):
        return error_response(ctx, request, ErrorCode.transactional_id_authorization_failed)
    client_transaction_version = 2 if ctx.api_version >= TRANSACTIONS_V2_VERSION else 0

    def start(callback: Callable[[EndTxnResult], None]) -> None:
        ctx.services.coordinators.txn.handle_end_transaction(
            request.transactional_id,
            int(request.producer_id),
            int(request.producer_epoch),
            bool(request.committed),
            lambda error, producer_id, epoch: callback((error, producer_id, epoch)),
            parked_request=ctx,
            client_transaction_version=client_transaction_version,
        )

    return answer_when_called(start, lambda result: _response(ctx, *result))


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    return _response(ctx, error)
