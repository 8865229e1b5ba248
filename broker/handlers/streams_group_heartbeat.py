"""StreamsGroupHeartbeat (key 88): KIP-1071's join, heartbeat and leave of a Kafka
Streams member, and the broker's task assignment.

Versions 0 (Kafka 4.2's only version).

Behavior:
- The request goes to the ``StreamsGroupCoordinator`` (``broker/group/streams/``) as its
  fields are (``None`` for what a heartbeat left out); the answer carries the member
  epoch, the heartbeat interval, the statuses, the active/standby/warm-up tasks when they
  are sent, and the endpoint -> partitions map for interactive queries.
- Refused before the coordinator sees it, as Kafka's ``KafkaApis``: UNSUPPORTED_VERSION
  while ``streams.version`` is 0 or ``streams`` is not among
  ``group.coordinator.rebalance.protocols`` (ApiVersions advertises the API either way,
  as Kafka 4.2's); GROUP_AUTHORIZATION_FAILED without READ on
  the group; STREAMS_INVALID_TOPOLOGY for a topology naming Kafka's internal topics ("Use
  of Kafka internal topics __consumer_offsets in a Kafka Streams topology is
  prohibited.") or invalid topic names; TOPIC_AUTHORIZATION_FAILED without DESCRIBE on
  one of its topics.
- The internal topics the topology needs and the cluster lacks (repartition and changelog
  topics, with the partition counts decided by the coordinator, the replication factor
  asked for or ``default.replication.factor``, and the topology's topic configs) are
  created here, after the coordinator answered MISSING_INTERNAL_TOPICS: Kafka's broker
  creates them through the controller the same way.
- While the group's ``__consumer_offsets`` partition loads: COORDINATOR_LOAD_IN_PROGRESS.
  A heartbeat that changed the group is answered once its records are written (acks=all).

Version notes:
- v0: static membership (``InstanceId``), task offsets, warm-up tasks and source topic
  regexes are refused with INVALID_REQUEST, in Kafka 4.2's words ("Static membership is
  not yet supported.").
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import MetadataError, validate_topic_name
from broker.group.streams.configured_topology import CreatableTopic
from broker.group.streams.heartbeat import (
    StreamsGroupHeartbeatParams,
    StreamsGroupHeartbeatResult,
    TopicPartitions,
)
from broker.group.streams.streams_group_member import Endpoint
from broker.group.streams.streams_topology import (
    CopartitionGroup,
    StreamsTopology,
    Subtopology,
    TopicInfo,
)
from broker.group.streams.tasks_tuple import Tasks
from broker.handlers.feature_gates import streams_groups_enabled
from broker.handlers.group_common import answer_when_called, group_denied
from broker.security.authorizer.authorization import (
    AclOperation,
    ResourceType,
    filter_by_authorized,
)
from broker.server.context import RequestContext
from protocol.builders import Builder, response_builder

API_KEY = 88
MIN_VERSION = 0
MAX_VERSION = 0

log = logging.getLogger("broker.group.streams")

INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state", "__share_group_state")


def _topic_info(t: Any) -> TopicInfo:
    configs = tuple((str(c.key), str(c.value)) for c in t.topic_configs)
    return TopicInfo(str(t.name), int(t.partitions), int(t.replication_factor), configs)


def topology_of(topology: Any) -> StreamsTopology:
    """The request's topology, fields in the order sent."""
    return StreamsTopology.of(
        int(topology.epoch),
        [
            Subtopology(
                str(s.subtopology_id),
                tuple(str(t) for t in s.source_topics),
                tuple(str(r) for r in s.source_topic_regex),
                tuple(_topic_info(t) for t in s.state_changelog_topics),
                tuple(str(t) for t in s.repartition_sink_topics),
                tuple(_topic_info(t) for t in s.repartition_source_topics),
                tuple(
                    CopartitionGroup(
                        tuple(int(i) for i in g.source_topics),
                        tuple(int(i) for i in g.source_topic_regex),
                        tuple(int(i) for i in g.repartition_source_topics),
                    )
                    for g in s.copartition_groups
                ),
            )
            for s in topology.subtopologies
        ],
    )


def _tasks(items: Any) -> dict[str, tuple[int, ...]] | None:
    if items is None:
        return None
    return {str(t.subtopology_id): tuple(int(p) for p in t.partitions) for t in items}


def heartbeat_params(ctx: RequestContext, request: Any) -> StreamsGroupHeartbeatParams:
    endpoint = request.user_endpoint
    tags = request.client_tags
    return StreamsGroupHeartbeatParams(
        group_id=request.group_id,
        member_id=request.member_id,
        member_epoch=int(request.member_epoch),
        endpoint_information_epoch=int(request.endpoint_information_epoch),
        instance_id=request.instance_id,
        rack_id=request.rack_id,
        rebalance_timeout_ms=int(request.rebalance_timeout.total_seconds() * 1000),
        topology=topology_of(request.topology) if request.topology is not None else None,
        active_tasks=_tasks(request.active_tasks),
        standby_tasks=_tasks(request.standby_tasks),
        warmup_tasks=_tasks(request.warmup_tasks),
        process_id=request.process_id,
        user_endpoint=Endpoint(endpoint.host, int(endpoint.port)) if endpoint is not None else None,
        client_tags=tuple((str(kv.key), str(kv.value)) for kv in tags)
        if tags is not None
        else None,
        has_task_offsets=request.task_offsets is not None,
        has_task_end_offsets=request.task_end_offsets is not None,
        shutdown_application=bool(request.shutdown_application),
        client_id=ctx.header.client_id or "",
        client_host="/" + ctx.connection.client_host,
    )


