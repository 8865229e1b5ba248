"""Kafka's ``StreamsGroup``: members, epochs, the topology, the target assignment.

The three epochs are those of a consumer group (``broker/group/consumer/consumer_group.py``):
the **group epoch** moves when what the assignor sees changes (a member joins, leaves or
changes its metadata, the topology is set or validated, the topics' metadata hash moves,
the assignment configs change); the **target assignment epoch** is the group epoch the
target was computed at; each **member epoch** is the target epoch the member reconciled to.

Beside them: the ``topology`` (set by the first member, durable), the
``configured_topology`` (the topology against the cluster's topics, recomputed on a
heartbeat, never written), the ``metadata_hash`` and ``validated_topology_epoch`` that
say which configuration the target was computed from, and ``endpoint_information_epoch``
(bumped whenever an assignment a member hears changes, so members ask for the endpoint ->
partitions map again).

Which process holds each task, as Kafka's ``currentActiveTaskProcessId`` /
``currentStandbyTaskProcessIds`` / ``currentWarmupTaskProcessIds``: tasks assigned or
pending revocation count, so reconciliation never hands a task to a second process
before its holder released it.

State is derived (Kafka's ``maybeUpdateGroupState``): EMPTY without members, NOT_READY
while the topology is missing or not ready, ASSIGNING while the group epoch is ahead of
the target, RECONCILING while a member is not reconciled, else STABLE.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

from broker.group.member_epochs import unknown_member
from broker.group.streams.configured_topology import ConfiguredTopology
from broker.group.streams.streams_group_member import StreamsGroupMember
from broker.group.streams.streams_topology import StreamsTopology
from broker.group.streams.tasks_tuple import EMPTY, TaskId, TasksTuple, task_ids


class StreamsGroupState(StrEnum):
    """Kafka's ``StreamsGroup.StreamsGroupState`` (the names ListGroups prints)."""

    EMPTY = "Empty"
    NOT_READY = "NotReady"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class StreamsGroup:
    """One streams group; see the module docstring."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, StreamsGroupMember] = {}
        self.target_assignment: dict[str, TasksTuple] = {}
        self.topology: StreamsTopology | None = None
        self.configured_topology: ConfiguredTopology | None = None
        self.metadata_hash = 0
        self.validated_topology_epoch = -1
        self.last_assignment_configs: dict[str, str] = {}
        self.endpoint_information_epoch = 0
        self.shutdown_request_member_id: str | None = None
        self.active_task_process: dict[TaskId, str] = {}
        self.standby_task_processes: dict[TaskId, set[str]] = {}
        self.warmup_task_processes: dict[TaskId, set[str]] = {}
        self.state = StreamsGroupState.EMPTY

    # ---------------------------------------------------------------- members
    @property
    def num_members(self) -> int:
        return len(self.members)

    def get_member(self, member_id: str) -> StreamsGroupMember:
        """Kafka's ``getMemberOrThrow``: UNKNOWN_MEMBER_ID when absent."""
        member = self.members.get(member_id)
        if member is None:
            raise unknown_member(self.group_id, member_id)
        return member

    def update_member(self, member: StreamsGroupMember) -> None:
        old = self.members.get(member.member_id)
        if old is not None:
            self._track_tasks(old, add=False)
        self.members[member.member_id] = member
        self._track_tasks(member, add=True)
        self.maybe_update_group_state()

    def remove_member(self, member_id: str) -> StreamsGroupMember | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._track_tasks(member, add=False)
            self.target_assignment.pop(member_id, None)
            if self.shutdown_request_member_id == member_id:
                self.shutdown_request_member_id = None
            self.maybe_update_group_state()
        return member

    def _track_tasks(self, member: StreamsGroupMember, add: bool) -> None:
        process = member.process_id
        for tuple_ in (member.assigned_tasks, member.tasks_pending_revocation):
            for task in task_ids(tuple_.active):
                if add:
                    self.active_task_process[task] = process
                elif self.active_task_process.get(task) == process:
                    del self.active_task_process[task]
            for kind, table in (
                (tuple_.standby, self.standby_task_processes),
                (tuple_.warmup, self.warmup_task_processes),
            ):
                for task in task_ids(kind):
                    holders = table.setdefault(task, set())
                    if add:
                        holders.add(process)
                    else:
                        holders.discard(process)
                        if not holders:
                            del table[task]

    # Kafka's current*TaskProcessId(s), as the reconciliation asks them.
    def current_active_task_process_id(self, subtopology_id: str, partition: int) -> str | None:
        return self.active_task_process.get((subtopology_id, partition))

    def current_standby_task_process_ids(self, subtopology_id: str, partition: int) -> set[str]:
        return self.standby_task_processes.get((subtopology_id, partition), set())

    def current_warmup_task_process_ids(self, subtopology_id: str, partition: int) -> set[str]:
        return self.warmup_task_processes.get((subtopology_id, partition), set())

    # ------------------------------------------------------------------ state
    def set_target_assignment(self, epoch: int, assignment: Mapping[str, TasksTuple]) -> None:
        self.assignment_epoch = epoch
        self.target_assignment = dict(assignment)
        self.maybe_update_group_state()

    def target_assignment_of(self, member_id: str) -> TasksTuple:
        return self.target_assignment.get(member_id, EMPTY)

    def set_group_epoch(self, epoch: int) -> None:
        self.group_epoch = epoch
        self.maybe_update_group_state()

    def set_configured_topology(self, configured: ConfiguredTopology | None) -> None:
        self.configured_topology = configured
        self.maybe_update_group_state()

    def maybe_update_group_state(self) -> None:
        configured = self.configured_topology
        if not self.members:
            state = StreamsGroupState.EMPTY
        elif self.topology is None or configured is None or not configured.is_ready:
            state = StreamsGroupState.NOT_READY
        elif self.group_epoch > self.assignment_epoch:
            state = StreamsGroupState.ASSIGNING
        elif any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            state = StreamsGroupState.RECONCILING
        else:
            state = StreamsGroupState.STABLE
        self.state = state
