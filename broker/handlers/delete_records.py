"""DeleteRecords (key 21): move partitions' log start offset forward (KIP-107).

As Kafka: the request goes to each partition's leader (another broker answers
NOT_LEADER_OR_FOLLOWER, an unknown partition UNKNOWN_TOPIC_OR_PARTITION); offset -1
means "up to the high watermark"; an offset above the high watermark, or negative other
than -1, is OFFSET_OUT_OF_RANGE; an offset at or below the current log start changes
nothing; a topic whose ``cleanup.policy`` lacks ``delete`` is POLICY_VIOLATION. The
leader moves its own log start at once, then the request waits in the DeleteRecords
purgatory (``broker/replica/delayed_delete_records.py``) until every replica on a live
broker has followed (each follower moves its log start from the leader's fetch
responses and reports it in its next fetch); the answer's ``low_watermark`` is then the
lowest log start of the replicas, or REQUEST_TIMED_OUT at the request's timeout.
Batches wholly below the leader's new log start are dropped;
records of a batch that straddles it stay on disk but are never returned: a fetch below
the log start is OFFSET_OUT_OF_RANGE, ListOffsets EARLIEST returns the new start. Parked
fetches and produces on the partition are woken, as they may now have an answer.

The per-partition work is the replica manager's (``ReplicaManager.delete_records``, as
Kafka's deleteRecordsOnLocalLog). With an authorizer, a topic needs DELETE (else
TOPIC_AUTHORIZATION_FAILED). Differences from Kafka: throttle time 0.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kio.schema.errors import ErrorCode

from broker.replica.delayed_delete_records import (
    DeleteRecordsPartitionStatus,
    DeleteRecordsStatuses,
)
from broker.replica.partition import TopicPartition
from broker.security.authorizer.authorization import (
    AclOperation,
    ResourceType,
    filter_by_authorized,
)
from broker.server.context import RequestContext
from protocol.builders import response_builder

API_KEY = 21
MIN_VERSION = 0
MAX_VERSION = 2


def handle(ctx: RequestContext, request: Any) -> Any:
    timeout_ms = int(request.timeout.total_seconds() * 1000)
    offsets: dict[TopicPartition, int] = {}
    for topic in request.topics:
        for p in topic.partitions:
            # a partition asked twice: the last ask answers, as Kafka's map of them
            offsets[(topic.name, int(p.partition_index))] = int(p.offset)
    refused: DeleteRecordsStatuses = {}
    if ctx.services.security.authorizer is not None:
        names = {topic for topic, _ in offsets}
        allowed = filter_by_authorized(ctx, AclOperation.DELETE, ResourceType.TOPIC, names)
        refused = {
            tp: DeleteRecordsPartitionStatus(-1, -1, ErrorCode.topic_authorization_failed)
            for tp in offsets
            if tp[0] not in allowed
        }
        offsets = {tp: offset for tp, offset in offsets.items() if tp not in refused}
    future: asyncio.Future[Any] | None = None
    answered: list[Any] = []

    def respond(done: DeleteRecordsStatuses) -> None:
        response = _response(ctx, {**refused, **done})
        if future is None:
            answered.append(response)
        elif not future.done():
            future.set_result(response)

    ctx.services.replica_manager.delete_records(timeout_ms, offsets, respond, ctx)
    if answered:
        return answered[0]
    future = asyncio.get_running_loop().create_future()
    return future


def _response(ctx: RequestContext, statuses: DeleteRecordsStatuses) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    by_topic: dict[str, list[Any]] = {}
    for (name, index), status in statuses.items():
        by_topic.setdefault(name, []).append(
            b.DeleteRecordsPartitionResult(
                partition_index=index,
                low_watermark=status.low_watermark,
                error_code=status.error,
            )
        )
    return b.DeleteRecordsResponse(
        throttle_time=0,
        topics=tuple(
            b.DeleteRecordsTopicResult(name=name, partitions=tuple(parts))
            for name, parts in by_topic.items()
        ),
    )


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
