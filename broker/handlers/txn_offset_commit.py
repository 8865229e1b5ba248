"""TxnOffsetCommit (key 28): offsets committed as part of a transaction.

Versions 0-5.

Behavior:
- Sent to the group's coordinator (``send_offsets_to_transaction``). Partitions of
  unknown topics get UNKNOWN_TOPIC_OR_PARTITION and the others go on.
- The group coordinator validates the sender (``broker/group/group_txn.py``, Kafka's
  ``validateTransactionalOffsetCommit``): in a KIP-848 consumer group the member id and
  the member epoch (sent as the generation id), beside the consumer group
  (``group/consumer/offset_validation.py``); a classic member of a migrated group by its
  generation; a classic group's members by member id, group instance id
  (FENCED_INSTANCE_ID) and generation. An unknown member is UNKNOWN_MEMBER_ID, a stale
  epoch or generation ILLEGAL_GENERATION (Kafka's transactional answer: no
  STALE_MEMBER_EPOCH here), an unknown group with a generation ILLEGAL_GENERATION; a
  commit naming nobody (member id "", generation -1) is accepted, creating a simple
  group when there is none. A share group's id is GROUP_ID_NOT_FOUND ("not a consumer
  group", Kafka's ``ShareGroup.validateOffsetCommit``).
- Accepted offsets are written to ``__consumer_offsets`` as a transactional batch of the
  producer, acks=all — the request waits in the Produce purgatory meanwhile. They stay
  pending (OffsetFetch with ``require_stable`` answers UNSTABLE_OFFSET_COMMIT) until the
  transaction's marker reaches that partition: COMMIT makes them the group's offsets,
  ABORT drops them.
- With an authorizer: WRITE on the transactional id (else
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED), READ on the group (else
  GROUP_AUTHORIZATION_FAILED), READ on each topic (else TOPIC_AUTHORIZATION_FAILED).
- Differences from Kafka: throttle time 0.

Version notes:
- v0-v2: no member id, generation id or group instance id: never checked.
- v3 (KIP-447): member id, generation id, group instance id, validated as above (the
  validation does not look at the version: v5 gets it unchanged).
- v4: flexible versions (KIP-482 tagged fields); TRANSACTION_ABORTABLE may be answered
  (KIP-890 part 1).
- v5 (transactions v2, KIP-890 part 2): the client sent no AddOffsetsToTxn; before
  writing, the coordinator adds the group's ``__consumer_offsets`` partition to the
  transaction itself (``broker/txn/add_partitions_to_txn_manager.py``, Kafka's
  ``txnOffsetCommitRequestVersionToTransactionSupportedOperation``: ADD_PARTITION), and
  a refusal (INVALID_PRODUCER_EPOCH, CONCURRENT_TRANSACTIONS, INVALID_TXN_STATE, ...)
  is every partition's answer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import OFFSETS_TOPIC
from broker.group.group_txn import handle_txn_commit_offsets
from broker.group.results import TopicPartition
from broker.handlers.base import partition_errors_by_topic
from broker.handlers.group_common import answer_when_called, group_denied
from broker.handlers.txn_common import txn_id_denied
from broker.security.authorizer.authorization import (
    AclOperation,
    ResourceType,
    filter_by_authorized,
)
from broker.server.context import RequestContext
from broker.txn.add_partitions_to_txn_manager import (
    txn_offset_commit_request_version_to_operation,
)
from protocol.builders import response_builder

API_KEY = 28
MIN_VERSION = 0
MAX_VERSION = 5

# Transactions v2: the first version whose offsets partition the coordinator adds.
ADD_PARTITION_VERSION = 5


def _partitions(request: Any) -> list[tuple[str, int]]:
    return [(t.name, int(p.partition_index)) for t in request.topics for p in t.partitions]


def topic_partitions(ctx: RequestContext, request: Any) -> list[tuple[str | None, int | None]]:
    return list(_partitions(request))


def _response(ctx: RequestContext, errors: dict[tuple[str, int], ErrorCode]) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    return b.TxnOffsetCommitResponse(
        throttle_time=0,
        topics=partition_errors_by_topic(
            errors.items(), b.TxnOffsetCommitResponsePartition, b.TxnOffsetCommitResponseTopic
        ),
    )


def handle(ctx: RequestContext, request: Any) -> Any:
    group_id = request.group_id
    if txn_id_denied(ctx, request.transactional_id):
        return error_response(ctx, request, ErrorCode.transactional_id_authorization_failed)
    if group_denied(ctx, group_id):
        return error_response(ctx, request, ErrorCode.group_authorization_failed)
    denied = _denied_topics(ctx, request)
    error = ctx.services.coordinators.group_metadata_manager.check_coordinator(group_id)
    if error is not ErrorCode.none:
        return error_response(ctx, request, error)
    if ctx.services.coordinators.share_group.group(group_id) is not None:
        return error_response(ctx, request, ErrorCode.group_id_not_found)
    metadata = ctx.services.metadata
    unknown: dict[tuple[str, int], ErrorCode] = {}
    offsets: dict[tuple[str, int], tuple[int, int, str | None]] = {}
    for topic in request.topics:
        for p in topic.partitions:
            tp = (topic.name, int(p.partition_index))
            if topic.name in denied:
                unknown[tp] = ErrorCode.topic_authorization_failed
            elif metadata.partition_state(*tp) is None:
                unknown[tp] = ErrorCode.unknown_topic_or_partition
            else:
                offsets[tp] = (
                    int(p.committed_offset),
                    int(getattr(p, "committed_leader_epoch", -1)),
                    p.committed_metadata,
                )
    if not offsets:
        return _response(ctx, unknown)

    def start(callback: Callable[[dict[TopicPartition, ErrorCode]], None]) -> None:
        handle_txn_commit_offsets(
            ctx.services.coordinators.group,
            group_id,
            int(request.producer_id),
            int(request.producer_epoch),
            getattr(request, "member_id", ""),
            getattr(request, "group_instance_id", None),
            int(getattr(request, "generation_id", -1)),
            offsets,
            callback,
            parked_request=ctx,
        )

    def build(errors: dict[TopicPartition, ErrorCode]) -> Any:
        return _response(ctx, {**unknown, **{(tp[0], tp[1]): e for tp, e in errors.items()}})

    if ctx.api_version >= ADD_PARTITION_VERSION:
        partitions = [TopicPartition(*tp) for tp in offsets]
        return answer_when_called(
            _offsets_partition_added_first(ctx, request, partitions, start), build
        )
    return answer_when_called(start, build)


Start = Callable[[Callable[[dict[TopicPartition, ErrorCode]], None]], None]


def _offsets_partition_added_first(
    ctx: RequestContext, request: Any, partitions: list[TopicPartition], start: Start
) -> Start:
    """Transactions v2: add the group's offsets partition to the transaction, then write
    (``start``); a refusal answers every partition."""
    services = ctx.services
    offsets_partition = (
        OFFSETS_TOPIC,
        services.coordinators.group_metadata_manager.partition_for(request.group_id),
    )

    def add_then_start(callback: Callable[[dict[TopicPartition, ErrorCode]], None]) -> None:
        def added(unverified: dict[tuple[str, int], ErrorCode]) -> None:
            error = unverified.get(offsets_partition)
            if error is None:
                start(callback)
            else:
                callback(dict.fromkeys(partitions, error))

        services.add_partitions_to_txn_manager.add_or_verify_transaction(
            str(request.transactional_id),
            int(request.producer_id),
            int(request.producer_epoch),
            frozenset({offsets_partition}),
            added,
            txn_offset_commit_request_version_to_operation(ctx.api_version),
        )

    return add_then_start


def _denied_topics(ctx: RequestContext, request: Any) -> set[str]:
    """The topics the principal may not READ (TOPIC_AUTHORIZATION_FAILED, not committed)."""
    if ctx.services.security.authorizer is None:
        return set()
    names = {topic.name for topic in request.topics}
    return names - filter_by_authorized(ctx, AclOperation.READ, ResourceType.TOPIC, names)


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    """``error`` for every partition of the request."""
    return _response(ctx, dict.fromkeys(_partitions(request), error))
