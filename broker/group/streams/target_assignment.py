"""Kafka's streams ``TargetAssignmentBuilder`` and ``EndpointToPartitionsManager``.

The target is computed from the group's members (the one being updated as it is now),
their current target tasks (the assignor's stickiness) and the configured topology:
with a topology that is not ready every member's target is empty (Kafka's builder does
the same); otherwise the sticky assignor's answer. The new target and its epoch are put
in the group; the coordinator writes what changed.

The endpoint map (StreamsGroupHeartbeat's ``PartitionsByUserEndpoint``): for each member
with a user endpoint, the partitions its active and standby tasks read, topic by topic —
partition p of each source and repartition source topic of the task's subtopology (a
topic with fewer partitions than the task set is cut at its count, as Kafka's).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from broker.group.streams.configured_topology import ConfiguredSubtopology, ConfiguredTopology
from broker.group.streams.heartbeat import EndpointToPartitions, TopicPartitions
from broker.group.streams.sticky_task_assignor import (
    AssignmentMemberSpec,
    StickyTaskAssignor,
    SubtopologyTasks,
)
from broker.group.streams.streams_group import StreamsGroup
from broker.group.streams.streams_group_member import StreamsGroupMember
from broker.group.streams.tasks_tuple import EMPTY, Tasks, TasksTuple

log = logging.getLogger("broker.group.streams")


def update_target_assignment(
    group: StreamsGroup,
    group_epoch: int,
    updated: StreamsGroupMember,
    assignor: StickyTaskAssignor,
    configs: Mapping[str, str],
) -> TasksTuple:
    """Compute and install the target at ``group_epoch``; the updated member's target."""
    members = dict(group.members)
    members[updated.member_id] = updated
    configured = group.configured_topology
    if configured is None or not configured.is_ready or configured.subtopologies is None:
        target = dict.fromkeys(members, EMPTY)
    else:
        specs = {
            member_id: AssignmentMemberSpec(m.process_id, group.target_assignment_of(member_id))
            for member_id, m in members.items()
        }
        subtopologies = [
            SubtopologyTasks(sid, s.number_of_tasks, s.is_stateful)
            for sid, s in sorted(configured.subtopologies.items())
        ]
        target = assignor.assign(specs, subtopologies, configs)
    log.info(
        "[GroupId %s] Computed a new target assignment for epoch %d with '%s' assignor.",
        group.group_id,
        group_epoch,
        assignor.name,
    )
    group.set_target_assignment(group_epoch, target)
    return target.get(updated.member_id, EMPTY)


def _topic_partitions(
    tasks: Tasks, subtopologies: Mapping[str, ConfiguredSubtopology], counts: Mapping[str, int]
) -> TopicPartitions:
    out: list[tuple[str, tuple[int, ...]]] = []
    for sid, partitions in sorted(tasks.items()):
        s = subtopologies.get(sid)
        if s is None:
            continue
        for topic in sorted({*s.source_topics, *s.repartition_source_topics}):
            ordered = tuple(sorted(partitions))
            out.append((topic, ordered[: counts.get(topic, len(ordered))]))
    return tuple(out)


def endpoints_to_partitions(
    group: StreamsGroup, counts: Mapping[str, int]
) -> tuple[EndpointToPartitions, ...] | None:
    """Kafka's ``maybeBuildEndpointToPartitions``: None when no member has an endpoint."""
    configured: ConfiguredTopology | None = group.configured_topology
    subtopologies = configured.subtopologies if configured is not None else None
    found = []
    for member in group.members.values():
        if member.user_endpoint is None:
            continue
        tasks = member.assigned_tasks
        found.append(
            EndpointToPartitions(
                member.user_endpoint,
                _topic_partitions(tasks.active, subtopologies or {}, counts),
                _topic_partitions(tasks.standby, subtopologies or {}, counts),
            )
        )
    return tuple(found) or None
