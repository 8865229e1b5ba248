"""DescribeShareGroupOffsets (key 90): a share group's start offset per partition, for
AdminClient's ``listShareGroupOffsets`` (KIP-932).

Asked of the group's coordinator. Each partition's share-partition start offset and
leader epoch are read from the share coordinator (ReadShareGroupStateSummary through
the persister); a partition without durable state answers start offset -1. Topics null:
every topic the group's members subscribed to. GROUP_ID_NOT_FOUND for a group that is not
a share group here; UNKNOWN_TOPIC_OR_PARTITION for a topic or partition that does not
exist.

``lag`` (v1) is Kafka 4.2's: the leader's high watermark minus the start offset and the
offsets past it already done (the summary's DeliveryCompleteCount). Differences from
Kafka: the lag is known only when this broker leads the partition, else -1; the
partitions a group initialised are not tracked, so a null topic list means every topic
the group's members ever subscribed to.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from broker.server.context import RequestContext
from broker.share_coordinator.share_state_records import (
    ShareGroupOffset,
    SharePartitionKey,
    StateSummary,
)
from protocol.builders import response_builder

API_KEY = 90
MIN_VERSION = 0
MAX_VERSION = 1

Cell = dict[str, Any]  # one partition's answer, filled in as the reads come back


def handle(ctx: RequestContext, request: Any) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    groups: list[tuple[str, ErrorCode, str | None, list[tuple[str, Any, list[Cell]]]]] = []
    reads: list[tuple[SharePartitionKey, Cell]] = []
    for g in request.groups:
        group_id = str(g.group_id)
        if ctx.services.coordinators.share_group.group(group_id) is None:
            groups.append(
                (group_id, ErrorCode.group_id_not_found, f"Group {group_id} not found.", [])
            )
            continue
        groups.append((group_id, ErrorCode.none, None, _topics(ctx, group_id, g.topics, reads)))

    def build() -> Any:
        return b.DescribeShareGroupOffsetsResponse(
            throttle_time=0,
            groups=tuple(
                b.DescribeShareGroupOffsetsResponseGroup(
                    group_id=group_id,
                    error_code=error,
                    error_message=message,
                    topics=tuple(
                        b.DescribeShareGroupOffsetsResponseTopic(
                            topic_name=name,
                            topic_id=topic_id,
                            partitions=tuple(
                                b.DescribeShareGroupOffsetsResponsePartition(**cell)
                                for cell in cells
                            ),
                        )
                        for name, topic_id, cells in topics
                    ),
                )
                for group_id, error, message, topics in groups
            ),
        )

    return _read_all(ctx, reads, build)


def _topics(
    ctx: RequestContext,
    group_id: str,
    requested: Any,
    reads: list[tuple[SharePartitionKey, Cell]],
) -> list[tuple[str, Any, list[Cell]]]:
    metadata = ctx.services.metadata
    if requested is None:
        group = ctx.services.coordinators.share_group.group(group_id)
        names = sorted(group.subscribed_topics_seen) if group is not None else []
        wanted: list[tuple[str, list[int] | None]] = [(n, None) for n in names]
    else:
        wanted = [(str(t.topic_name), [int(p) for p in t.partitions]) for t in requested]
    topics: list[tuple[str, Any, list[Cell]]] = []
    for name, partitions in wanted:
        info = metadata.topics.get(name)
        indexes = partitions if partitions is not None else []
        if info is not None and partitions is None:
            indexes = list(range(len(info.partitions)))
        cells: list[Cell] = []
        for index in indexes:
            cell: Cell = {"partition_index": index, "start_offset": -1, "leader_epoch": -1}
            cell.update(lag=-1, error_code=ErrorCode.none, error_message=None)
            if info is None or not 0 <= index < len(info.partitions):
                cell["error_code"] = ErrorCode.unknown_topic_or_partition
            else:
                reads.append((SharePartitionKey(group_id, info.topic_id, index), cell))
            cells.append(cell)
        topics.append((name, info.topic_id if info is not None else uuid.UUID(int=0), cells))
    return topics


def _read_all(ctx: RequestContext, reads: list[tuple[SharePartitionKey, Cell]], build: Any) -> Any:
    manager = ctx.services.share_partition_manager
    persister = manager.persister
    if persister is None or not reads:
        return build()
    waiting = [len(reads)]
    future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    def read(key: SharePartitionKey, cell: Cell) -> None:
        def on_done(error: ErrorCode, state: ShareGroupOffset) -> None:
            cell["error_code"] = error
            if error is ErrorCode.none and state.start_offset >= 0:
                cell["start_offset"] = state.start_offset
                cell["leader_epoch"] = state.leader_epoch
                cell["lag"] = _lag(ctx, key, state)
            waiting[0] -= 1
            if waiting[0] == 0 and not future.done():
                future.set_result(build())

        persister.read_state_summary(key, -1, on_done)

    for key, cell in reads:
        read(key, cell)
    return future


def _lag(ctx: RequestContext, key: SharePartitionKey, state: ShareGroupOffset) -> int:
    """The high watermark minus the start offset and the offsets past it already done
    (Kafka 4.2's lag: the start offset moves only with the share partition's next write)."""
    info = ctx.services.metadata.topic_by_id(key.topic_id)
    if info is None:
        return -1
    partition = ctx.services.replica_manager.online_partition((info.name, key.partition))
    if partition is None or not partition.is_leader:
        return -1
    done = state.delivery_complete_count if isinstance(state, StateSummary) else 0
    return max(partition.high_watermark - state.start_offset - max(done, 0), 0)


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    return b.DescribeShareGroupOffsetsResponse(
        throttle_time=0,
        groups=tuple(
            b.DescribeShareGroupOffsetsResponseGroup(
                group_id=g.group_id, error_code=error, error_message=None, topics=()
            )
            for g in request.groups
        ),
    )
