"""CreateTopics (key 19): new topics with partitions, replicas and config overrides.

As Kafka: ``num_partitions``/``replication_factor`` of -1 take the broker's
``num.partitions``/``default.replication.factor``; an explicit replica assignment
excludes both counts (INVALID_REQUEST) and must cover partitions 0..n-1 with the same
number of distinct, known brokers each (INVALID_REPLICA_ASSIGNMENT); config names
Kafka does not know, null values and values of the wrong type are INVALID_CONFIG; a
topic named twice in one request is INVALID_REQUEST; a name that differs from an
existing topic only by '.' versus '_' collides (INVALID_TOPIC_EXCEPTION), since both
map to the same metric names. ``validate_only`` checks everything and creates nothing.
v5+ answers with the topic's partition count, replication factor and every topic
config with its source; v7+ with the topic id.

Differences from Kafka: any broker accepts the request (as KRaft brokers do by
forwarding it to the controller); the topic exists, with its leaders elected, when the
response leaves, so ``timeout`` is never waited on. There are no create-topic policies
(``create.topic.policy.class.name``). With an authorizer a topic needs CREATE on the
cluster or on itself (else TOPIC_AUTHORIZATION_FAILED, "Authorization failed."); the
configs of a created topic are returned without a DESCRIBE_CONFIGS check. A client with a
``controller_mutation_rate`` takes each topic's partitions from it once the topic is
valid (KIP-599; from v6 a topic asked for while it is exhausted is
THROTTLING_QUOTA_EXCEEDED, ``broker/quota/controller_mutation_quota.py``).
"""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import (
    EXCESSIVE_PARTITIONS_MESSAGE,
    MAX_PARTITIONS_PER_BATCH,
    MetadataError,
    TopicInfo,
    validate_topic_name,
)
from broker.handlers.base import error_message
from broker.handlers.broker_configs import layers_for
from broker.handlers.controller_mutation_common import (
    leave_throttle_time,
    mutation_quota,
    take_permits,
)
from broker.handlers.topic_configs import topic_config_entries, validate_topic_configs
from broker.quota.controller_mutation_quota import ControllerMutationQuota
from broker.security.authorizer.authorization import (
    AclOperation,
    ResourceType,
    authorize_cluster,
    filter_by_authorized,
)
from broker.server.context import RequestContext
from protocol.builders import Builder, response_builder

API_KEY = 19
MIN_VERSION = 2
MAX_VERSION = 7
STRICT_QUOTA_SINCE_VERSION = 6

_NO_UUID = uuid.UUID(int=0)


def handle(ctx: RequestContext, request: Any) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    validate_only = bool(request.validate_only)
    counts: dict[str, int] = {}
    for topic in request.topics:
        counts[topic.name] = counts.get(topic.name, 0) + 1
    if _total_partitions(request.topics, ctx.services.config.num_partitions) > (
        MAX_PARTITIONS_PER_BATCH
    ):
        return error_response_with(
            ctx, request, ErrorCode.policy_violation, EXCESSIVE_PARTITIONS_MESSAGE
        )
    quota = mutation_quota(ctx, STRICT_QUOTA_SINCE_VERSION)
    denied = _denied_topics(ctx, counts) if ctx.services.security.authorizer is not None else set()
    results = []
    for topic in request.topics:
        if topic.name in denied:
            results.append(
                _error(b, topic.name, ErrorCode.topic_authorization_failed, "Authorization failed.")
            )
            continue
        if counts[topic.name] > 1:
            error = MetadataError(
                ErrorCode.invalid_request,
                f"Create topics request contains multiple entries for the topic {topic.name}",
            )
            results.append(_error(b, topic.name, error.error, error.message))
            continue
        try:
            info = _create(ctx, topic, validate_only, quota)
        except MetadataError as exc:
            results.append(_error(b, topic.name, exc.error, exc.message))
            continue
        results.append(_created(ctx, b, info))
    leave_throttle_time(ctx, quota)
    return b.CreateTopicsResponse(throttle_time=0, topics=tuple(results))


def _denied_topics(ctx: RequestContext, names: dict[str, int]) -> set[str]:
    """CREATE on the cluster allows every topic; else CREATE on each topic
    (``KafkaApis.handleCreateTopicsRequest``)."""
    if authorize_cluster(ctx, AclOperation.CREATE):
        return set()
    return set(names) - filter_by_authorized(ctx, AclOperation.CREATE, ResourceType.TOPIC, names)


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    """``error`` for every topic of the request; nothing is created."""
    return error_response_with(ctx, request, error, error_message(error))


