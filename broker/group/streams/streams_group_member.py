"""Kafka's ``StreamsGroupMember`` and ``MemberState``: one streams group member.

A member is immutable and replaced whole (``dataclasses.replace`` for Kafka's
``Builder``), as ``ConsumerGroupMember``. Its metadata (client, process id, user
endpoint for interactive queries, client tags, topology epoch) is what the member sends;
its epochs, state and tasks are the coordinator's reconciliation
(``current_assignment_builder.py``). A member belongs to a process (``process_id``: one
Kafka Streams instance, which may run several members); the assignor balances processes
and never puts a standby on the process that runs the task's active.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import StrEnum

from broker.group.streams.tasks_tuple import EMPTY, TasksTuple

# Kafka's StreamsGroupHeartbeatRequest epochs.
JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class MemberState(StrEnum):
    """Kafka's streams ``MemberState``."""

    STABLE = "stable"
    UNREVOKED_TASKS = "unrevoked_tasks"  # asked to revoke tasks, not done yet
    UNRELEASED_TASKS = "unreleased_tasks"  # waits for tasks other members still hold
    UNKNOWN = "unknown"


# The int8 of StreamsGroupCurrentMemberAssignmentValue.State.
MEMBER_STATE_VALUES: Mapping[MemberState, int] = {
    MemberState.STABLE: 1,
    MemberState.UNREVOKED_TASKS: 2,
    MemberState.UNRELEASED_TASKS: 3,
    MemberState.UNKNOWN: 127,
}


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A member's user endpoint (host and port of its interactive queries)."""

    host: str
    port: int


@dataclass(frozen=True, slots=True)
class StreamsGroupMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    client_id: str = ""
    client_host: str = ""
    topology_epoch: int = -1
    process_id: str = ""
    user_endpoint: Endpoint | None = None
    client_tags: tuple[tuple[str, str], ...] = ()
    assigned_tasks: TasksTuple = EMPTY
    tasks_pending_revocation: TasksTuple = EMPTY

    def is_reconciled_to(self, target_assignment_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == target_assignment_epoch

    def with_epochs(self, member_epoch: int) -> StreamsGroupMember:
        """Kafka's ``updateMemberEpoch``: the previous epoch is the one it had."""
        return replace(self, member_epoch=member_epoch, previous_member_epoch=self.member_epoch)
