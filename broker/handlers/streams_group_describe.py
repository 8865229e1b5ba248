"""StreamsGroupDescribe (key 89): a streams group's state, epochs, topology and members.

Versions 0 (Kafka 4.2's only version).

Behavior:
- Each member comes with its process id, user endpoint, client tags, topology epoch, its
  current assignment (active, standby, warm-up tasks) and its target assignment; the
  topology with each subtopology's source, repartition sink, repartition source and
  changelog topics (internal topics with the partition counts the broker decided once
  the topology is configured, else as the member sent them).
- A group this broker does not coordinate gets the coordinator's error; one it does
  not know as a streams group GROUP_ID_NOT_FOUND ("Streams group g not found." / "Group g
  is not a streams group."), as Kafka answers; without DESCRIBE on the group
  GROUP_AUTHORIZATION_FAILED; while ``streams.version`` is 0 UNSUPPORTED_VERSION.
- Task offsets are empty (Kafka 4.2 refuses them in the heartbeat); authorized
  operations are computed only when asked, as the other Describe APIs here.

Version notes:
- v0: ``IsClassic`` is always false (no classic members in a streams group).
"""

from __future__ import annotations

from functools import partial
from typing import Any

from kio.schema.errors import ErrorCode

from broker.group.streams.streams_group import StreamsGroup
from broker.group.streams.streams_group_member import StreamsGroupMember
from broker.group.streams.streams_topology import StreamsTopology, TopicInfo
from broker.group.streams.tasks_tuple import Tasks, TasksTuple
from broker.handlers.feature_gates import streams_groups_enabled
from broker.handlers.group_describe import OPERATIONS_OMITTED, describe_each, failed_group
from broker.server.context import RequestContext
from protocol.builders import Builder, response_builder

API_KEY = 89
MIN_VERSION = 0
MAX_VERSION = 0


def _task_ids(b: Builder, tasks: Tasks) -> tuple[Any, ...]:
    return tuple(
        b.TaskIds(subtopology_id=s, partitions=tuple(sorted(ps))) for s, ps in sorted(tasks.items())
    )


def _assignment(b: Builder, t: TasksTuple) -> Any:
    return b.Assignment(
        active_tasks=_task_ids(b, t.active),
        standby_tasks=_task_ids(b, t.standby),
        warmup_tasks=_task_ids(b, t.warmup),
    )


def _member(b: Builder, group: StreamsGroup, m: StreamsGroupMember) -> Any:
    endpoint = m.user_endpoint
    return b.Member(
        member_id=m.member_id,
        member_epoch=m.member_epoch,
        instance_id=m.instance_id,
        rack_id=m.rack_id,
        client_id=m.client_id,
        client_host=m.client_host,
        topology_epoch=m.topology_epoch,
        process_id=m.process_id,
        user_endpoint=b.Endpoint(host=endpoint.host, port=endpoint.port) if endpoint else None,
        client_tags=tuple(b.KeyValue(key=k, value=v) for k, v in m.client_tags),
        task_offsets=(),
        task_end_offsets=(),
        assignment=_assignment(b, m.assigned_tasks),
        target_assignment=_assignment(b, group.target_assignment_of(m.member_id)),
        is_classic=False,
    )


def _topic_info(b: Builder, t: TopicInfo, partitions: int | None) -> Any:
    return b.TopicInfo(
        name=t.name,
        partitions=partitions if partitions is not None else t.partitions,
        replication_factor=t.replication_factor,
        topic_configs=tuple(b.KeyValue(key=k, value=v) for k, v in t.topic_configs),
    )


def _topology(b: Builder, group: StreamsGroup, topology: StreamsTopology) -> Any:
    configured = group.configured_topology
    decided = configured.subtopologies if configured is not None else None
    subtopologies = []
    for sid, s in sorted(topology.subtopologies.items()):
        c = decided.get(sid) if decided is not None else None
        subtopologies.append(
            b.Subtopology(
                subtopology_id=sid,
                source_topics=s.source_topics,
                repartition_sink_topics=s.repartition_sink_topics,
                state_changelog_topics=tuple(
                    _topic_info(b, t, c.state_changelog_topics.get(t.name) if c else None)
                    for t in s.state_changelog_topics
                ),
                repartition_source_topics=tuple(
                    _topic_info(b, t, c.repartition_source_topics.get(t.name) if c else None)
                    for t in s.repartition_source_topics
                ),
            )
        )
    return b.Topology(epoch=topology.topology_epoch, subtopologies=tuple(subtopologies))


def _described(b: Builder, group: StreamsGroup) -> Any:
    topology = group.topology
    return b.DescribedGroup(
        error_code=ErrorCode.none,
        error_message=None,
        group_id=group.group_id,
        group_state=group.state.value,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        topology=_topology(b, group, topology) if topology is not None else None,
        members=tuple(_member(b, group, m) for _, m in sorted(group.members.items())),
        authorized_operations=OPERATIONS_OMITTED,
    )


def _failed(b: Builder, group_id: str, error: ErrorCode, message: str | None) -> Any:
    return failed_group(b, group_id, error, message, topology=None)


def handle(ctx: RequestContext, request: Any) -> Any:
    if not streams_groups_enabled(ctx):
        return error_response(ctx, request, ErrorCode.unsupported_version)
    b = response_builder(API_KEY, ctx.api_version)
    coordinator = ctx.services.coordinators.streams_group

    def described(group_id: str) -> Any:
        return _described(b, coordinator.streams_group(group_id))  # GROUP_ID_NOT_FOUND

    groups = describe_each(ctx, request.group_ids, described, partial(_failed, b))
    return b.StreamsGroupDescribeResponse(throttle_time=0, groups=groups)


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    return b.StreamsGroupDescribeResponse(
        throttle_time=0, groups=tuple(_failed(b, g, error, None) for g in request.group_ids)
    )
