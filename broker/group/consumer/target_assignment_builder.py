"""Kafka's ``TargetAssignmentBuilder``: the group's next target assignment.

It builds the assignor's view of the group as it will be after the request being served
(the updated member in place of the old one, or a member removed), hands it to the
assignor and returns every member's target.

A member subscribed by regex is subscribed to the topics its regex resolved to
(``resolved_regexes``, the group's; see ``regex_subscriptions.py``).

Where this differs from Kafka: Kafka writes the target assignment's records as it builds
it; here the coordinator writes the group's changes afterwards (``consumer_group_writes.py``).
"""

from __future__ import annotations

from collections.abc import Mapping

from broker.group.consumer.consumer_group import ConsumerGroup, TopicMetadata
from broker.group.consumer.consumer_group_member import Assignment, ConsumerGroupMember
from broker.group.consumer.partition_assignor import (
    ConsumerGroupPartitionAssignor,
    GroupSpec,
    MemberSubscriptionAndAssignment,
)


class TargetAssignmentBuilder:
    def __init__(
        self,
        group: ConsumerGroup,
        assignor: ConsumerGroupPartitionAssignor,
        subscription_metadata: Mapping[str, TopicMetadata],
        resolved_regexes: Mapping[str, frozenset[str]] | None = None,
    ) -> None:
        self.group = group
        self.resolved_regexes = resolved_regexes or {}
        self.assignor = assignor
        self.subscription_metadata = subscription_metadata
        self._updated: dict[str, ConsumerGroupMember | None] = {}

    def add_or_update_member(self, member: ConsumerGroupMember) -> TargetAssignmentBuilder:
        self._updated[member.member_id] = member
        return self

    def remove_member(self, member_id: str) -> TargetAssignmentBuilder:
        self._updated[member_id] = None
        return self

    def _subscribed_names(self, member: ConsumerGroupMember) -> set[str]:
        """The member's topic names and the topics its regex resolved to."""
        names = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex:
            names |= self.resolved_regexes.get(member.subscribed_topic_regex, frozenset())
        return names

    def build(self) -> dict[str, Assignment]:
        members: dict[str, ConsumerGroupMember] = dict(self.group.members)
        for member_id, member in self._updated.items():
            if member is None:
                members.pop(member_id, None)
            else:
                members[member_id] = member
        topics = {t.topic_id: t for t in self.subscription_metadata.values()}
        ids_by_name = {t.name: t.topic_id for t in self.subscription_metadata.values()}
        spec = GroupSpec(
            members={
                member_id: MemberSubscriptionAndAssignment(
                    subscribed_topic_ids=frozenset(
                        ids_by_name[n] for n in self._subscribed_names(m) if n in ids_by_name
                    ),
                    assignment=self.group.target_assignment_of(member_id),
                    rack_id=m.rack_id,
                )
                for member_id, m in members.items()
            },
            topics=topics,
        )
        assignment = self.assignor.assign(spec)
        return {member_id: assignment.get(member_id, {}) for member_id in members}
