"""AlterShareGroupOffsets (key 91): set a share group's start offset per partition
(KIP-932, AdminClient's ``alterShareGroupOffsets``, ``kafka-share-groups --reset-offsets``).

As Kafka 4.2: only for an EMPTY share group (NON_EMPTY_GROUP otherwise); a group that does
not exist yet is made, empty (KAFKA-19662: offsets set before a group's first use), and
a group id of another type is GROUP_ID_NOT_FOUND. Asked of the group's coordinator; a topic or
partition that does not exist is UNKNOWN_TOPIC_OR_PARTITION for that partition. Each new
start offset is written through the persister as InitializeShareGroupState at the
partition's state epoch plus one, so it is durable and fences the writes of any share
partition still in memory at the old epoch (their leader drops it on FENCED_STATE_EPOCH
and reads the new state on the next fetch). The group's share partitions in memory on
this broker are dropped at once.

Differences from Kafka: the state epoch comes from reading the partition's state summary
first (Kafka keeps it in the group's metadata records); a negative start offset is
INVALID_REQUEST for its partition; a share partition in memory on another broker that
never writes again keeps serving from its old state until it is led again.

With an authorizer (as ``KafkaApis``): GROUP_AUTHORIZATION_FAILED without READ on the
group, TOPIC_AUTHORIZATION_FAILED for a topic without READ.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from broker.handlers.share_offsets_common import Call, group_error, run_calls, topic_denied
from broker.security.authorizer.authorization import AclOperation
from broker.server.context import RequestContext
from broker.share.persister import StatePersister
from broker.share_coordinator.share_state_records import ShareGroupOffset, SharePartitionKey
from protocol.builders import response_builder

API_KEY = 91
MIN_VERSION = 0
MAX_VERSION = 0

Cell = dict[str, Any]  # one partition's answer


def handle(ctx: RequestContext, request: Any) -> Any:
    group_id = str(request.group_id)
    error, message = group_error(ctx, group_id, AclOperation.READ, create=True)
    if error is not ErrorCode.none:
        return _response(ctx, error, message, ())
    persister = ctx.services.share_partition_manager.persister
    topics: list[tuple[str, uuid.UUID, list[Cell]]] = []
    calls: list[tuple[Call, Callable[[ErrorCode], None]]] = []
    changed: list[tuple[str, int]] = []
    for t in request.topics:
        name = str(t.topic_name)
        denied = topic_denied(ctx, name)
        info = None if denied else ctx.services.metadata.topics.get(name)
        cells: list[Cell] = []
        for p in t.partitions:
            cell: Cell = {"partition_index": int(p.partition_index)}
            cell.update(error_code=ErrorCode.none, error_message=None)
            cells.append(cell)
            index, start = int(p.partition_index), int(p.start_offset)
            if denied:
                cell["error_code"] = ErrorCode.topic_authorization_failed
            elif info is None or not 0 <= index < len(info.partitions):
                cell["error_code"] = ErrorCode.unknown_topic_or_partition
            elif start < 0:
                cell.update(error_code=ErrorCode.invalid_request, error_message="Bad offset.")
            elif persister is not None:
                key = SharePartitionKey(group_id, info.topic_id, index)
                calls.append((_initialize(persister, key, start), _filler(cell)))
                changed.append((name, index))
        topics.append((name, info.topic_id if info is not None else uuid.UUID(int=0), cells))

    def build() -> Any:
        _after(ctx, group_id, changed, topics)
        return _response(ctx, ErrorCode.none, None, topics)

    return run_calls(calls, build)


def _initialize(persister: StatePersister, key: SharePartitionKey, start: int) -> Call:
    """Read the state epoch, then initialise the state one epoch later at ``start``."""

    def call(on_done: Callable[[ErrorCode], None]) -> None:
        def on_read(error: ErrorCode, state: ShareGroupOffset) -> None:
            if error is not ErrorCode.none:
                on_done(error)
                return
            persister.initialize_state(key, max(state.state_epoch, 0) + 1, start, on_done)

        persister.read_state_summary(key, -1, on_read)

    return call


def _filler(cell: Cell) -> Callable[[ErrorCode], None]:
    def fill(error: ErrorCode) -> None:
        cell["error_code"] = error

    return fill


def _after(
    ctx: RequestContext,
    group_id: str,
    changed: list[tuple[str, int]],
    topics: list[tuple[str, uuid.UUID, list[Cell]]],
) -> None:
    """The group now has state for these topics; its share partitions here are stale."""
    ctx.services.share_partition_manager.reset_partitions(group_id, changed)
    group = ctx.services.coordinators.share_group.group(group_id)
    if group is None:
        return
    for name, _topic_id, cells in topics:
        if any(c["error_code"] is ErrorCode.none for c in cells) and name in dict(changed):
            group.subscribed_topics_seen.add(name)


def _response(
    ctx: RequestContext,
    error: ErrorCode,
    message: str | None,
    topics: Any,
) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    return b.AlterShareGroupOffsetsResponse(
        throttle_time=0,
        error_code=error,
        error_message=message,
        responses=tuple(
            b.AlterShareGroupOffsetsResponseTopic(
                topic_name=name,
                topic_id=topic_id,
                partitions=tuple(
                    b.AlterShareGroupOffsetsResponsePartition(**cell) for cell in cells
                ),
            )
            for name, topic_id, cells in topics
        ),
    )


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    return _response(ctx, error, None, ())