def error_response_with(
    ctx: RequestContext, request: Any, error: ErrorCode, message: str | None
) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    return b.CreateTopicsResponse(
        throttle_time=0,
        topics=tuple(_error(b, topic.name, error, message) for topic in request.topics),
    )


def _total_partitions(topics: Any, default_partitions: int) -> int:
    """Partitions the request would create (Kafka counts before any other check)."""
    total = 0
    for topic in topics:
        if topic.assignments:
            total += len(topic.assignments)
        elif int(topic.num_partitions) == -1:
            total += default_partitions
        elif int(topic.num_partitions) > 0:
            total += int(topic.num_partitions)
    return total


def _create(
    ctx: RequestContext, topic: Any, validate_only: bool, quota: ControllerMutationQuota
) -> TopicInfo:
    services = ctx.services
    cluster = services.metadata
    name = topic.name
    validate_topic_name(name)
    if name not in cluster.topics:
        _check_collision(name, cluster.topics)
    num_partitions = int(topic.num_partitions)
    replication_factor = int(topic.replication_factor)
    assignment: list[list[int]] | None = None
    if topic.assignments:
        if num_partitions != -1 or replication_factor != -1:
            raise MetadataError(
                ErrorCode.invalid_request,
                "Both numPartitions or replicationFactor and replicasAssignments were set. "
                "Both cannot be used at the same time.",
            )
        assignment = _assignment(topic.assignments)
    else:
        if num_partitions == -1:
            num_partitions = services.config.num_partitions
        if replication_factor == -1:
            replication_factor = services.config.default_replication_factor
        if num_partitions < 1:
            raise MetadataError(
                ErrorCode.invalid_partitions,
                f"Number of partitions was set to an invalid non-positive value: {num_partitions}.",
            )
        if replication_factor < 1:
            raise MetadataError(
                ErrorCode.invalid_replication_factor,
                f"Replication factor must be larger than 0, or -1 to use the default value: "
                f"{replication_factor}.",
            )
    configs = validate_topic_configs(
        ((c.name, c.value) for c in topic.configs),
        remote_storage_system_enabled=ctx.services.config.remote_log_storage_system_enable,
    )
    take_permits(quota, len(assignment) if assignment is not None else num_partitions)
    return cluster.create_topic(
        name,
        num_partitions,
        replication_factor,
        configs,
        assignment=assignment,
        validate_only=validate_only,
    )


def _check_collision(name: str, existing: dict[str, TopicInfo]) -> None:
    if "." not in name and "_" not in name:
        return
    normalized = name.replace(".", "_")
    for other in existing:
        if other.replace(".", "_") == normalized:
            raise MetadataError(
                ErrorCode.invalid_topic_exception,
                f"Topic '{name}' collides with existing topic: {other}",
            )


def _assignment(assignments: Any) -> list[list[int]]:
    by_partition = {int(a.partition_index): [int(b) for b in a.broker_ids] for a in assignments}
    if sorted(by_partition) != list(range(len(by_partition))) or len(by_partition) != len(
        assignments
    ):
        raise MetadataError(
            ErrorCode.invalid_replica_assignment,
            "partitions should be a consecutive 0-based integer sequence",
        )
    result = [by_partition[p] for p in range(len(by_partition))]
    sizes = {len(replicas) for replicas in result}
    if len(sizes) != 1:
        raise MetadataError(
            ErrorCode.invalid_replica_assignment,
            "All partitions should have the same number of replicas",
        )
    return result


def _error(b: Builder, name: str, error: ErrorCode, message: str | None) -> Any:
    return b.CreatableTopicResult(
        name=name,
        topic_id=_NO_UUID,
        error_code=error,
        error_message=message,
        num_partitions=-1,
        replication_factor=-1,
        configs=None,
    )


def _created(ctx: RequestContext, b: Builder, info: TopicInfo) -> Any:
    configs: tuple[Any, ...] = ()
    if ctx.api_version >= 5:  # configs entered the response in v5
        configs = tuple(
            b.CreatableTopicConfigs(
                name=entry.name,
                value=entry.value,
                read_only=entry.read_only,
                config_source=int(entry.source),
                is_sensitive=entry.is_sensitive,
            )
            for entry in topic_config_entries(layers_for(ctx.services), info.configs)
        )
    return b.CreatableTopicResult(
        name=info.name,
        topic_id=info.topic_id,
        error_code=ErrorCode.none,
        error_message=None,
        num_partitions=len(info.partitions),
        replication_factor=len(info.partitions[0].replicas) if info.partitions else -1,
        configs=configs,
    )
