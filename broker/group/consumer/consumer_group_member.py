"""Kafka's ``ConsumerGroupMember`` and ``MemberState``: one KIP-848 member, immutable.

A member is replaced, never changed in place (Kafka's ``ConsumerGroupMember.Builder``
becomes ``dataclasses.replace``), so the coordinator can compare the member before and
after a heartbeat (``hasAssignedPartitionsChanged``) and the group can swap the old for
the new in one step (``ConsumerGroup.update_member``).

An assignment is ``{topic_id: frozenset(partitions)}``, keyed by topic id as on the wire.

A member that joined through JoinGroup (a classic member of a consumer group, Kafka's
online migration) carries ``classic_member_metadata``: its session timeout and the
protocols of its JoinGroup (``ClassicMemberMetadata``, written as the tag-0 field of its
ConsumerGroupMemberMetadata record). The subscribed regex is resolved by the group
(``regex_subscriptions.py``).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

Assignment = Mapping[uuid.UUID, frozenset[int]]

# Kafka's ConsumerGroupHeartbeatRequest epochs.
JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class MemberState(StrEnum):
    """Kafka's ``MemberState``: where a member is in its reconciliation."""

    STABLE = "stable"  # owns its target assignment (or all of it it may have yet)
    UNREVOKED_PARTITIONS = "unrevoked_partitions"  # asked to revoke, not done yet
    UNRELEASED_PARTITIONS = "unreleased_partitions"  # waits for others to release
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    """Kafka's ``ConsumerGroupMemberMetadataValue.ClassicMemberMetadata``: what a member
    using the classic protocol said in its JoinGroup (protocols in its order)."""

    session_timeout_ms: int
    supported_protocols: tuple[tuple[str, bytes], ...]

    @property
    def protocol_name(self) -> str:
        """The first protocol's name: the one Kafka answers in JoinGroup/SyncGroup."""
        return self.supported_protocols[0][0] if self.supported_protocols else ""


@dataclass(frozen=True, slots=True)
class ConsumerGroupMember:
    """A member as the coordinator knows it (Kafka's fields, snake_case)."""

    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor_name: str | None = None
    assigned_partitions: Assignment = field(default_factory=dict)
    partitions_pending_revocation: Assignment = field(default_factory=dict)
    classic_member_metadata: ClassicMemberMetadata | None = None

    @property
    def use_classic_protocol(self) -> bool:
        """Kafka's ``useClassicProtocol``: joined through JoinGroup."""
        return self.classic_member_metadata is not None

    def is_reconciled_to(self, target_assignment_epoch: int) -> bool:
        """Kafka's ``isReconciledTo``: stable at the target epoch."""
        return self.state is MemberState.STABLE and self.member_epoch == target_assignment_epoch

    @property
    def is_static(self) -> bool:
        return self.instance_id is not None

    def owned_partitions(self) -> list[tuple[uuid.UUID, int]]:
        """Every partition this member holds: assigned and pending revocation (both
        carry its epoch in the group's partition epochs)."""
        owned: list[tuple[uuid.UUID, int]] = []
        for assignment in (self.assigned_partitions, self.partitions_pending_revocation):
            for topic_id, partitions in assignment.items():
                owned.extend((topic_id, p) for p in partitions)
        return owned


def normalize(
    assignment: Mapping[uuid.UUID, frozenset[int] | set[int]],
) -> dict[uuid.UUID, frozenset[int]]:
    """An assignment without empty topics, as frozensets (so equal ones compare equal)."""
    return {t: frozenset(ps) for t, ps in assignment.items() if ps}
