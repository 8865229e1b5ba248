"""DescribeTopicPartitions (key 75, Kafka 3.7+): topics' partitions, a page at a time.

As Kafka's DescribeTopicPartitionsRequestHandler and KRaftMetadataCache: the topics
named (or, with an empty list, every topic) are taken in name order from the cursor's
topic on, the cursor's topic from its partition; partitions are answered up to
``response_partition_limit`` (at least 1, at most ``max.request.partition.size.limit``,
2000). When the limit stops a topic part-way, ``next_cursor`` points at its next
partition; when it falls on a topic boundary with topics left, at the next topic's
partition 0. A named topic that does not exist is UNKNOWN_TOPIC_OR_PARTITION (an
illegal name INVALID_TOPIC_EXCEPTION), with no partitions; with an empty list such
topics cannot occur. A cursor whose topic is not among the named topics, or with a
negative partition, fails the request (INVALID_REQUEST for every named topic).
Each partition has its leader, leader epoch, replicas, ISR, offline replicas (on
brokers that are down), its eligible leader replicas and last known ELR (KIP-966, on by
default as in Kafka 4.1+: ``broker/cluster/partition_change.py``); every topic has
Kafka's authorized operations without an authorizer (all the topic operations).

With an authorizer, topics the principal may not DESCRIBE are left out of an all-topics
answer and TOPIC_AUTHORIZATION_FAILED when named.

Differences from Kafka: throttle time 0.
"""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import (
    MetadataError,
    PartitionState,
    TopicInfo,
    validate_topic_name,
)
from broker.security.authorizer.authorization import (
    AclOperation,
    ResourceType,
    filter_by_authorized,
)
from broker.server.context import RequestContext
from protocol.builders import Builder, response_builder

API_KEY = 75
MIN_VERSION = 0
MAX_VERSION = 0

#: Kafka's max.request.partition.size.limit default.
MAX_REQUEST_PARTITION_SIZE_LIMIT = 2000
#: Kafka's AclOperation codes a topic supports (READ, WRITE, CREATE, DELETE, ALTER,
#: DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS) as a bit field: all of them, with no
#: authorizer.
TOPIC_AUTHORIZED_OPERATIONS = sum(1 << code for code in (3, 4, 5, 6, 7, 8, 10, 11))
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
_NO_UUID = uuid.UUID(int=0)
NO_LEADER = -1


class _InvalidRequest(Exception):
    pass


def handle(ctx: RequestContext, request: Any) -> Any:
    try:
        return _describe(ctx, request)
    except _InvalidRequest:
        return error_response(ctx, request, ErrorCode.invalid_request)


def _describe(ctx: RequestContext, request: Any) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    cluster = ctx.services.metadata
    cursor = request.cursor
    cursor_topic = cursor.topic_name if cursor is not None else ""
    fetch_all = not request.topics
    names = cluster.topics.keys() if fetch_all else {t.name for t in request.topics}
    topics = sorted(name for name in names if name >= cursor_topic)
    denied: set[str] = set()
    if ctx.services.security.authorizer is not None:
        allowed = filter_by_authorized(
            ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, topics, log_if_denied=not fetch_all
        )
        denied = set(topics) - allowed
        if fetch_all:  # all topics: those not describable are left out
            topics = [name for name in topics if name in allowed]
    if cursor is not None:
        if not fetch_all and cursor.topic_name not in topics:
            raise _InvalidRequest
        if int(cursor.partition_index) < 0:
            raise _InvalidRequest
    limit = max(min(MAX_REQUEST_PARTITION_SIZE_LIMIT, int(request.response_partition_limit)), 1)
    alive = {broker.broker_id for broker in cluster.alive_brokers()}
    remaining = limit
    answered: list[Any] = []
    next_cursor = None
    for name in topics:
        if remaining == 0:
            next_cursor = b.Cursor(topic_name=name, partition_index=0)
            break
        if name in denied:
            answered.append(_unknown_topic(b, name, ErrorCode.topic_authorization_failed))
            continue
        info = cluster.topics.get(name)
        if info is None:
            if not fetch_all:
                answered.append(_unknown_topic(b, name))
            continue
        start = int(cursor.partition_index) if cursor is not None and name == cursor_topic else 0
        end = min(len(info.partitions), start + remaining)
        partitions = tuple(_partition(b, state, alive) for state in info.partitions[start:end])
        answered.append(_topic(b, info, ErrorCode.none, partitions))
        if end < len(info.partitions):
            next_cursor = b.Cursor(topic_name=name, partition_index=end)
            break
        remaining -= len(partitions)
    return b.DescribeTopicPartitionsResponse(
        throttle_time=0, topics=tuple(answered), next_cursor=next_cursor
    )


def _topic(b: Builder, info: TopicInfo, error: ErrorCode, partitions: tuple[Any, ...]) -> Any:
    return b.DescribeTopicPartitionsResponseTopic(
        error_code=error,
        name=info.name,
        topic_id=info.topic_id,
        is_internal=info.name in INTERNAL_TOPICS,
        partitions=partitions,
        topic_authorized_operations=TOPIC_AUTHORIZED_OPERATIONS,
    )


def _unknown_topic(b: Builder, name: str, error: ErrorCode | None = None) -> Any:
    """A topic answered without partitions: unknown, invalid, or (``error``) refused."""
    if error is None:
        try:
            validate_topic_name(name)
            error = ErrorCode.unknown_topic_or_partition
        except MetadataError:
            error = ErrorCode.invalid_topic_exception
    return b.DescribeTopicPartitionsResponseTopic(
        error_code=error,
        name=name,
        topic_id=_NO_UUID,
        is_internal=name in INTERNAL_TOPICS,
        partitions=(),
        topic_authorized_operations=TOPIC_AUTHORIZED_OPERATIONS,
    )


def _partition(b: Builder, state: PartitionState, alive: set[int]) -> Any:
    return b.DescribeTopicPartitionsResponsePartition(
        error_code=ErrorCode.none,
        partition_index=state.partition,
        leader_id=state.leader,
        leader_epoch=state.leader_epoch,
        replica_nodes=tuple(state.replicas),
        isr_nodes=tuple(state.isr),
        eligible_leader_replicas=tuple(state.elr),
        last_known_elr=tuple(state.last_known_elr),
        offline_replicas=tuple(r for r in state.replicas if r not in alive),
    )


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    """``error`` for every topic named (Kafka's ``getErrorResponse``), no cursor."""
    b = response_builder(API_KEY, ctx.api_version)
    return b.DescribeTopicPartitionsResponse(
        throttle_time=0,
        topics=tuple(
            b.DescribeTopicPartitionsResponseTopic(
                error_code=error,
                name=topic.name,
                topic_id=_NO_UUID,
                is_internal=False,
                partitions=(),
                topic_authorized_operations=-2147483648,
            )
            for topic in request.topics
        ),
        next_cursor=None,
    )
