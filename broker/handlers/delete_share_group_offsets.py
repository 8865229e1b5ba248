"""DeleteShareGroupOffsets (key 92): forget a share group's state of whole topics
(KIP-932, AdminClient's ``deleteShareGroupOffsets``, ``kafka-share-groups
--delete-offsets``).

As Kafka 4.2: only for an EMPTY share group (NON_EMPTY_GROUP otherwise, GROUP_ID_NOT_FOUND
for a group that is not a share group here), asked of the group's coordinator; a topic
that does not exist is UNKNOWN_TOPIC_OR_PARTITION. The state of each of the topic's
partitions is deleted through the persister (DeleteShareGroupState: tombstones in
``__share_group_state``); the topic's error is the first partition's that failed. The
group no longer lists the topic (DescribeShareGroupOffsets with all topics), and its
share partitions of it in memory on this broker are dropped: the next fetch starts from
``share.auto.offset.reset``.

Differences from Kafka: a share partition in memory on another broker keeps its state
until it is led again.

With an authorizer (as ``KafkaApis``): GROUP_AUTHORIZATION_FAILED without DELETE on the
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
from broker.share_coordinator.share_state_records import SharePartitionKey
from protocol.builders import response_builder

API_KEY = 92
MIN_VERSION = 0
MAX_VERSION = 0

Cell = dict[str, Any]  # one topic's answer


def handle(ctx: RequestContext, request: Any) -> Any:
    group_id = str(request.group_id)
    error, message = group_error(ctx, group_id, AclOperation.DELETE)
    if error is not ErrorCode.none:
        return _response(ctx, error, message, ())
    persister = ctx.services.share_partition_manager.persister
    cells: list[Cell] = []
    calls: list[tuple[Call, Callable[[ErrorCode], None]]] = []
    deleted: list[tuple[str, int]] = []
    for t in request.topics:
        name = str(t.topic_name)
        info = ctx.services.metadata.topics.get(name)
        cell: Cell = {"topic_name": name, "error_code": ErrorCode.none, "error_message": None}
        cell["topic_id"] = info.topic_id if info is not None else uuid.UUID(int=0)
        cells.append(cell)
        if topic_denied(ctx, name):
            cell.update(error_code=ErrorCode.topic_authorization_failed, topic_id=uuid.UUID(int=0))
            continue
        if info is None:
            cell["error_code"] = ErrorCode.unknown_topic_or_partition
            continue
        for index in range(len(info.partitions)):
            if persister is not None:
                key = SharePartitionKey(group_id, info.topic_id, index)
                calls.append((_delete(persister, key), _filler(cell)))
            deleted.append((name, index))

    def build() -> Any:
        ctx.services.share_partition_manager.reset_partitions(group_id, deleted)
        group = ctx.services.coordinators.share_group.group(group_id)
        for cell in cells:
            if group is not None and cell["error_code"] is ErrorCode.none:
                group.subscribed_topics_seen.discard(cell["topic_name"])
        return _response(ctx, ErrorCode.none, None, cells)

    return run_calls(calls, build)


def _delete(persister: StatePersister, key: SharePartitionKey) -> Call:
    def call(on_done: Callable[[ErrorCode], None]) -> None:
        persister.delete_state(key, on_done)

    return call


def _filler(cell: Cell) -> Callable[[ErrorCode], None]:
    def fill(error: ErrorCode) -> None:
        if cell["error_code"] is ErrorCode.none:
            cell["error_code"] = error

    return fill


def _response(ctx: RequestContext, error: ErrorCode, message: str | None, cells: Any) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    return b.DeleteShareGroupOffsetsResponse(
        throttle_time=0,
        error_code=error,
        error_message=message,
        responses=tuple(b.DeleteShareGroupOffsetsResponseTopic(**cell) for cell in cells),
    )


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    return _response(ctx, error, None, ())
