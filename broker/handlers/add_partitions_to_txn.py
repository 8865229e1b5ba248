"""AddPartitionsToTxn (key 24): partitions a transactional producer is about to write.

v0-3 come from producers (one transaction); v4+ from brokers (several transactions;
``verify_only`` asks whether the partitions are already in the transaction, Kafka's
KIP-890 verification, answered without writing anything). As Kafka: a partition of an
unknown topic fails the whole transaction (UNKNOWN_TOPIC_OR_PARTITION for it,
OPERATION_NOT_ATTEMPTED for the others); otherwise the coordinator adds them
(``TransactionCoordinator.handle_add_partitions_to_transaction``) and the request waits
in the Produce purgatory while the new partition set is written to
``__transaction_state``; every partition of the transaction gets its answer. Errors are
Kafka's: INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED (INVALID_PRODUCER_EPOCH for v0-1),
CONCURRENT_TRANSACTIONS while the previous transaction's markers are being written,
NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS.

With an authorizer: v4+ needs CLUSTER_ACTION (else CLUSTER_AUTHORIZATION_FAILED); v0-3
WRITE on the transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and on each
topic (else TOPIC_AUTHORIZATION_FAILED, the others OPERATION_NOT_ATTEMPTED).

Transactions v2 (Kafka's ``transactionVersionForAddPartitionsToTxn``): v4+ comes from a
partition leader adding the partitions of a Produce v12+ or TxnOffsetCommit v5+
(``verify_only`` false, ``broker/txn/add_partitions_to_txn_manager.py``), and the
transaction then runs with client transaction version 2 (its EndTxn bumps the epoch);
v0-3 keep version 0. A verification of a partition not in the transaction is
TRANSACTION_ABORTABLE from v5 (Kafka 4's answer), INVALID_TXN_STATE for v4 (which
predates the error).

Differences from Kafka: CLUSTER_AUTHORIZATION_FAILED of v4+ is answered per partition
(Kafka: at the top); throttle time 0.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from broker.handlers.group_common import answer_when_called
from broker.handlers.txn_common import fenced_error_for_version, txn_id_denied
from broker.security.authorizer.authorization import (
    AclOperation,
    ResourceType,
    authorize_cluster,
    filter_by_authorized,
)
from broker.server.context import RequestContext
from protocol.builders import Builder, response_builder

API_KEY = 24
MIN_VERSION = 0
MAX_VERSION = 5

# KIP-588: PRODUCER_FENCED from v2; older clients know INVALID_PRODUCER_EPOCH.
PRODUCER_FENCED_VERSION = 2
BATCHED_VERSION = 4
# KIP-890: the first version whose callers know TRANSACTION_ABORTABLE.
TRANSACTION_ABORTABLE_VERSION = 5

TopicPartition = tuple[str, int]
# One transaction's request: (transactional id, producer id, epoch, verify only, partitions).
Txn = tuple[str, int, int, bool, list[TopicPartition]]
Results = dict[str, dict[TopicPartition, ErrorCode]]


def _transactions(ctx: RequestContext, request: Any) -> list[Txn]:
    if ctx.api_version < BATCHED_VERSION:
        return [
            (
                request.v3_and_below_transactional_id,
                int(request.v3_and_below_producer_id),
                int(request.v3_and_below_producer_epoch),
                False,
                [(t.name, int(p)) for t in request.v3_and_below_topics for p in t.partitions],
            )
        ]
    return [
        (
            t.transactional_id,
            int(t.producer_id),
            int(t.producer_epoch),
            bool(t.verify_only),
            [(topic.name, int(p)) for topic in t.topics for p in topic.partitions],
        )
        for t in request.transactions
    ]


def topic_partitions(ctx: RequestContext, request: Any) -> list[tuple[str | None, int | None]]:
    return [tp for txn in _transactions(ctx, request) for tp in txn[4]]


def _topic_results(b: Builder, errors: dict[TopicPartition, ErrorCode]) -> tuple[Any, ...]:
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), error in errors.items():
        by_topic.setdefault(topic, []).append(
            b.AddPartitionsToTxnPartitionResult(
                partition_index=partition, partition_error_code=error
            )
        )
    return tuple(
        b.AddPartitionsToTxnTopicResult(name=name, results_by_partition=tuple(parts))
        for name, parts in by_topic.items()
    )


def _response(ctx: RequestContext, results: Results) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    if ctx.api_version < BATCHED_VERSION:
        errors = next(iter(results.values()), {})
        return b.AddPartitionsToTxnResponse(
            throttle_time=0, results_by_topic_v3_and_below=_topic_results(b, errors)
        )
    return b.AddPartitionsToTxnResponse(
        throttle_time=0,
        error_code=ErrorCode.none,
        results_by_transaction=tuple(
            b.AddPartitionsToTxnResult(
                transactional_id=transactional_id, topic_results=_topic_results(b, errors)
            )
            for transactional_id, errors in results.items()
        ),
    )


def handle(ctx: RequestContext, request: Any) -> Any:
    txns = _transactions(ctx, request)
    if ctx.services.security.authorizer is not None:
        refused = _authorization_errors(ctx, request, txns)
        if refused is not None:
            return refused
    if not txns:
        return _response(ctx, {})
    coordinator = ctx.services.coordinators.txn
    metadata = ctx.services.metadata

    def start(callback: Callable[[Results], None]) -> None:
        results: Results = {}
        answered = 0

        def done(transactional_id: str, errors: dict[TopicPartition, ErrorCode]) -> None:
            nonlocal answered
            results[transactional_id] = errors
            answered += 1
            if answered == len(txns):
                callback(results)

        for transactional_id, producer_id, epoch, verify_only, partitions in txns:
            unknown = [tp for tp in partitions if metadata.partition_state(*tp) is None]
            if unknown:
                done(
                    transactional_id,
                    {
                        tp: ErrorCode.unknown_topic_or_partition
                        if tp in unknown
                        else ErrorCode.operation_not_attempted
                        for tp in partitions
                    },
                )
            elif verify_only:
                verified = coordinator.handle_verify_partitions_in_transaction(
                    transactional_id, producer_id, epoch, partitions
                )
                if ctx.api_version < TRANSACTION_ABORTABLE_VERSION:
                    verified = {
                        tp: ErrorCode.invalid_txn_state
                        if error is ErrorCode.transaction_abortable
                        else error
                        for tp, error in verified.items()
                    }
                done(transactional_id, verified)
            else:
                coordinator.handle_add_partitions_to_transaction(
                    transactional_id,
                    producer_id,
                    epoch,
                    partitions,
                    _answer_all(ctx, transactional_id, partitions, done),
                    parked_request=ctx,
                    client_transaction_version=2 if ctx.api_version >= BATCHED_VERSION else 0,
                )

    return answer_when_called(start, lambda results: _response(ctx, results))


def _authorization_errors(ctx: RequestContext, request: Any, txns: list[Txn]) -> Any:
    """Kafka's checks: a broker's batched request (v4+) needs CLUSTER_ACTION; a producer's
    WRITE on its transactional id, then WRITE on each topic (TOPIC_AUTHORIZATION_FAILED
    for those denied, OPERATION_NOT_ATTEMPTED for the others). None when allowed."""
    if ctx.api_version >= BATCHED_VERSION:
        if authorize_cluster(ctx, AclOperation.CLUSTER_ACTION):
            return None
        return error_response(ctx, request, ErrorCode.cluster_authorization_failed)
    transactional_id, _, _, _, partitions = txns[0]
    if txn_id_denied(ctx, transactional_id):
        return error_response(ctx, request, ErrorCode.transactional_id_authorization_failed)
    names = {topic for topic, _ in partitions}
    denied = names - filter_by_authorized(ctx, AclOperation.WRITE, ResourceType.TOPIC, names)
    if not denied:
        return None
    return _response(
        ctx,
        {
            transactional_id: {
                tp: ErrorCode.topic_authorization_failed
                if tp[0] in denied
                else ErrorCode.operation_not_attempted
                for tp in partitions
            }
        },
    )


def _answer_all(
    ctx: RequestContext,
    transactional_id: str,
    partitions: list[TopicPartition],
    done: Callable[[str, dict[TopicPartition, ErrorCode]], None],
) -> Callable[[ErrorCode], None]:
    def on_error(error: ErrorCode) -> None:
        error = fenced_error_for_version(error, ctx.api_version, PRODUCER_FENCED_VERSION)
        done(transactional_id, dict.fromkeys(partitions, error))

    return on_error


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    """``error`` for every partition of every transaction."""
    return _response(
        ctx,
        {txn[0]: dict.fromkeys(txn[4], error) for txn in _transactions(ctx, request)},
    )
