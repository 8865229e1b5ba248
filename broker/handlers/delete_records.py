"""DeleteRecords (key 21): move partitions' log start offset forward (KIP-107).

As Kafka: the request goes to each partition's leader (another broker answers
NOT_LEADER_OR_FOLLOWER, an unknown partition UNKNOWN_TOPIC_OR_PARTITION); offset -1
means "up to the high watermark"; an offset above the high watermark, or negative other
than -1, is OFFSET_OUT_OF_RANGE; an offset at or below the current log start changes
nothing; a topic whose ``cleanup.policy`` lacks ``delete`` is POLICY_VIOLATION. The
answer's ``low_watermark`` is the new log start. Batches wholly below it are dropped;
records of a batch that straddles it stay on disk but are never returned: a fetch below
the log start is OFFSET_OUT_OF_RANGE, ListOffsets EARLIEST returns the new start. Parked
fetches and produces on the partition are woken, as they may now have an answer.

Differences from Kafka: the leader answers as soon as its own log start has moved;
Kafka parks the request (DelayedDeleteRecords) until every follower's log start has
followed, and reports the lowest of them. This request trims only the leader's log: a
follower's log start moves only if its fetcher applies the ``log_start_offset`` of the
leader's fetch responses. No ACLs, throttle time 0.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.context import RequestContext
from broker.log import OffsetOutOfRangeError
from protocol.builders import response_builder

API_KEY = 21
MIN_VERSION = 0
MAX_VERSION = 2

HIGH_WATERMARK = -1


def handle(ctx: RequestContext, request: Any) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            index = int(p.partition_index)
            error, low_watermark = _delete(ctx, topic.name, index, int(p.offset))
            partitions.append(
                b.DeleteRecordsPartitionResult(
                    partition_index=index, low_watermark=low_watermark, error_code=error
                )
            )
        topics.append(b.DeleteRecordsTopicResult(name=topic.name, partitions=tuple(partitions)))
    return b.DeleteRecordsResponse(throttle_time=0, topics=tuple(topics))


def _delete(ctx: RequestContext, topic: str, index: int, offset: int) -> tuple[ErrorCode, int]:
    services = ctx.services
    manager = services.replica_manager
    tp = (topic, index)
    partition = manager.online_partition(tp)
    if partition is None:
        if services.metadata.partition_state(topic, index) is None:
            return ErrorCode.unknown_topic_or_partition, -1
        return ErrorCode.not_leader_or_follower, -1
    if not partition.is_leader:
        return ErrorCode.not_leader_or_follower, -1
    if not _deletes(ctx, topic):
        return ErrorCode.policy_violation, -1
    high_watermark = partition.high_watermark
    if offset == HIGH_WATERMARK:
        offset = high_watermark
    if offset < 0 or offset > high_watermark:
        return ErrorCode.offset_out_of_range, -1
    if offset <= partition.log_start_offset:
        return ErrorCode.none, partition.log_start_offset
    try:
        low_watermark = partition.log.delete_records_before(offset)
    except OffsetOutOfRangeError:
        return ErrorCode.offset_out_of_range, -1
    manager.complete_delayed_requests(tp)
    return ErrorCode.none, low_watermark


def _deletes(ctx: RequestContext, topic: str) -> bool:
    """Whether the topic's cleanup.policy includes ``delete`` (Kafka's precondition)."""
    info = ctx.services.metadata.topics.get(topic)
    policy: str = ctx.services.config.log_cleanup_policy
    if info is not None:
        policy = info.configs.get("cleanup.policy", policy)
    return "delete" in [part.strip() for part in policy.split(",")]


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    """``error`` for every partition of the request, low watermark -1; nothing moves."""
    b = response_builder(API_KEY, ctx.api_version)
    return b.DeleteRecordsResponse(
        throttle_time=0,
        topics=tuple(
            b.DeleteRecordsTopicResult(
                name=topic.name,
                partitions=tuple(
                    b.DeleteRecordsPartitionResult(
                        partition_index=int(p.partition_index), low_watermark=-1, error_code=error
                    )
                    for p in topic.partitions
                ),
            )
            for topic in request.topics
        ),
    )
