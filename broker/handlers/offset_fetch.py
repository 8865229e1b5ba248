"""OffsetFetch (key 9): committed offsets, for one group (v1-7) or several (v8+).

A partition without a committed offset answers offset -1, as Kafka does.
``require_stable`` has nothing to wait for: there are no transactions.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.context import RequestContext
from broker.group import OffsetFetchPartition
from broker.handlers.group_common import coordinator_of
from protocol.builders import Builder, response_builder

API_KEY = 9
MIN_VERSION = 1
MAX_VERSION = 9

_NONE = OffsetFetchPartition(-1, -1, "", ErrorCode.none)


def _fetch(
    ctx: RequestContext, group_id: str, topics: Any
) -> tuple[ErrorCode, dict[tuple[str, int], OffsetFetchPartition]]:
    wanted = None
    if topics is not None:
        wanted = [(t.name, int(p)) for t in topics for p in t.partition_indexes]
    error = ctx.services.group_coordinator.check_coordinator(group_id)
    if error is not ErrorCode.none:
        return error, {tp: OffsetFetchPartition(-1, -1, "", error) for tp in wanted or []}
    top, found = coordinator_of(ctx).handle_fetch_offsets(group_id, wanted)
    result = {(tp[0], tp[1]): value for tp, value in found.items()}
    for tp in wanted or []:
        result.setdefault(tp, _NONE)
    return top, result


def _topics(b: Builder, names: tuple[str, str, str], offsets: dict[Any, Any]) -> tuple[Any, ...]:
    topic_cls, partition_cls, _ = names
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), value in offsets.items():
        by_topic.setdefault(topic, []).append(
            getattr(b, partition_cls)(
                partition_index=partition,
                committed_offset=value.offset,
                committed_leader_epoch=value.leader_epoch,
                metadata=value.metadata,
                error_code=value.error,
            )
        )
    return tuple(
        getattr(b, topic_cls)(name=name, partitions=tuple(parts))
        for name, parts in by_topic.items()
    )


def handle(ctx: RequestContext, request: Any) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    if ctx.api_version >= 8:
        names = ("OffsetFetchResponseTopics", "OffsetFetchResponsePartitions", "")
        groups = []
        for group in request.groups:
            error, offsets = _fetch(ctx, group.group_id, group.topics)
            groups.append(
                b.OffsetFetchResponseGroup(
                    group_id=group.group_id, topics=_topics(b, names, offsets), error_code=error
                )
            )
        return b.OffsetFetchResponse(throttle_time=0, groups=tuple(groups))
    names = ("OffsetFetchResponseTopic", "OffsetFetchResponsePartition", "")
    error, offsets = _fetch(ctx, request.group_id, request.topics)
    return b.OffsetFetchResponse(
        throttle_time=0, topics=_topics(b, names, offsets), error_code=error
    )
