"""OffsetForLeaderEpoch (key 23): where did a leader epoch end in the leader's log?

Followers ask it after a leader change to truncate exactly the records the new leader
does not have (KIP-101); consumers (librdkafka, KIP-320) ask it to check that their
position is still on the leader's log after a failover. The answer for epoch E is the
start offset of the first epoch after E (or the log end offset for the current epoch),
with the largest epoch <= E the leader knows.

Differences from Kafka: only the leader answers (Kafka also lets a follower answer the
debug replica id -2); versions 0 and 1 are not served (kio cannot decode them).

With an authorizer: a follower needs CLUSTER_ACTION (else CLUSTER_AUTHORIZATION_FAILED), a
consumer DESCRIBE on the topic (else TOPIC_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.security.authorizer.authorization import (
    AclOperation,
    ResourceType,
    cluster_denied,
    filter_by_authorized,
)
from broker.server.context import RequestContext
from protocol.builders import response_builder

API_KEY = 23
MIN_VERSION = 2
MAX_VERSION = 4


def handle(ctx: RequestContext, request: Any) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    manager = ctx.services.replica_manager
    denied = _denied_topics(ctx, request)
    if denied is None:
        return error_response(ctx, request, ErrorCode.cluster_authorization_failed)
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            if topic.topic in denied:
                error, epoch, end_offset = ErrorCode.topic_authorization_failed, -1, -1
            else:
                error, epoch, end_offset = manager.last_offset_for_leader_epoch(
                    (topic.topic, int(p.partition)),
                    int(p.current_leader_epoch),
                    int(p.leader_epoch),
                )
            partitions.append(
                b.EpochEndOffset(
                    error_code=error,
                    partition=int(p.partition),
                    leader_epoch=epoch,
                    end_offset=end_offset,
                )
            )
        topics.append(b.OffsetForLeaderTopicResult(topic=topic.topic, partitions=tuple(partitions)))
    return b.OffsetForLeaderEpochResponse(throttle_time=0, topics=tuple(topics))


def _denied_topics(ctx: RequestContext, request: Any) -> set[str] | None:
    """With an authorizer: a follower (replica id >= 0) needs CLUSTER_ACTION (None: the
    whole request refused), a consumer DESCRIBE on each topic (the topics refused)."""
    if ctx.services.security.authorizer is None:
        return set()
    if int(getattr(request, "replica_id", -1)) >= 0:
        return None if cluster_denied(ctx, AclOperation.CLUSTER_ACTION) else set()
    names = {topic.topic for topic in request.topics}
    return names - filter_by_authorized(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    """``error`` for every partition of the request, with no epoch (-1) and no end
    offset (-1)."""
    b = response_builder(API_KEY, ctx.api_version)
    return b.OffsetForLeaderEpochResponse(
        throttle_time=0,
        topics=tuple(
            b.OffsetForLeaderTopicResult(
                topic=topic.topic,
                partitions=tuple(
                    b.EpochEndOffset(
                        error_code=error, partition=int(p.partition), leader_epoch=-1, end_offset=-1
                    )
                    for p in topic.partitions
                ),
            )
            for topic in request.topics
        ),
    )
