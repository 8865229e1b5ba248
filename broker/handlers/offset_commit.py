"""OffsetCommit (key 8): commits from group members and from ``assign()`` consumers.

A commit from a member also counts as a heartbeat. As in Kafka, the commit is appended
to ``__consumer_offsets`` with acks=all (``offsets.commit.required.acks``) and answered
only once the partition's in-sync replicas have it, so an acknowledged commit survives
the loss of the coordinator's broker. Meanwhile the request waits in the Produce
purgatory (recorded by the append, with the DelayedProduce's outcome); a failed or
timed-out append (``offsets.commit.timeout.ms``) is answered with Kafka's mapped error,
COORDINATOR_NOT_AVAILABLE for most, and the committed offset stays what it was.

With an authorizer: READ on the group (else GROUP_AUTHORIZATION_FAILED for every
partition), then READ on each topic (else TOPIC_AUTHORIZATION_FAILED for its partitions,
which are not committed).

v10 (KIP-848) names each topic by its id: an id the cluster does not know is
UNKNOWN_TOPIC_ID for its partitions, checked before the topic authorization, and the
answer names topics by the ids asked (``KafkaApis.handleOffsetCommitRequest``). The
offsets are kept by name, as Kafka's group coordinator keeps them, so a commit by id is
fetched by name and the other way round.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from broker.group import TopicPartition
from broker.handlers.base import partition_errors_by_topic
from broker.handlers.group_common import answer_when_called, group_denied
from broker.handlers.topic_names import (
    RequestTopicIds,
    offset_commit_topic_partitions,
    topic_id,
    topic_name,
)
from broker.security.authorizer.authorization import (
    AclOperation,
    ResourceType,
    filter_by_authorized,
)
from broker.server.context import RequestContext
from protocol.builders import response_builder

API_KEY = 8
MIN_VERSION = 2
MAX_VERSION = 10
#: The first version that names topics by id.
TOPIC_ID_VERSION = 10

topic_partitions = offset_commit_topic_partitions


def _response(
    ctx: RequestContext,
    errors: dict[TopicPartition, ErrorCode],
    ids: RequestTopicIds | None = None,
) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    if ids is None:
        topics = partition_errors_by_topic(
            errors.items(), b.OffsetCommitResponsePartition, b.OffsetCommitResponseTopic
        )
    else:
        topics = _topics_by_id(ctx, b, errors, ids)
    return b.OffsetCommitResponse(throttle_time=0, topics=topics)


def _topics_by_id(
    ctx: RequestContext, b: Any, errors: dict[TopicPartition, ErrorCode], ids: RequestTopicIds
) -> tuple[Any, ...]:
    """v10+: each topic under the id it was asked by; UNKNOWN_TOPIC_ID for the ids the
    cluster does not know."""
    by_topic: dict[str, list[Any]] = {}
    for (name, partition), error in errors.items():
        by_topic.setdefault(name, []).append(
            b.OffsetCommitResponsePartition(partition_index=partition, error_code=error)
        )
    known = [
        b.OffsetCommitResponseTopic(topic_id=ids.id_for(ctx, name), partitions=tuple(parts))
        for name, parts in by_topic.items()
    ]
    unknown = [
        b.OffsetCommitResponseTopic(
            topic_id=unknown_id,
            partitions=tuple(
                b.OffsetCommitResponsePartition(
                    partition_index=index, error_code=ErrorCode.unknown_topic_id
                )
                for index in indexes
            ),
        )
        for unknown_id, indexes in ids.unknown.items()
    ]
    return (*unknown, *known)


def handle(ctx: RequestContext, request: Any) -> Any:
    offsets: dict[tuple[str, int], tuple[int, int, str | None]] = {}
    ids = RequestTopicIds() if ctx.api_version >= TOPIC_ID_VERSION else None
    for topic in request.topics:
        if ids is None:
            name = topic.name
        else:
            name = ids.resolve(ctx, topic, [int(p.partition_index) for p in topic.partitions])
            if name is None:
                continue
        for p in topic.partitions:
            offsets[(name, int(p.partition_index))] = (
                int(p.committed_offset),
                int(getattr(p, "committed_leader_epoch", -1)),
                p.committed_metadata,
            )
    generation = getattr(request, "generation_id_or_member_epoch", None)
    if generation is None:
        generation = request.generation_id
    if group_denied(ctx, request.group_id):
        return error_response(ctx, request, ErrorCode.group_authorization_failed)
    refused: dict[TopicPartition, ErrorCode] = {}
    if ctx.services.security.authorizer is not None:
        offsets, refused = _without_denied_topics(ctx, offsets)
    if not offsets and (refused or (ids is not None and ids.unknown)):
        return _response(ctx, refused, ids)  # nothing left to commit, as Kafka answers
    error = ctx.services.coordinators.group_metadata_manager.check_coordinator(request.group_id)
    if error is not ErrorCode.none:
        return _response(ctx, {**refused, **{TopicPartition(*tp): error for tp in offsets}}, ids)
    expire: int | None = None
    retention_time = getattr(request, "retention_time", None)
    retention = int(retention_time.total_seconds() * 1000) if retention_time is not None else -1
    if retention >= 0:
        expire = ctx.services.clock.now_ms() + retention

    def start(callback: Callable[[dict[TopicPartition, ErrorCode]], None]) -> None:
        ctx.services.coordinators.group.handle_commit_offsets(
            request.group_id,
            request.member_id,
            getattr(request, "group_instance_id", None),
            int(generation),
            offsets,
            callback,
            expire_timestamp_ms=expire,
            parked_request=ctx,
        )

    def build(errors: dict[TopicPartition, ErrorCode]) -> Any:
        return _response(ctx, {**refused, **errors}, ids)

    return answer_when_called(start, build)


_Offsets = dict[tuple[str, int], tuple[int, int, str | None]]


def _without_denied_topics(
    ctx: RequestContext, offsets: _Offsets
) -> tuple[_Offsets, dict[TopicPartition, ErrorCode]]:
    """The offsets of topics the principal may READ, and TOPIC_AUTHORIZATION_FAILED for
    the others (``KafkaApis.handleOffsetCommitRequest``)."""
    names = {topic for topic, _ in offsets}
    allowed = filter_by_authorized(ctx, AclOperation.READ, ResourceType.TOPIC, names)
    refused = {
        TopicPartition(*tp): ErrorCode.topic_authorization_failed
        for tp in offsets
        if tp[0] not in allowed
    }
    return {tp: o for tp, o in offsets.items() if tp[0] in allowed}, refused


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    """``error`` for every partition of the request."""
    b = response_builder(API_KEY, ctx.api_version)
    return b.OffsetCommitResponse(
        throttle_time=0,
        topics=tuple(
            b.OffsetCommitResponseTopic(
                name=topic_name(ctx, topic) or "",
                topic_id=topic_id(topic),
                partitions=tuple(
                    b.OffsetCommitResponsePartition(
                        partition_index=int(p.partition_index), error_code=error
                    )
                    for p in topic.partitions
                ),
            )
            for topic in request.topics
        ),
    )
