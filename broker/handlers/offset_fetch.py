"""OffsetFetch (key 9): committed offsets, for one group (v1-7) or several (v8+).

A partition without a committed offset answers offset -1, as Kafka does. With
``require_stable`` (v7+) a partition whose group has a transactional offset commit
pending (TxnOffsetCommit, marker not written yet) answers UNSTABLE_OFFSET_COMMIT, which
clients retry.

v9 (KIP-848) carries the member id and member epoch of a consumer group's member: a
member the group does not have answers UNKNOWN_MEMBER_ID, another epoch than its own
STALE_MEMBER_EPOCH, as Kafka's ``ConsumerGroup.validateOffsetFetch``; an admin client
(no member id, epoch -1) is not checked.

With an authorizer: DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED for it, no
offsets); topics the principal may not DESCRIBE are left out of an all-topics answer and
TOPIC_AUTHORIZATION_FAILED when named.

v10 (KIP-848) names each topic by its id: an id the cluster does not know is
UNKNOWN_TOPIC_ID for its partitions, and the answer names topics by id; in an
all-topics answer, a topic the cluster no longer has (its id unknown, offsets not yet
expired) is left out (``KafkaApis.handleOffsetFetchRequest``). Offsets are kept by name,
so those committed by name are fetched by id and the other way round.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.group import OffsetFetchPartition
from broker.handlers.group_common import group_denied
from broker.handlers.topic_names import (
    NO_UUID,
    RequestTopicIds,
    offset_fetch_topic_partitions,
    topic_id,
    topic_name,
)
from broker.security.authorizer.authorization import (
    AclOperation,
    ResourceType,
    filter_by_authorized,
)
from broker.server.context import RequestContext
from protocol.builders import Builder, response_builder

API_KEY = 9
MIN_VERSION = 1
MAX_VERSION = 10
#: The first version that names topics by id.
TOPIC_ID_VERSION = 10

topic_partitions = offset_fetch_topic_partitions

_NONE = OffsetFetchPartition(-1, -1, "", ErrorCode.none)
# kio's class names: v0-7 answer one group, v8+ a list of groups.
_SINGLE = ("OffsetFetchResponseTopic", "OffsetFetchResponsePartition")
_GROUPS = ("OffsetFetchResponseTopics", "OffsetFetchResponsePartitions")


def _fetch(
    ctx: RequestContext,
    group_id: str,
    topics: Any,
    require_stable: bool = False,
    member: tuple[str | None, int] | None = None,
    ids: RequestTopicIds | None = None,
) -> tuple[ErrorCode, dict[tuple[str, int], OffsetFetchPartition]]:
    if group_denied(ctx, group_id, AclOperation.DESCRIBE):
        return ErrorCode.group_authorization_failed, {}
    wanted = None
    if topics is not None:
        wanted = _wanted(ctx, topics, ids)
    manager = ctx.services.coordinators.group_metadata_manager
    error = manager.check_coordinator(group_id)
    if error is ErrorCode.none and member is not None:
        coordinators = ctx.services.coordinators
        refused = coordinators.consumer_group.validate_offset_fetch(group_id, *member)
        if refused is None:  # a streams group's member (KIP-1071), checked the same way
            refused = coordinators.streams_group.validate_offset_fetch(group_id, *member)
        error = refused if refused is not None else ErrorCode.none
    if error is not ErrorCode.none:
        return error, {tp: OffsetFetchPartition(-1, -1, "", error) for tp in wanted or []}
    found = manager.get_offsets(group_id, wanted, require_stable)
    result = {(tp[0], tp[1]): value for tp, value in found.items()}
    for tp in wanted or []:
        result.setdefault(tp, _NONE)
    if ctx.services.security.authorizer is not None:
        result = _authorized_topics(ctx, result, all_topics=wanted is None)
    return ErrorCode.none, result


def _wanted(ctx: RequestContext, topics: Any, ids: RequestTopicIds | None) -> list[tuple[str, int]]:
    """The (name, partition) pairs asked for; by id (``ids`` given), those of ids the
    cluster does not know are kept in ``ids.unknown`` instead."""
    if ids is None:
        return [(t.name, int(p)) for t in topics for p in t.partition_indexes]
    wanted: list[tuple[str, int]] = []
    for topic in topics:
        indexes = [int(p) for p in topic.partition_indexes]
        name = ids.resolve(ctx, topic, indexes)
        if name is not None:
            wanted.extend((name, index) for index in indexes)
    return wanted


_DENIED = OffsetFetchPartition(-1, -1, "", ErrorCode.topic_authorization_failed)


def _authorized_topics(
    ctx: RequestContext, offsets: dict[tuple[str, int], OffsetFetchPartition], all_topics: bool
) -> dict[tuple[str, int], OffsetFetchPartition]:
    """Topics the principal may not DESCRIBE: left out of an all-topics answer, else
    TOPIC_AUTHORIZATION_FAILED (``KafkaApis.handleOffsetFetchRequest``)."""
    names = {topic for topic, _ in offsets}
    allowed = filter_by_authorized(
        ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names, log_if_denied=not all_topics
    )
    if all_topics:
        return {tp: v for tp, v in offsets.items() if tp[0] in allowed}
    return {tp: v if tp[0] in allowed else _DENIED for tp, v in offsets.items()}


def _topics(
    ctx: RequestContext,
    b: Builder,
    names: tuple[str, str],
    offsets: dict[Any, Any],
    ids: RequestTopicIds | None = None,
) -> tuple[Any, ...]:
    topic_cls, partition_cls = names
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
    if ids is None:
        return tuple(
            getattr(b, topic_cls)(name=name, partitions=tuple(parts))
            for name, parts in by_topic.items()
        )
    return _topics_by_id(ctx, b, by_topic, ids)


def _topics_by_id(
    ctx: RequestContext, b: Builder, by_topic: dict[str, list[Any]], ids: RequestTopicIds
) -> tuple[Any, ...]:
    """v10+: each topic under its id (a topic without one left out), then the ids the
    cluster does not know, UNKNOWN_TOPIC_ID."""
    topics = []
    for name, parts in by_topic.items():
        found = ids.id_for(ctx, name)
        if found != NO_UUID:
            topics.append(b.OffsetFetchResponseTopics(topic_id=found, partitions=tuple(parts)))
    for unknown_id, indexes in ids.unknown.items():
        topics.append(
            b.OffsetFetchResponseTopics(
                topic_id=unknown_id,
                partitions=tuple(
                    b.OffsetFetchResponsePartitions(
                        partition_index=index,
                        committed_offset=-1,
                        committed_leader_epoch=-1,
                        metadata="",
                        error_code=ErrorCode.unknown_topic_id,
                    )
                    for index in indexes
                ),
            )
        )
    return tuple(topics)


def handle(ctx: RequestContext, request: Any) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    require_stable = bool(getattr(request, "require_stable", False))
    if ctx.api_version >= 8:
        groups = []
        for group in request.groups:
            member = (group.member_id, int(group.member_epoch)) if ctx.api_version >= 9 else None
            ids = RequestTopicIds() if ctx.api_version >= TOPIC_ID_VERSION else None
            error, offsets = _fetch(ctx, group.group_id, group.topics, require_stable, member, ids)
            groups.append(
                b.OffsetFetchResponseGroup(
                    group_id=group.group_id,
                    topics=_topics(ctx, b, _GROUPS, offsets, ids),
                    error_code=error,
                )
            )
        return b.OffsetFetchResponse(throttle_time=0, groups=tuple(groups))
    error, offsets = _fetch(ctx, request.group_id, request.topics, require_stable)
    return b.OffsetFetchResponse(
        throttle_time=0, topics=_topics(ctx, b, _SINGLE, offsets), error_code=error
    )


def _error_topics(
    ctx: RequestContext, b: Builder, topics: Any, error: ErrorCode, names: tuple[str, str]
) -> tuple[Any, ...]:
    make_topic, make_partition = (getattr(b, name) for name in names)
    return tuple(
        make_topic(
            name=topic_name(ctx, topic) or "",
            topic_id=topic_id(topic),
            partitions=tuple(
                make_partition(
                    partition_index=int(index),
                    committed_offset=-1,
                    committed_leader_epoch=-1,
                    metadata="",
                    error_code=error,
                )
                for index in topic.partition_indexes
            ),
        )
        for topic in topics or ()
    )


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    """``error`` at the top level (per group from v8) and for every partition named."""
    b = response_builder(API_KEY, ctx.api_version)
    groups = getattr(request, "groups", None)
    if groups is None:  # v0..v7: one group, topics at the top level
        return b.OffsetFetchResponse(
            throttle_time=0,
            topics=_error_topics(ctx, b, request.topics, error, _SINGLE),
            error_code=error,
        )
    return b.OffsetFetchResponse(
        throttle_time=0,
        groups=tuple(
            b.OffsetFetchResponseGroup(
                group_id=group.group_id,
                topics=_error_topics(ctx, b, group.topics, error, _GROUPS),
                error_code=error,
            )
            for group in groups
        ),
    )
