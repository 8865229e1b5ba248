"""Kafka's ``CurrentAssignmentBuilder``: one step of a member towards its target.

Revoke before assign: a partition leaves a member first (the member is asked to revoke
it and stays at its epoch, UNREVOKED_PARTITIONS, until a heartbeat no longer lists it as
owned), and is given to its next owner only once no member holds it any more (until then
the next owner waits in UNRELEASED_PARTITIONS at the new epoch). ``current_partition_epoch``
answers -1 for a partition nobody holds.

The transitions are Kafka's, state by state:

* STABLE at an older epoch, UNRELEASED_PARTITIONS: compute the next assignment.
* UNREVOKED_PARTITIONS: stay while the member still owns a partition it must revoke (or
  did not say what it owns); then compute the next assignment at epoch + 1.
* UNKNOWN: fence (FENCED_MEMBER_EPOCH) unless the member owns nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from kio.schema.errors import ErrorCode

from broker.group.consumer.consumer_group_member import (
    Assignment,
    ConsumerGroupMember,
    MemberState,
)
from broker.group.consumer.errors import ApiError

# The partitions a heartbeat says the member owns: ((topic_id, (partition, ...)), ...);
# None when the heartbeat left them out (unchanged).
OwnedTopicPartitions = Sequence[tuple[uuid.UUID, Sequence[int]]]


class CurrentAssignmentBuilder:
    """Build the member's next state from its target (Kafka's builder, as one call)."""

    def __init__(
        self,
        member: ConsumerGroupMember,
        target_assignment_epoch: int,
        target_assignment: Assignment,
        current_partition_epoch: Callable[[uuid.UUID, int], int],
        owned_topic_partitions: OwnedTopicPartitions | None,
    ) -> None:
        self.member = member
        self.target_assignment_epoch = target_assignment_epoch
        self.target_assignment = target_assignment
        self.current_partition_epoch = current_partition_epoch
        self.owned_topic_partitions = owned_topic_partitions

    def build(self) -> ConsumerGroupMember:
        member = self.member
        if member.state is MemberState.STABLE:
            if member.member_epoch != self.target_assignment_epoch:
                return self._compute_next_assignment(
                    member.member_epoch, member.assigned_partitions
                )
            return member
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            if self._owns_revoked_partitions(member.partitions_pending_revocation):
                return member
            return self._compute_next_assignment(
                member.member_epoch + 1, member.assigned_partitions
            )
        if member.state is MemberState.UNRELEASED_PARTITIONS:
            return self._compute_next_assignment(member.member_epoch, member.assigned_partitions)
        if self.owned_topic_partitions is None or len(self.owned_topic_partitions) > 0:
            raise ApiError(
                ErrorCode.fenced_member_epoch,
                "The consumer group member is in a unknown state. "
                "The member must abandon all its partitions and rejoin.",
            )
        return self._compute_next_assignment(
            self.target_assignment_epoch, member.assigned_partitions
        )

    def _owns_revoked_partitions(self, pending: Assignment) -> bool:
        """True when the member (still) owns one of ``pending``, or did not say."""
        if self.owned_topic_partitions is None:
            return True
        for topic_id, partitions in self.owned_topic_partitions:
            revoking = pending.get(topic_id, frozenset())
            if any(p in revoking for p in partitions):
                return True
        return False

    def _compute_next_assignment(
        self, member_epoch: int, assigned: Mapping[uuid.UUID, frozenset[int]]
    ) -> ConsumerGroupMember:
        has_unreleased = False
        new_assigned: dict[uuid.UUID, frozenset[int]] = {}
        new_revoking: dict[uuid.UUID, frozenset[int]] = {}
        new_pending_assignment: dict[uuid.UUID, frozenset[int]] = {}
        for topic_id in set(self.target_assignment) | set(assigned):
            target = self.target_assignment.get(topic_id, frozenset())
            current = assigned.get(topic_id, frozenset())
            kept = current & target
            revoking = current - kept
            pending = target - kept
            free = frozenset(p for p in pending if self.current_partition_epoch(topic_id, p) == -1)
            if free != pending:
                has_unreleased = True
            if kept:
                new_assigned[topic_id] = kept
            if revoking:
                new_revoking[topic_id] = revoking
            if free:
                new_pending_assignment[topic_id] = free

        member = self.member
        if new_revoking and self._owns_revoked_partitions(new_revoking):
            return replace(
                member,
                state=MemberState.UNREVOKED_PARTITIONS,
                previous_member_epoch=member.member_epoch,
                member_epoch=member_epoch,
                assigned_partitions=new_assigned,
                partitions_pending_revocation=new_revoking,
            )
        for topic_id, partitions in new_pending_assignment.items():
            new_assigned[topic_id] = new_assigned.get(topic_id, frozenset()) | partitions
        state = MemberState.UNRELEASED_PARTITIONS if has_unreleased else MemberState.STABLE
        return replace(
            member,
            state=state,
            previous_member_epoch=member.member_epoch,
            member_epoch=self.target_assignment_epoch,
            assigned_partitions=new_assigned,
            partitions_pending_revocation={},
        )
