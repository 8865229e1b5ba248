"""Kafka's ``ConsumerGroup`` (KIP-848): members, epochs, the target assignment, state.

Three epochs, as in Kafka:

* the **group epoch**, bumped whenever what the assignor sees changes (a member joins,
  leaves or changes its subscription; a subscribed topic appears or grows);
* the **target assignment epoch**: the group epoch the current target assignment was
  computed at. The coordinator computes a new one when the group epoch is ahead;
* each **member epoch**: the target assignment epoch the member has reconciled to (see
  ``current_assignment_builder.py``).

``partition_epochs`` maps each partition some member holds (assigned, or still to be
revoked) to that member's epoch; a partition absent from it is free to be assigned.

State is derived, never set, as Kafka's ``maybeUpdateGroupState``: EMPTY without members,
ASSIGNING while the group epoch is ahead of the target assignment epoch, RECONCILING while
a member is not reconciled to the target, else STABLE.

Where this differs from Kafka: no timeline (snapshot registry) — nothing here is undone,
since the coordinator validates a request fully before it changes a group; no metrics.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from broker.group.consumer.consumer_group_member import Assignment, ConsumerGroupMember
from broker.group.member_epochs import unknown_member


class ConsumerGroupState(StrEnum):
    """Kafka's ``ConsumerGroupState`` (the names DescribeGroups and ListGroups print)."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    """A subscribed topic as the assignor sees it (Kafka's ``TopicMetadata``)."""

    topic_id: uuid.UUID
    name: str
    num_partitions: int


class ConsumerGroup:
    """One consumer group; see the module docstring."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0  # Kafka's targetAssignmentEpoch
        self.members: dict[str, ConsumerGroupMember] = {}
        self.static_members: dict[str, str] = {}  # instance id -> member id
        self.target_assignment: dict[str, Assignment] = {}
        self.partition_epochs: dict[tuple[uuid.UUID, int], int] = {}
        self.subscribed_topic_names: Counter[str] = Counter()
        self.subscription_metadata: dict[str, TopicMetadata] = {}
        # Regex subscriptions (regex_subscriptions.py): members per regex, each regex's
        # topics, and the topics image version they were resolved at.
        self.subscribed_regexes: Counter[str] = Counter()
        self.resolved_regexes: dict[str, frozenset[str]] = {}
        self.regexes_version = -1
        self.state = ConsumerGroupState.EMPTY

    # ---------------------------------------------------------------- members
    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    @property
    def num_members(self) -> int:
        return len(self.members)

    def get_member(self, member_id: str) -> ConsumerGroupMember:
        """The member; UNKNOWN_MEMBER_ID when there is none (Kafka's
        ``getOrMaybeCreateMember(memberId, false)``)."""
        member = self.members.get(member_id)
        if member is None:
            raise unknown_member(self.group_id, member_id)
        return member

    def static_member(self, instance_id: str) -> ConsumerGroupMember | None:
        member_id = self.static_members.get(instance_id)
        return self.members.get(member_id) if member_id is not None else None

    def update_member(self, member: ConsumerGroupMember) -> None:
        """Put ``member`` in place of the one with its id (or add it)."""
        old = self.members.get(member.member_id)
        if old is not None:
            self._remove_partition_epochs(old)
            self._count_subscriptions(old, -1)
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        self._count_subscriptions(member, +1)
        self._add_partition_epochs(member)
        self.maybe_update_group_state()

    def remove_member(self, member_id: str) -> ConsumerGroupMember | None:
        """Remove the member, its partition epochs and its target assignment."""
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self._remove_partition_epochs(member)
        self._count_subscriptions(member, -1)
        if (
            member.instance_id is not None
            and self.static_members.get(member.instance_id) == member_id
        ):
            del self.static_members[member.instance_id]
        self.target_assignment.pop(member_id, None)
        self.maybe_update_group_state()
        return member

    # -------------------------------------------------------------- partitions
    def current_partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        """The epoch of the member holding the partition; -1 when nobody does."""
        return self.partition_epochs.get((topic_id, partition), -1)

    def _add_partition_epochs(self, member: ConsumerGroupMember) -> None:
        for tp in member.owned_partitions():
            holder = self.partition_epochs.get(tp)
            if holder is not None:
                # Kafka throws IllegalStateException: reconciliation never hands out a
                # partition another member still holds.
                raise RuntimeError(
                    f"Cannot set the epoch of {tp} to {member.member_epoch} because the "
                    f"partition is still owned at epoch {holder}"
                )
            self.partition_epochs[tp] = member.member_epoch

    def _remove_partition_epochs(self, member: ConsumerGroupMember) -> None:
        for tp in member.owned_partitions():
            self.partition_epochs.pop(tp, None)

    # ----------------------------------------------------------- subscriptions
    def _count_subscriptions(self, member: ConsumerGroupMember, delta: int) -> None:
        for name in member.subscribed_topic_names:
            self.subscribed_topic_names[name] += delta
            if self.subscribed_topic_names[name] <= 0:
                del self.subscribed_topic_names[name]
        regex = member.subscribed_topic_regex
        if regex:
            self.subscribed_regexes[regex] += delta
            if self.subscribed_regexes[regex] <= 0:
                del self.subscribed_regexes[regex]

    def compute_subscribed_regexes(
        self, old: ConsumerGroupMember | None, new: ConsumerGroupMember | None
    ) -> set[str]:
        """The group's regexes were ``old`` replaced by ``new``."""
        regexes = Counter(self.subscribed_regexes)
        if old is not None and old.member_id in self.members and old.subscribed_topic_regex:
            regexes[old.subscribed_topic_regex] -= 1
        if new is not None and new.subscribed_topic_regex:
            regexes[new.subscribed_topic_regex] += 1
        return {regex for regex, count in regexes.items() if count > 0}

    def compute_subscribed_topic_names(
        self, old: ConsumerGroupMember | None, new: ConsumerGroupMember | None
    ) -> Counter[str]:
        """The group's subscribed topic counts were ``old`` replaced by ``new``."""
        names = Counter(self.subscribed_topic_names)
        if old is not None and old.member_id in self.members:
            names.subtract(old.subscribed_topic_names)
        if new is not None:
            names.update(new.subscribed_topic_names)
        return Counter({k: v for k, v in names.items() if v > 0})

    def preferred_server_assignor(self, default: str) -> str:
        """Kafka's ``computePreferredServerAssignor``: the assignor most members named,
        else the default (ties broken by name, for determinism)."""
        counts = Counter(
            m.server_assignor_name for m in self.members.values() if m.server_assignor_name
        )
        if not counts:
            return default
        return min(counts, key=lambda name: (-counts[name], name))

    # ------------------------------------------------------------------ state
    def set_target_assignment(self, epoch: int, assignment: Mapping[str, Assignment]) -> None:
        self.assignment_epoch = epoch
        self.target_assignment = dict(assignment)
        self.maybe_update_group_state()

    def target_assignment_of(self, member_id: str) -> Assignment:
        return self.target_assignment.get(member_id, {})

    def maybe_update_group_state(self) -> None:
        if not self.members:
            state = ConsumerGroupState.EMPTY
        elif self.group_epoch > self.assignment_epoch:
            state = ConsumerGroupState.ASSIGNING
        elif any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            state = ConsumerGroupState.RECONCILING
        else:
            state = ConsumerGroupState.STABLE
        self.state = state

    def set_group_epoch(self, epoch: int) -> None:
        self.group_epoch = epoch
        self.maybe_update_group_state()
