"""AddOffsetsToTxn (key 25): a transaction will commit offsets of a consumer group.

As Kafka: the group's ``__consumer_offsets`` partition is added to the transaction
(``handle_add_partitions_to_transaction``), so the transaction's marker reaches the
offsets the producer then commits with TxnOffsetCommit. The request waits in the Produce
purgatory while the new partition set is written to ``__transaction_state``. Errors as
AddPartitionsToTxn's (INVALID_PRODUCER_EPOCH for PRODUCER_FENCED before v2). The offsets
topic is created here if it does not exist yet.

With an authorizer: WRITE on the transactional id (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED), READ on the group (else GROUP_AUTHORIZATION_FAILED).

Differences from Kafka: throttle time 0.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import OFFSETS_TOPIC
from broker.handlers.group_common import answer_when_called, group_denied
from broker.handlers.txn_common import fenced_error_for_version, txn_id_denied
from broker.server.context import RequestContext
from protocol.builders import response_builder

API_KEY = 25
MIN_VERSION = 0
MAX_VERSION = 4

PRODUCER_FENCED_VERSION = 2


def _response(ctx: RequestContext, error: ErrorCode) -> Any:
    error = fenced_error_for_version(error, ctx.api_version, PRODUCER_FENCED_VERSION)
    b = response_builder(API_KEY, ctx.api_version)
    return b.AddOffsetsToTxnResponse(throttle_time=0, error_code=error)


def handle(ctx: RequestContext, request: Any) -> Any:
    if txn_id_denied(ctx, request.transactional_id):
        return _response(ctx, ErrorCode.transactional_id_authorization_failed)
    if group_denied(ctx, request.group_id):
        return _response(ctx, ErrorCode.group_authorization_failed)
    if not request.group_id:
        return _response(ctx, ErrorCode.invalid_group_id)
    groups = ctx.services.coordinators.group_metadata_manager
    groups.ensure_offsets_topic()
    offsets_partition = (OFFSETS_TOPIC, groups.partition_for(request.group_id))

    def start(callback: Callable[[ErrorCode], None]) -> None:
        ctx.services.coordinators.txn.handle_add_partitions_to_transaction(
            request.transactional_id,
            int(request.producer_id),
            int(request.producer_epoch),
            [offsets_partition],
            callback,
            parked_request=ctx,
        )

    return answer_when_called(start, lambda error: _response(ctx, error))


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    return _response(ctx, error)
