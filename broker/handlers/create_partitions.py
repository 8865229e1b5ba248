"""CreatePartitions (key 37): grow a topic to a new partition count.

As Kafka: an unknown topic is UNKNOWN_TOPIC_OR_PARTITION; a count that does not grow
the topic is INVALID_PARTITIONS; explicit assignments must give one replica list per
new partition, of distinct known brokers, with the topic's replication factor
(INVALID_REPLICA_ASSIGNMENT); a topic named twice is INVALID_REQUEST;
``validate_only`` checks and changes nothing. New partitions get leaders at once and
every broker's replica manager creates its replicas when the metadata changes.

Differences from Kafka: any broker accepts the request (KRaft brokers forward it) and
``timeout`` is never waited on. No create-topic policies. A client with a
``controller_mutation_rate`` takes the partitions it adds from it (KIP-599; from v3
strictly: THROTTLING_QUOTA_EXCEEDED while exhausted).

With an authorizer, ALTER on the topic (else TOPIC_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import (
    EXCESSIVE_PARTITIONS_MESSAGE,
    MAX_PARTITIONS_PER_BATCH,
    MetadataError,
)
from broker.handlers.base import error_message
from broker.handlers.config_authorization import check_topic_alter
from broker.handlers.controller_mutation_common import (
    leave_throttle_time,
    mutation_quota,
    take_permits,
)
from broker.quota.controller_mutation_quota import ControllerMutationQuota
from broker.server.context import RequestContext
from protocol.builders import response_builder

API_KEY = 37
MIN_VERSION = 0
MAX_VERSION = 3
STRICT_QUOTA_SINCE_VERSION = 3


def handle(ctx: RequestContext, request: Any) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    validate_only = bool(request.validate_only)
    counts: dict[str, int] = {}
    for topic in request.topics:
        counts[topic.name] = counts.get(topic.name, 0) + 1
    cluster = ctx.services.metadata
    added = 0
    for topic in request.topics:
        info = cluster.topics.get(topic.name)
        added += max(int(topic.count) - (len(info.partitions) if info else 0), 0)
    if added > MAX_PARTITIONS_PER_BATCH:
        return _all_failed(ctx, request, ErrorCode.policy_violation, EXCESSIVE_PARTITIONS_MESSAGE)
    quota = mutation_quota(ctx, STRICT_QUOTA_SINCE_VERSION)
    results = []
    for topic in request.topics:
        error, message = ErrorCode.none, None
        try:
            check_topic_alter(ctx, topic.name)
            if counts[topic.name] > 1:
                raise MetadataError(
                    ErrorCode.invalid_request, f"Duplicate topic {topic.name} in the request"
                )
            _create_partitions(ctx, topic, validate_only, quota)
        except MetadataError as exc:
            error, message = exc.error, exc.message
        results.append(
            b.CreatePartitionsTopicResult(name=topic.name, error_code=error, error_message=message)
        )
    leave_throttle_time(ctx, quota)
    return b.CreatePartitionsResponse(throttle_time=0, results=tuple(results))


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    """``error`` for every topic of the request; no partition is created."""
    return _all_failed(ctx, request, error, error_message(error))


def _all_failed(ctx: RequestContext, request: Any, error: ErrorCode, message: str | None) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    return b.CreatePartitionsResponse(
        throttle_time=0,
        results=tuple(
            b.CreatePartitionsTopicResult(name=topic.name, error_code=error, error_message=message)
            for topic in request.topics
        ),
    )


def _create_partitions(
    ctx: RequestContext, topic: Any, validate_only: bool, quota: ControllerMutationQuota
) -> None:
    cluster = ctx.services.metadata
    count = int(topic.count)
    assignment: list[list[int]] | None = None
    info = cluster.topics.get(topic.name)
    if topic.assignments is not None and info is not None:
        assignment = [[int(b) for b in a.broker_ids] for a in topic.assignments]
        rf = len(info.partitions[0].replicas) if info.partitions else 0
        wrong = [len(replicas) for replicas in assignment if len(replicas) != rf]
        if wrong and count > len(info.partitions):
            raise MetadataError(
                ErrorCode.invalid_replica_assignment,
                f"Inconsistent replication factor between partitions: the topic has {rf}, "
                f"the assignment gives {wrong}",
            )
    if info is not None and count > len(info.partitions):
        take_permits(quota, count - len(info.partitions))
    cluster.create_partitions(topic.name, count, assignment=assignment, validate_only=validate_only)