def _refused_topology(ctx: RequestContext, topology: StreamsTopology) -> Any | None:
    """``KafkaApis``' checks of the topology's topic names and DESCRIBE on them."""
    required = list(topology.required_topics())
    internal = [t for t in required if t in INTERNAL_TOPICS]
    if internal:
        return _error(
            ctx,
            ErrorCode.streams_invalid_topology,
            f"Use of Kafka internal topics {','.join(internal)} in a Kafka Streams topology "
            "is prohibited.",
        )
    invalid = []
    for name in required:
        try:
            validate_topic_name(name)
        except MetadataError:
            invalid.append(name)
    if invalid:
        return _error(
            ctx,
            ErrorCode.streams_invalid_topology,
            f"Topic names {','.join(invalid)} are not valid topic names.",
        )
    allowed = filter_by_authorized(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, required)
    if len(allowed) < len(required):
        return _error(ctx, ErrorCode.topic_authorization_failed)
    return None


def handle(ctx: RequestContext, request: Any) -> Any:
    if not streams_groups_enabled(ctx):
        return error_response(ctx, request, ErrorCode.unsupported_version)
    if group_denied(ctx, request.group_id):
        return error_response(ctx, request, ErrorCode.group_authorization_failed)
    error = ctx.services.coordinators.group_metadata_manager.check_coordinator(request.group_id)
    if error is not ErrorCode.none and request.group_id:
        return error_response(ctx, request, error)
    params = heartbeat_params(ctx, request)
    if params.topology is not None:
        refused = _refused_topology(ctx, params.topology)
        if refused is not None:
            return refused
    coordinator = ctx.services.coordinators.streams_group

    def start(respond: Callable[[StreamsGroupHeartbeatResult], None]) -> None:
        coordinator.heartbeat(params, respond, parked_request=ctx)

    def answer(result: StreamsGroupHeartbeatResult) -> Any:
        create_internal_topics(ctx, result.internal_topics_to_create.values())
        return _response(ctx, result)

    return answer_when_called(start, answer)


def create_internal_topics(ctx: RequestContext, topics: Any) -> None:
    """Kafka's ``AutoTopicCreationManager.createStreamsInternalTopics``."""
    metadata = ctx.services.metadata
    for topic in topics:
        assert isinstance(topic, CreatableTopic)
        if topic.name in metadata.topics:
            continue
        replication = topic.replication_factor
        if replication <= 0:
            alive = len(metadata.alive_brokers())
            replication = min(ctx.services.config.default_replication_factor, max(alive, 1))
        try:
            metadata.create_topic(
                topic.name, topic.num_partitions, replication, dict(topic.configs)
            )
        except MetadataError as exc:
            log.warning("Creating the internal topic %s failed: %s", topic.name, exc)


def _task_ids(b: Builder, tasks: Tasks) -> tuple[Any, ...]:
    return tuple(
        b.TaskIds(subtopology_id=s, partitions=tuple(sorted(ps))) for s, ps in sorted(tasks.items())
    )


def _topic_partitions(b: Builder, items: TopicPartitions) -> tuple[Any, ...]:
    return tuple(b.TopicPartition(topic=t, partitions=ps) for t, ps in items)


def _response(ctx: RequestContext, result: StreamsGroupHeartbeatResult) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    assignment = result.assignment
    by_endpoint = None
    if result.partitions_by_user_endpoint is not None:
        by_endpoint = tuple(
            b.EndpointToPartitions(
                user_endpoint=b.Endpoint(host=e.endpoint.host, port=e.endpoint.port),
                active_partitions=_topic_partitions(b, e.active),
                standby_partitions=_topic_partitions(b, e.standby),
            )
            for e in result.partitions_by_user_endpoint
        )
    return b.StreamsGroupHeartbeatResponse(
        throttle_time=0,
        error_code=result.error,
        error_message=result.error_message,
        member_id=result.member_id,
        member_epoch=result.member_epoch,
        heartbeat_interval=result.heartbeat_interval_ms,
        acceptable_recovery_lag=0,
        task_offset_interval=0,
        status=tuple(b.Status(status_code=c, status_detail=d) for c, d in result.status) or None,
        active_tasks=_task_ids(b, assignment.active) if assignment is not None else None,
        standby_tasks=_task_ids(b, assignment.standby) if assignment is not None else None,
        warmup_tasks=_task_ids(b, assignment.warmup) if assignment is not None else None,
        endpoint_information_epoch=result.endpoint_information_epoch,
        partitions_by_user_endpoint=by_endpoint,
    )


def _error(ctx: RequestContext, error: ErrorCode, message: str | None = None) -> Any:
    return _response(ctx, StreamsGroupHeartbeatResult(error=error, error_message=message))


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    return _error(ctx, error)
