"""ListOffsets (key 2): earliest, latest, by timestamp, max timestamp.

Special timestamps as Kafka: -2 EARLIEST (log start), -1 LATEST (the last offset a
reader may fetch: the high watermark, the last stable offset for isolation level 1
read_committed, the log end for a replica), -3 MAX_TIMESTAMP (the record with the
largest timestamp), -4 EARLIEST_LOCAL (= earliest: there is no tiered storage), -5
LATEST_TIERED (none: offset -1), -6 EARLIEST_PENDING_UPLOAD (v11, KIP-1023: the first
offset not yet in remote storage; without tiered storage Kafka's
``UnifiedLog.fetchOffsetByTimestamp`` answers no offset: -1, timestamp -1, leader epoch
-1, as ``earliest_pending_upload`` does). A timestamp lookup finds only offsets below
that same bound.

With an authorizer, a topic the principal may not DESCRIBE is TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.handlers.base import TopicPartitionPairs
from broker.replica.delayed_fetch import READ_COMMITTED
from broker.replica.partition import Partition
from broker.security.authorizer.authorization import (
    AclOperation,
    ResourceType,
    filter_by_authorized,
)
from broker.server.context import RequestContext
from protocol.builders import response_builder

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


def earliest_pending_upload(partition: Partition) -> tuple[int, int, int]:
    """-6 (KIP-1023): the earliest offset of the partition's log not yet uploaded to
    remote storage, as (timestamp, offset, leader epoch). Only a topic with
    ``remote.storage.enable`` has one; for any other topic Kafka answers no offset, and
    with no tiered storage here, so do we (the tiered-storage work fills this in)."""
    return NO_OFFSET


def handle(ctx: RequestContext, request: Any) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    manager = ctx.services.replica_manager
    replica_id = int(request.replica_id)
    read_committed = int(getattr(request, "isolation_level", 0)) == READ_COMMITTED
    topics = []
    denied: set[str] = set()
    if ctx.services.security.authorizer is not None:
        names = {topic.name for topic in request.topics}
        denied = names - filter_by_authorized(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            index = int(p.partition_index)
            error, timestamp, offset, epoch = ErrorCode.none, -1, -1, -1
            partition = (
                None if topic.name in denied else manager.online_partition((topic.name, index))
            )
            if topic.name in denied:
                error = ErrorCode.topic_authorization_failed
            elif partition is None:
                error = (
                    ErrorCode.unknown_topic_or_partition
                    if ctx.services.metadata.partition_state(topic.name, index) is None
                    else ErrorCode.not_leader_or_follower
                )
            elif not partition.is_leader:
                error = ErrorCode.not_leader_or_follower
            else:
                epoch = partition.leader_epoch
                wanted = int(p.timestamp)
                # Kafka's lastFetchableOffset
                if replica_id >= 0:
                    fetchable = partition.log_end_offset
                elif read_committed:
                    fetchable = partition.last_stable_offset
                else:
                    fetchable = partition.high_watermark
                if wanted in (EARLIEST, EARLIEST_LOCAL):
                    offset = partition.log_start_offset
                elif wanted == LATEST:
                    offset = fetchable
                elif wanted == MAX_TIMESTAMP:
                    found = partition.log.max_timestamp()
                    if found is not None:
                        offset, timestamp = found
                elif wanted == LATEST_TIERED:
                    offset = -1
                elif wanted == EARLIEST_PENDING_UPLOAD:
                    timestamp, offset, epoch = earliest_pending_upload(partition)
                else:
                    found = partition.log.offset_for_timestamp(wanted)
                    if found is not None and found[0] < fetchable:
                        offset, timestamp = found
            partitions.append(
                b.ListOffsetsPartitionResponse(
                    partition_index=index,
                    error_code=error,
                    timestamp=timestamp,
                    offset=offset,
                    leader_epoch=epoch,
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
