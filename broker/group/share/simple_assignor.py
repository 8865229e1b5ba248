"""Kafka's SimpleAssignor for share groups: several members may share a partition.

Kafka 4.2's rule, homogeneous or not, per topic: the partitions of a topic are spread
over the members subscribed to it. With at least as many partitions as members, each
partition goes to one member (round robin over the members in member-id order); with
more members than partitions, every member gets one partition and each partition is
shared by several (member i takes partition i mod P). Every subscribed member gets
something, and every partition has at least one member.

Differences from Kafka: Kafka's assignor is sticky across target assignments (it keeps
a member's partitions where the balance allows); this one is a pure function of the
members and partitions, sorted — deterministic, and for share groups stickiness costs
nothing to correctness since a partition may be read by any member.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

#: member id -> topic id -> partitions
MemberAssignments = dict[str, dict[uuid.UUID, frozenset[int]]]


def assign(
    subscriptions: Mapping[str, frozenset[uuid.UUID]], partition_counts: Mapping[uuid.UUID, int]
) -> MemberAssignments:
    """The target assignment of every member (an empty one for a member whose topics
    do not exist)."""
    result: MemberAssignments = {member: {} for member in subscriptions}
    by_topic: dict[uuid.UUID, list[str]] = {}
    for member in sorted(subscriptions):
        for topic_id in subscriptions[member]:
            by_topic.setdefault(topic_id, []).append(member)
    for topic_id in sorted(by_topic, key=str):
        count = partition_counts.get(topic_id, 0)
        members = by_topic[topic_id]
        if count <= 0:
            continue
        taken: dict[str, set[int]] = {m: set() for m in members}
        if count >= len(members):
            for p in range(count):
                taken[members[p % len(members)]].add(p)
        else:
            for i, member in enumerate(members):
                taken[member].add(i % count)
        for member, partitions in taken.items():
            result[member][topic_id] = frozenset(partitions)
    return result
