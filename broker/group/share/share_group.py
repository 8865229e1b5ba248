"""A share group and its members, as Kafka's ShareGroup and ShareGroupMember.

KIP-848's epochs without its reconciliation: the group epoch moves on every change of
membership, subscriptions or subscribed topics' partitions; the target assignment is
recomputed (the simple assignor) when the group epoch is ahead of it; a member takes its
target assignment at once — a share group never revokes, since a partition may be read
by several members — and its member epoch becomes the assignment epoch.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from enum import StrEnum

Assignment = dict[uuid.UUID, frozenset[int]]


class ShareGroupState(StrEnum):
    """Kafka's ShareGroupState as ShareGroupDescribe and ListGroups print it."""

    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(slots=True)
class ShareGroupMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = -1
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    assignment: Assignment = field(default_factory=dict)


@dataclass(slots=True)
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareGroupMember] = field(default_factory=dict)
    target_assignment: dict[str, Assignment] = field(default_factory=dict)
    # (topic name, topic id, partition count) of every subscribed topic, when last
    # computed: a change bumps the group epoch (Kafka's subscription metadata).
    subscription_metadata: tuple[tuple[str, uuid.UUID, int], ...] = ()
    # every topic the group ever subscribed to (Kafka's initialised share partitions,
    # roughly): what DescribeShareGroupOffsets lists when asked for all topics
    subscribed_topics_seen: set[str] = field(default_factory=set)

    @property
    def state(self) -> ShareGroupState:
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    def subscribed_topic_names(self) -> frozenset[str]:
        return frozenset(t for m in self.members.values() for t in m.subscribed_topic_names)
