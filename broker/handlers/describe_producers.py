"""DescribeProducers (key 61): the producers a partition holds state for (KIP-664).

For each partition asked: every producer id in its producer state with its epoch, last
sequence, last timestamp, the epoch of the coordinator that wrote its last transaction
marker, and the first offset of its open transaction (-1 if none). As Kafka, any replica
hosting the partition answers (the admin client asks the leader unless told a broker);
a partition not hosted here is NOT_LEADER_OR_FOLLOWER, an unknown one
UNKNOWN_TOPIC_OR_PARTITION.

With an authorizer, a topic the principal may not READ is TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.handlers.base import error_message
from broker.security.authorizer.authorization import (
    AclOperation,
    ResourceType,
    filter_by_authorized,
)
from broker.server.context import RequestContext
from protocol.builders import response_builder

API_KEY = 61
MIN_VERSION = 0
MAX_VERSION = 0


def handle(ctx: RequestContext, request: Any) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    manager = ctx.services.replica_manager
    denied: set[str] = set()
    if ctx.services.security.authorizer is not None:
        names = {topic.name for topic in request.topics}
        denied = names - filter_by_authorized(ctx, AclOperation.READ, ResourceType.TOPIC, names)
    topics = []
    for topic in request.topics:
        partitions = []
        for index in topic.partition_indexes:
            tp = (topic.name, int(index))
            partition = None if topic.name in denied else manager.online_partition(tp)
            if partition is None:
                if topic.name in denied:
                    error = ErrorCode.topic_authorization_failed
                elif ctx.services.metadata.partition_state(*tp) is None:
                    error = ErrorCode.unknown_topic_or_partition
                else:
                    error = ErrorCode.not_leader_or_follower
                partitions.append(
                    b.PartitionResponse(
                        partition_index=int(index), error_code=error, active_producers=()
                    )
                )
                continue
            producers = tuple(
                b.ProducerState(
                    producer_id=entry.producer_id,
                    producer_epoch=entry.producer_epoch,
                    last_sequence=entry.last_seq,
                    last_timestamp=entry.last_timestamp,
                    coordinator_epoch=entry.coordinator_epoch,
                    current_txn_start_offset=(
                        entry.current_txn_first_offset
                        if entry.current_txn_first_offset is not None
                        else -1
                    ),
                )
                for entry in partition.active_producers()
            )
            partitions.append(
                b.PartitionResponse(
                    partition_index=int(index),
                    error_code=ErrorCode.none,
                    active_producers=producers,
                )
            )
        topics.append(b.TopicResponse(name=topic.name, partitions=tuple(partitions)))
    return b.DescribeProducersResponse(throttle_time=0, topics=tuple(topics))


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    """``error`` for every partition of the request, with no producers."""
    b = response_builder(API_KEY, ctx.api_version)
    return b.DescribeProducersResponse(
        throttle_time=0,
        topics=tuple(
            b.TopicResponse(
                name=topic.name,
                partitions=tuple(
                    b.PartitionResponse(
                        partition_index=int(index),
                        error_code=error,
                        error_message=error_message(error),
                        active_producers=(),
                    )
                    for index in topic.partition_indexes
                ),
            )
            for topic in request.topics
        ),
    )
