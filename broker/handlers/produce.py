"""Produce (key 0): append batches; acks=all waits in the Produce purgatory.

Idempotent and transactional batches go through the partition's producer state
(``broker/replica/producer_state.py``): a retry of one of a producer's last five batches
is answered with success and the original offsets, an out-of-order sequence with
OUT_OF_ORDER_SEQUENCE_NUMBER, a stale epoch with INVALID_PRODUCER_EPOCH. Control batches
(transaction markers) from a client are INVALID_RECORD: only the transaction coordinator
writes them (``AppendOrigin.COORDINATOR``).

With acks=0 a partition error closes the connection, as Kafka does, since the client
reads no answer to learn from.

With CreateTime, a record further from the broker's clock than
``message.timestamp.before.max.ms`` / ``after.max.ms`` is INVALID_TIMESTAMP for its
partition, with Kafka's ``record_errors`` and error message (KIP-937,
``broker/replica/timestamp_validation.py``).

With an authorizer: a transactional produce without WRITE on its TRANSACTIONAL_ID is
TRANSACTIONAL_ID_AUTHORIZATION_FAILED throughout; a topic without WRITE is
TOPIC_AUTHORIZATION_FAILED (``KafkaApis.handleProduceRequest``).

v13 names each topic by its id (KIP-516): an id the cluster does not know is
UNKNOWN_TOPIC_ID for its partitions (where a name would be UNKNOWN_TOPIC_OR_PARTITION),
and the answer names the topics by the ids asked (``KafkaApis.handleProduceRequest``).

Transactions v2 (KIP-890 part 2): a transactional Produce v12+ adds its partitions to
the transaction itself. Before appending, the leader asks the transactional id's
coordinator to add the partitions of its transactional batches
(``broker/txn/add_partitions_to_txn_manager.py``, Kafka's ``AddPartitionsToTxnManager``
with ``verifyOnly`` false) and appends once it answers; a partition it did not add gets
the coordinator's error as Kafka's ``ReplicaManager`` translates it: INVALID_TXN_STATE
("Partition was not added to the transaction"), the retriable CONCURRENT_TRANSACTIONS,
NETWORK_EXCEPTION, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE and
NOT_COORDINATOR as NOT_ENOUGH_REPLICAS (a client retries it without refreshing its
metadata), the others (INVALID_PRODUCER_EPOCH, INVALID_PRODUCER_ID_MAPPING,
TRANSACTION_ABORTABLE, ...) as they are.

Version notes:
- v3-v10: a transactional batch is written as it comes.
- v11: TRANSACTION_ABORTABLE may be answered (KIP-890 part 1's generic error).
- v12 (transactions v2): the partitions are added by the leader, as above. Clients send
  it once the cluster finalized ``transaction.version`` 2.
- v13: topics by id, as above.

Differences from Kafka: Kafka 3.6+ also verifies, for v11 and below, that a transactional
batch's partition is in the transaction (``transaction.partition.verification.enable``,
KIP-890 part 1); we do not.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import MetadataError, validate_topic_name
from broker.handlers.base import TopicPartitionPairs, error_message
from broker.handlers.topic_names import RequestTopicIds, topic_id, topic_name
from broker.replica.delayed_produce import ProducePartitionStatus, ProduceStatuses
from broker.replica.partition import AppendResult
from broker.security.authorizer.authorization import (
    AclOperation,
    ResourceType,
    authorize,
    filter_by_authorized,
)
from broker.server.context import RequestContext
from broker.txn.add_partitions_to_txn_manager import (
    produce_request_version_to_operation,
)
from protocol.builders import response_builder
from protocol.record_batch import BATCH_HEADER_SIZE, parse_batch_header

API_KEY = 0
MIN_VERSION = 3
MAX_VERSION = 13
#: The first version that names topics by id.
TOPIC_ID_VERSION = 13

_NOBODY_DENIED: frozenset[str] = frozenset()  # no authorizer: nothing made per request


def handle(ctx: RequestContext, request: Any) -> Any:
    acks = int(request.acks)
    timeout_ms = int(request.timeout.total_seconds() * 1000)
    entries: dict[tuple[str, int], bytes] = {}
    refused: ProduceStatuses = {}
    denied = _NOBODY_DENIED
    ids = RequestTopicIds() if ctx.api_version >= TOPIC_ID_VERSION else None
    topics = _named_topics(ctx, request, ids)
    if ctx.services.security.authorizer is not None:
        if not _transactional_id_authorized(ctx, request):
            return error_response(ctx, request, ErrorCode.transactional_id_authorization_failed)
        denied = _denied_topics(ctx, topics)
    for name, topic in topics:
        for data in topic.partition_data:
            tp = (name, int(data.index))
            error = (
                ErrorCode.topic_authorization_failed
                if name in denied
                else _precheck(ctx, name, acks)
            )
            if error is not None:
                refused[tp] = ProducePartitionStatus(AppendResult(error), -1, False)
            else:
                entries[tp] = bytes(data.records or b"")

    if ctx.api_version >= _ADD_PARTITION_VERSION and getattr(request, "transactional_id", None):
        producer = _transactional_producer(entries)
        if producer is not None:
            return _add_partitions_then_append(
                ctx, request, acks, timeout_ms, entries, refused, producer, ids
            )
    return _append(ctx, acks, timeout_ms, entries, refused, ids)


def _append(
    ctx: RequestContext,
    acks: int,
    timeout_ms: int,
    entries: dict[tuple[str, int], bytes],
    refused: ProduceStatuses,
    ids: RequestTopicIds | None,
) -> Any:
    """Append ``entries`` and answer them with ``refused`` (a future while acks=all
    waits; None with acks=0); ``ids``: the topics v13 named by id."""
    manager = ctx.services.replica_manager
    if acks == 0:

        def done(statuses: ProduceStatuses) -> None:
            if any(s.result.error is not ErrorCode.none for s in statuses.values()):
                ctx.close_connection("error in a produce with acks=0")

        manager.append_records(timeout_ms, acks, entries, done, ctx)
        if refused or (ids is not None and ids.unknown):
            ctx.close_connection("error in a produce with acks=0")
        return None

    future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    def respond(statuses: ProduceStatuses) -> None:
        if not future.done():
            future.set_result(_response(ctx, {**refused, **statuses}, ids))

    manager.append_records(timeout_ms, acks, entries, respond, ctx)
    if future.done():
        return future.result()
    return future


# The first version whose transactional partitions the leader adds (transactions v2).
_ADD_PARTITION_VERSION = 12
_TransactionalProducer = tuple[int, int, frozenset[tuple[str, int]]]
# Kafka's ReplicaManager: coordinator errors an older client may not retry well become
# NOT_ENOUGH_REPLICAS (retriable, no metadata refresh).
_RETRIABLE_VERIFICATION_ERRORS = frozenset(
    {
        ErrorCode.concurrent_transactions,
        ErrorCode.network_exception,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.coordinator_not_available,
        ErrorCode.not_coordinator,
    }
)


def _transactional_producer(
    entries: dict[tuple[str, int], bytes],
) -> _TransactionalProducer | None:
    """The producer id and epoch of the transactional batches, and their partitions
    (None: no transactional batch)."""
    producer: tuple[int, int] | None = None
    partitions = []
    for tp, records in entries.items():
        if len(records) < BATCH_HEADER_SIZE:
            continue  # the append refuses it
        header = parse_batch_header(records)
        if header.producer_id >= 0 and header.is_transactional:
            producer = producer or (header.producer_id, header.producer_epoch)
            partitions.append(tp)
    if producer is None:
        return None
    return producer[0], producer[1], frozenset(partitions)


def _add_partitions_then_append(
    ctx: RequestContext,
    request: Any,
    acks: int,
    timeout_ms: int,
    entries: dict[tuple[str, int], bytes],
    refused: ProduceStatuses,
    producer: _TransactionalProducer,
    ids: RequestTopicIds | None,
) -> Any:
    """Transactions v2: the coordinator adds the partitions, then the batches go in."""
    future: asyncio.Future[Any] | None = None
    if acks != 0:
        future = asyncio.get_running_loop().create_future()

    def added(unverified: dict[tuple[str, int], ErrorCode]) -> None:
        for tp, error in unverified.items():
            entries.pop(tp, None)
            refused[tp] = ProducePartitionStatus(_verification_error(error), -1, False)
        answer = _append(ctx, acks, timeout_ms, entries, refused, ids)
        if future is None or future.done():
            return
        if isinstance(answer, asyncio.Future):
            answer.add_done_callback(lambda done: _resolve(future, done.result()))
        else:
            future.set_result(answer)

    producer_id, epoch, partitions = producer
    ctx.services.add_partitions_to_txn_manager.add_or_verify_transaction(
        str(request.transactional_id),
        producer_id,
        epoch,
        partitions,
        added,
        produce_request_version_to_operation(ctx.api_version),
    )
    if future is not None and future.done():  # answered at once (no coordinator)
        return future.result()
    return future


def _resolve(future: asyncio.Future[Any], answer: Any) -> None:
    if not future.done():
        future.set_result(answer)


def _verification_error(error: ErrorCode) -> AppendResult:
    """Kafka's ``ReplicaManager`` translation of a coordinator's answer."""
    if error is ErrorCode.invalid_txn_state:
        return AppendResult(error, error_message="Partition was not added to the transaction")
    if error in _RETRIABLE_VERIFICATION_ERRORS:
        return AppendResult(
            ErrorCode.not_enough_replicas,
            error_message="Unable to verify the partition has been added to the transaction. "
            f"Underlying error: {error.name.upper()}",
        )
    return AppendResult(error)


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    """``error`` for every partition of the request. With acks=0 there is no answer:
    the connection is closed instead, as Kafka does on an error."""
    if int(request.acks) == 0:
        ctx.close_connection(f"{error.name.upper()} on a produce with acks=0")
        return None
    b = response_builder(API_KEY, ctx.api_version)
    return b.ProduceResponse(
        responses=tuple(
            b.TopicProduceResponse(
                name=topic_name(ctx, topic) or "",
                topic_id=topic_id(topic),
                partition_responses=tuple(
                    b.PartitionProduceResponse(
                        index=int(data.index),
                        error_code=error,
                        base_offset=-1,
                        log_append_time=None,
                        log_start_offset=-1,
                        record_errors=(),
                        error_message=error_message(error),
                    )
                    for data in topic.partition_data
                ),
            )
            for topic in request.topic_data
        ),
        throttle_time=0,
    )


def topic_partitions(ctx: RequestContext, request: Any) -> TopicPartitionPairs:
    pairs: TopicPartitionPairs = []
    for topic in request.topic_data:
        name = topic_name(ctx, topic)
        pairs.extend((name, int(data.index)) for data in topic.partition_data)
    return pairs


def _named_topics(
    ctx: RequestContext, request: Any, ids: RequestTopicIds | None
) -> list[tuple[str, Any]]:
    """Each topic entry with its name; by id (``ids`` given), the entries of ids the
    cluster does not know are left out and kept in ``ids.unknown``."""
    if ids is None:
        return [(topic.name, topic) for topic in request.topic_data]
    named: list[tuple[str, Any]] = []
    for topic in request.topic_data:
        name = ids.resolve(ctx, topic, [int(data.index) for data in topic.partition_data])
        if name is not None:
            named.append((name, topic))
    return named


def _transactional_id_authorized(ctx: RequestContext, request: Any) -> bool:
    """A transactional produce needs WRITE on its TRANSACTIONAL_ID (``handleProduceRequest``)."""
    transactional_id = getattr(request, "transactional_id", None)
    return transactional_id is None or authorize(
        ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id
    )


def _denied_topics(ctx: RequestContext, topics: list[tuple[str, Any]]) -> frozenset[str]:
    """The topics the principal may not WRITE: TOPIC_AUTHORIZATION_FAILED for each."""
    names = {name for name, _ in topics}
    allowed = filter_by_authorized(ctx, AclOperation.WRITE, ResourceType.TOPIC, names)
    return frozenset(names - allowed)


def _precheck(ctx: RequestContext, topic: str, acks: int) -> ErrorCode | None:
    if acks not in (-1, 0, 1):
        return ErrorCode.invalid_required_acks
    try:
        validate_topic_name(topic)
    except MetadataError as exc:
        return exc.error
    return None


def _response(
    ctx: RequestContext, statuses: ProduceStatuses, ids: RequestTopicIds | None = None
) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), status in statuses.items():
        result = status.result
        append_ms = result.log_append_time_ms
        by_topic.setdefault(topic, []).append(
            b.PartitionProduceResponse(
                index=partition,
                error_code=result.error,
                base_offset=result.base_offset,
                # epoch ms; the builder makes the datetime kio wants, clamped to the
                # years it can hold (a duplicate batch's timestamp is the client's)
                log_append_time=None if append_ms == -1 else append_ms,
                log_start_offset=result.log_start_offset,
                record_errors=(
                    _record_errors(b, ctx.api_version, result.record_errors)
                    if result.record_errors
                    else ()
                ),
                error_message=result.error_message,
            )
        )
    if ids is None:
        responses = tuple(
            b.TopicProduceResponse(name=topic, partition_responses=tuple(parts))
            for topic, parts in by_topic.items()
        )
    else:
        responses = _responses_by_id(ctx, b, by_topic, ids)
    return b.ProduceResponse(responses=responses, throttle_time=0)


def _responses_by_id(
    ctx: RequestContext, b: Any, by_topic: dict[str, list[Any]], ids: RequestTopicIds
) -> tuple[Any, ...]:
    """v13+: each topic under the id it was asked by, and UNKNOWN_TOPIC_ID for the
    partitions of the ids the cluster does not know."""
    known = [
        b.TopicProduceResponse(topic_id=ids.id_for(ctx, name), partition_responses=tuple(parts))
        for name, parts in by_topic.items()
    ]
    unknown = [
        b.TopicProduceResponse(
            topic_id=unknown_id,
            partition_responses=tuple(
                b.PartitionProduceResponse(
                    index=index,
                    error_code=ErrorCode.unknown_topic_id,
                    base_offset=-1,
                    log_append_time=None,
                    log_start_offset=-1,
                    record_errors=(),
                )
                for index in indexes
            ),
        )
        for unknown_id, indexes in ids.unknown.items()
    ]
    return (*known, *unknown)


def _record_errors(b: Any, api_version: int, errors: tuple[tuple[int, str], ...]) -> Any:
    """The records a refused batch names (v8+; older versions have no such field)."""
    if api_version < 8:
        return ()
    return tuple(
        b.BatchIndexAndErrorMessage(batch_index=index, batch_index_error_message=text)
        for index, text in errors
    )
