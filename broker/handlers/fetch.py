"""Fetch (key 1): read records; wait in the Fetch purgatory for min_bytes or max_wait.

Consumers read below the high watermark; followers (replica id >= 0) read up to the
log end, and their fetch position tells the leader how far they have replicated. A
read_committed consumer (isolation level 1) reads below the last stable offset and gets
the aborted transactions that overlap what it reads (producer id, first offset), so it
can drop their records; every partition answer carries the LSO.

Differences from Kafka: incremental fetch sessions (KIP-227) are refused the way a
Kafka broker with a full session cache refuses them — every response carries session
id 0, which tells the client to keep sending full fetch requests; a request naming a
session we do not hold gets FETCH_SESSION_ID_NOT_FOUND, after which clients start over.
The aborted transactions listed are exactly those overlapping the returned batches
(Kafka bounds the range by its offset index, so it may list a few more). Rack-aware
preferred read replicas are not chosen.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from broker.context import RequestContext
from broker.handlers.base import TopicPartitionPairs
from broker.handlers.topic_names import topic_id as request_topic_id
from broker.handlers.topic_names import topic_name
from broker.replica.delayed_fetch import FetchParams, FetchPartitionStatus, FetchResults
from protocol.builders import response_builder

API_KEY = 1
MIN_VERSION = 4
MAX_VERSION = 17

_NO_UUID = uuid.UUID(int=0)


def handle(ctx: RequestContext, request: Any) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    # Fetch sessions (KIP-227) exist from v7; v4-v6 requests have no session id.
    if int(getattr(request, "session_id", 0)) != 0:
        return b.FetchResponse(
            throttle_time=0,
            error_code=ErrorCode.fetch_session_id_not_found,
            session_id=0,
            responses=(),
            node_endpoints=(),
        )
    replica_state = getattr(request, "replica_state", None)
    replica_id = (
        int(replica_state.replica_id)
        if replica_state is not None
        else int(getattr(request, "replica_id", -1))
    )
    params = FetchParams(
        replica_id=replica_id,
        max_wait_ms=int(request.max_wait.total_seconds() * 1000),
        min_bytes=int(request.min_bytes),
        max_bytes=int(getattr(request, "max_bytes", 0x7FFFFFFF)),
        isolation_level=int(getattr(request, "isolation_level", 0)),
    )
    cluster = ctx.services.metadata
    statuses: list[FetchPartitionStatus] = []
    unknown: list[tuple[str | None, uuid.UUID | None, int, ErrorCode]] = []
    topic_ids: dict[str, uuid.UUID] = {}
    for topic in request.topics:
        name: str | None = getattr(topic, "topic", None)
        topic_id: uuid.UUID | None = getattr(topic, "topic_id", None)
        if name is None and topic_id not in (None, _NO_UUID):
            info = cluster.topic_by_id(topic_id) if topic_id is not None else None
            if info is None:
                for p in topic.partitions:
                    unknown.append((None, topic_id, int(p.partition), ErrorCode.unknown_topic_id))
                continue
            name = info.name
        if name is None:
            continue
        if topic_id is not None and topic_id != _NO_UUID:
            topic_ids[name] = topic_id
        for p in topic.partitions:
            statuses.append(
                FetchPartitionStatus(
                    tp=(name, int(p.partition)),
                    fetch_offset=int(p.fetch_offset),
                    partition_max_bytes=int(p.partition_max_bytes),
                    current_leader_epoch=int(getattr(p, "current_leader_epoch", -1)),
                )
            )

    future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    def respond(results: FetchResults) -> None:
        if not future.done():
            future.set_result(_response(ctx, results, unknown, topic_ids))

    ctx.services.replica_manager.fetch_messages(params, statuses, respond, ctx)
    if future.done():
        return future.result()
    return future


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    """``error`` for every partition of the request; the top-level error stays NONE."""
    b = response_builder(API_KEY, ctx.api_version)
    return b.FetchResponse(
        throttle_time=0,
        error_code=ErrorCode.none,
        session_id=0,
        responses=tuple(
            b.FetchableTopicResponse(
                topic=topic_name(ctx, topic) or "",
                topic_id=request_topic_id(topic),
                partitions=tuple(
                    b.PartitionData(
                        partition_index=int(p.partition),
                        error_code=error,
                        high_watermark=-1,
                        last_stable_offset=-1,
                        log_start_offset=-1,
                        aborted_transactions=None,
                        preferred_read_replica=-1,
                        records=None,
                    )
                    for p in topic.partitions
                ),
            )
            for topic in request.topics
        ),
        node_endpoints=(),
    )


def topic_partitions(ctx: RequestContext, request: Any) -> TopicPartitionPairs:
    pairs: TopicPartitionPairs = []
    for topic in request.topics:
        name = topic_name(ctx, topic)
        pairs.extend((name, int(p.partition)) for p in topic.partitions)
    return pairs


def _response(
    ctx: RequestContext,
    results: FetchResults,
    unknown: list[tuple[str | None, uuid.UUID | None, int, ErrorCode]],
    topic_ids: dict[str, uuid.UUID],
) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    cluster = ctx.services.metadata
    by_topic: dict[str, list[Any]] = {}
    for status, result in results:
        aborted = result.aborted_transactions
        by_topic.setdefault(status.tp[0], []).append(
            b.PartitionData(
                partition_index=status.tp[1],
                error_code=result.error,
                high_watermark=result.high_watermark,
                last_stable_offset=result.last_stable_offset,
                log_start_offset=result.log_start_offset,
                aborted_transactions=None
                if aborted is None
                else tuple(
                    b.AbortedTransaction(producer_id=t.producer_id, first_offset=t.first_offset)
                    for t in aborted
                ),
                preferred_read_replica=-1,
                records=result.records,
            )
        )
    responses = []
    for name, partitions in by_topic.items():
        topic_id = topic_ids.get(name)
        if topic_id is None:
            info = cluster.topics.get(name)
            topic_id = info.topic_id if info is not None else _NO_UUID
        responses.append(
            b.FetchableTopicResponse(topic=name, topic_id=topic_id, partitions=tuple(partitions))
        )
    for _name, topic_id, partition, error in unknown:
        responses.append(
            b.FetchableTopicResponse(
                topic="",
                topic_id=topic_id,
                partitions=(
                    b.PartitionData(
                        partition_index=partition,
                        error_code=error,
                        high_watermark=-1,
                        last_stable_offset=-1,
                        log_start_offset=-1,
                        aborted_transactions=None,
                        preferred_read_replica=-1,
                        records=b"",
                    ),
                ),
            )
        )
    return b.FetchResponse(
        throttle_time=0,
        error_code=ErrorCode.none,
        session_id=0,
        responses=tuple(responses),
        node_endpoints=(),
    )
