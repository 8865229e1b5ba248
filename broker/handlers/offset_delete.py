"""OffsetDelete (key 47): drop a group's committed offsets for partitions it no longer
reads (GROUP_SUBSCRIBED_TO_TOPIC for a topic its live members subscribe to)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.context import RequestContext
from broker.handlers.group_common import coordinator_of
from protocol.builders import response_builder

API_KEY = 47
MIN_VERSION = 0
MAX_VERSION = 0


def handle(ctx: RequestContext, request: Any) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    wanted = [(t.name, int(p.partition_index)) for t in request.topics for p in t.partitions]
    error = ctx.services.group_coordinator.check_coordinator(request.group_id)
    per_partition: dict[Any, ErrorCode] = {}
    if error is ErrorCode.none:
        error, per_partition = coordinator_of(ctx).handle_offset_delete(request.group_id, wanted)
    by_topic: dict[str, list[Any]] = {}
    for topic, partition in wanted:
        code = per_partition.get((topic, partition), ErrorCode.none)
        by_topic.setdefault(topic, []).append(
            b.OffsetDeleteResponsePartition(partition_index=partition, error_code=code)
        )
    topics = (
        ()
        if error is not ErrorCode.none
        else tuple(
            b.OffsetDeleteResponseTopic(name=name, partitions=tuple(parts))
            for name, parts in by_topic.items()
        )
    )
    return b.OffsetDeleteResponse(error_code=error, throttle_time=0, topics=topics)
