"""Kafka's server-side ``ConsumerGroupPartitionAssignor`` interface, reduced to data.

The assignor sees each member's subscription (topic ids), rack and current target
assignment (to be sticky), and each subscribed topic's partition count; it answers each
member's new target assignment. It is a pure function: no clock, no randomness, and
ties are broken by member id and topic name so that the same group always gets the same
assignment.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from broker.group.consumer.consumer_group import TopicMetadata
from broker.group.consumer.consumer_group_member import Assignment


@dataclass(frozen=True, slots=True)
class MemberSubscriptionAndAssignment:
    """Kafka's ``MemberSubscriptionAndAssignmentImpl``."""

    subscribed_topic_ids: frozenset[uuid.UUID]
    assignment: Assignment
    rack_id: str | None = None


@dataclass(frozen=True, slots=True)
class GroupSpec:
    """Kafka's ``GroupSpec`` with the ``SubscribedTopicDescriber`` beside it."""

    members: Mapping[str, MemberSubscriptionAndAssignment]
    topics: Mapping[uuid.UUID, TopicMetadata]


class ConsumerGroupPartitionAssignor(Protocol):
    @property
    def name(self) -> str: ...

    def assign(self, group_spec: GroupSpec) -> dict[str, Assignment]: ...


def partitions_by_topic(
    owned: Mapping[str, set[tuple[uuid.UUID, int]]],
) -> dict[str, Assignment]:
    """``{member: {(topic_id, partition)}}`` as ``{member: {topic_id: frozenset}}``."""
    result: dict[str, Assignment] = {}
    for member_id, tps in owned.items():
        by_topic: dict[uuid.UUID, set[int]] = {}
        for topic_id, partition in tps:
            by_topic.setdefault(topic_id, set()).add(partition)
        result[member_id] = {t: frozenset(ps) for t, ps in by_topic.items()}
    return result
