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
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from broker.group import TopicPartition
from broker.handlers.base import partition_errors_by_topic
from broker.handlers.group_common import answer_when_called, group_denied
from broker.handlers.topic_names import offset_commit_topic_partitions, topic_id, topic_name
from broker.security.authorizer.authorization import (
    AclOperation,
    ResourceType,
    filter_by_authorized,
)
from broker.server.context import RequestContext
from protocol.builders import response_builder

API_KEY = 8
MIN_VERSION = 2
MAX_VERSION = 9

topic_partitions = offset_commit_topic_partitions


def _response(ctx: RequestContext, errors: dict[TopicPartition, ErrorCode]) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    return b.OffsetCommitResponse(
        throttle_time=0,
        topics=partition_errors_by_topic(
            errors.items(), b.OffsetCommitResponsePartition, b.OffsetCommitResponseTopic
        ),
    )


def handle(ctx: RequestContext, request: Any) -> Any:
    offsets: dict[tuple[str, int], tuple[int, int, str | None]] = {}
    for topic in request.topics:
        for p in topic.partitions:
            offsets[(topic.name, int(p.partition_index))] = (
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
    error = ctx.services.coordinators.group_metadata_manager.check_coordinator(request.group_id)
    if error is not ErrorCode.none:
        return _response(ctx, {**refused, **{TopicPartition(*tp): error for tp in offsets}})
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
        return _response(ctx, {**refused, **errors})

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
