"""ListOffsets (key 2): earliest, latest, by timestamp, max timestamp.

Special timestamps as Kafka: -2 EARLIEST (log start, the remote tier's for a tiered
topic), -1 LATEST (the last offset a reader may fetch: the high watermark, the last
stable offset for isolation level 1 read_committed, the log end for a replica), -3
MAX_TIMESTAMP (the record with the largest timestamp, local segments only), -4
EARLIEST_LOCAL (the local log start), -5 LATEST_TIERED (the highest offset in the remote
tier, -1 when none). A timestamp lookup finds only offsets below that same bound; on a
tiered topic whose remote segments may hold it, the remote tier is searched first and the
request waits in the RemoteListOffsets purgatory (``DelayedRemoteListOffsets``, until the
request's timeout, v10+, else remote.list.offsets.request.timeout.ms: REQUEST_TIMED_OUT).
-6 EARLIEST_PENDING_UPLOAD (v11, KIP-1023): the first offset not yet in the remote tier
(`earliest_pending_upload`); on a topic that is not tiered Kafka's
``UnifiedLog.fetchOffsetByTimestamp`` answers no offset (-1, timestamp -1, leader epoch -1).

With an authorizer, a topic the principal may not DESCRIBE is TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.handlers.base import TopicPartitionPairs
from broker.remote.delayed_remote_list_offsets import ListOffsetsPartitionStatus
from broker.replica.delayed_fetch import READ_COMMITTED
from broker.replica.partition import Partition
from broker.security.authorizer.authorization import (
    AclOperation,
    ResourceType,
    filter_by_authorized,
)
from broker.server.context import RequestContext
from protocol.builders import response_builder

if TYPE_CHECKING:
    from broker.replica.remote_log_port import RemoteLogPort

API_KEY = 2
MIN_VERSION = 1
MAX_VERSION = 11

EARLIEST = -2
LATEST = -1
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
EARLIEST_PENDING_UPLOAD = -6

#: (timestamp, offset, leader epoch): Kafka's ``TimestampAndOffset(NO_TIMESTAMP, -1, -1)``.
NO_OFFSET = (-1, -1, -1)


def earliest_pending_upload(
    partition: Partition, remote: RemoteLogPort | None
) -> tuple[int, int, int]:
    """-6 (KIP-1023): the earliest offset of the partition's log not yet uploaded to the
    remote tier, as (timestamp, offset, leader epoch): no timestamp, as Kafka, and the
    partition's leader epoch. Only a topic with ``remote.storage.enable`` has one; for any
    other topic Kafka answers no offset."""
    offset = -1 if remote is None else remote.earliest_pending_upload_offset(partition)
    return NO_OFFSET if offset < 0 else (-1, offset, partition.leader_epoch)


def handle(ctx: RequestContext, request: Any) -> Any:
    manager = ctx.services.replica_manager
    remote = manager.remote_log_manager
    replica_id = int(request.replica_id)
    read_committed = int(getattr(request, "isolation_level", 0)) == READ_COMMITTED
    statuses: list[ListOffsetsPartitionStatus] = []
    denied: set[str] = set()
    if ctx.services.security.authorizer is not None:
        names = {topic.name for topic in request.topics}
        denied = names - filter_by_authorized(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
    for topic in request.topics:
        for p in topic.partitions:
            index = int(p.partition_index)
            status = ListOffsetsPartitionStatus((topic.name, index))
            statuses.append(status)
            partition = (
                None if topic.name in denied else manager.online_partition((topic.name, index))
            )
            if topic.name in denied:
                status.error = ErrorCode.topic_authorization_failed
            elif partition is None:
                status.error = (
                    ErrorCode.unknown_topic_or_partition
                    if ctx.services.metadata.partition_state(topic.name, index) is None
                    else ErrorCode.not_leader_or_follower
                )
            elif not partition.is_leader:
                status.error = ErrorCode.not_leader_or_follower
            else:
                status.leader_epoch = partition.leader_epoch
                wanted = int(p.timestamp)
                # Kafka's lastFetchableOffset
                if replica_id >= 0:
                    fetchable = partition.log_end_offset
                elif read_committed:
                    fetchable = partition.last_stable_offset
                else:
                    fetchable = partition.high_watermark
                if wanted == EARLIEST:
                    ctx.services.replica_manager.refresh_tier_start(partition)
                    status.offset = partition.log_start_offset
                elif wanted == EARLIEST_LOCAL:
                    status.offset = partition.local_log_start_offset
                elif wanted == LATEST:
                    status.offset = fetchable
                elif wanted == MAX_TIMESTAMP:
                    found = partition.log.max_timestamp()
                    if found is not None:
                        status.offset, status.timestamp = found
                elif wanted == LATEST_TIERED:
                    status.offset = -1 if remote is None else remote.latest_tiered_offset(status.tp)
                elif wanted == EARLIEST_PENDING_UPLOAD:
                    status.timestamp, status.offset, status.leader_epoch = earliest_pending_upload(
                        partition, remote
                    )
                else:
                    pending = (
                        None
                        if remote is None
                        else remote.offset_for_timestamp(partition, wanted, fetchable)
                    )
                    if pending is not None:  # the remote tier is searched first
                        statuses[-1] = pending
                        continue
                    found = partition.log.offset_for_timestamp(wanted)
                    if found is not None and found[0] < fetchable:
                        status.offset, status.timestamp = found
    if remote is None or all(status.done for status in statuses):
        return _response(ctx, request, statuses)
    future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    def respond(done: list[ListOffsetsPartitionStatus]) -> None:
        if not future.done():
            future.set_result(_response(ctx, request, done))

    timeout = getattr(request, "timeout", None)
    timeout_ms = int(timeout.total_seconds() * 1000) if timeout is not None else 0
    remote.park_list_offsets(statuses, timeout_ms, respond, ctx)
    return future


def _response(ctx: RequestContext, request: Any, statuses: list[ListOffsetsPartitionStatus]) -> Any:
    """The response, partitions in the request's order."""
    b = response_builder(API_KEY, ctx.api_version)
    answers = iter(statuses)
    topics = []
    for topic in request.topics:
        partitions = []
        for _ in topic.partitions:
            status = next(answers)
            partitions.append(
                b.ListOffsetsPartitionResponse(
                    partition_index=status.tp[1],
                    error_code=status.error,
                    timestamp=status.timestamp,
                    offset=status.offset,
                    leader_epoch=status.leader_epoch,
                    old_style_offsets=(),
                )
            )
        topics.append(b.ListOffsetsTopicResponse(name=topic.name, partitions=tuple(partitions)))
    return b.ListOffsetsResponse(throttle_time=0, topics=tuple(topics))


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    """``error`` for every partition of the request, with no offset."""
    b = response_builder(API_KEY, ctx.api_version)
    return b.ListOffsetsResponse(
        throttle_time=0,
        topics=tuple(
            b.ListOffsetsTopicResponse(
                name=topic.name,
                partitions=tuple(
                    b.ListOffsetsPartitionResponse(
                        partition_index=int(p.partition_index),
                        error_code=error,
                        timestamp=-1,
                        offset=-1,
                        leader_epoch=-1,
                        old_style_offsets=(),
                    )
                    for p in topic.partitions
                ),
            )
            for topic in request.topics
        ),
    )


def topic_partitions(ctx: RequestContext, request: Any) -> TopicPartitionPairs:
    return [(t.name, int(p.partition_index)) for t in request.topics for p in t.partitions]
