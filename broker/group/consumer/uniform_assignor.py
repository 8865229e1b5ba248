"""Kafka's ``UniformAssignor`` (server-side ``uniform``, the default): balanced and sticky.

Every subscribed partition goes to one of the members subscribed to its topic, so that
the members' partition counts differ by at most one where the subscriptions allow it,
and a member keeps as many of the partitions of its current target as balance allows.

How (one algorithm for homogeneous and heterogeneous subscriptions):

1. each member keeps its current partitions that still exist and it still subscribes to;
2. every other partition goes, in topic-name and partition order, to the subscribed
   member with the fewest partitions (ties: member id);
3. one partition at a time, from the heaviest member A holding a partition that a
   subscribed member B with at least two fewer partitions could take, to the lightest
   such B, until there is none.

Where this differs from Kafka: Kafka has two builders (an optimized one for homogeneous
subscriptions, a general one with a balancing pass over heterogeneous ones) and is
rack-aware; this one is not rack-aware, and with heterogeneous subscriptions step 3 only
moves a partition directly (no chains of moves), so in rare shapes Kafka balances
further. For homogeneous subscriptions the counts differ by at most one, as Kafka's.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from broker.group.consumer.consumer_group import TopicMetadata
from broker.group.consumer.consumer_group_member import Assignment
from broker.group.consumer.partition_assignor import GroupSpec, partitions_by_topic

TopicPartitionId = tuple[uuid.UUID, int]


class UniformAssignor:
    name = "uniform"

    def assign(self, group_spec: GroupSpec) -> dict[str, Assignment]:
        members = sorted(group_spec.members)
        topics = group_spec.topics
        owned: dict[str, set[TopicPartitionId]] = {m: set() for m in members}
        owner: dict[TopicPartitionId, str] = {}
        subscribers: dict[uuid.UUID, list[str]] = {}
        for member_id in members:
            for topic_id in group_spec.members[member_id].subscribed_topic_ids:
                if topic_id in topics:
                    subscribers.setdefault(topic_id, []).append(member_id)

        # 1. Sticky: keep what is still valid.
        for member_id in members:
            spec = group_spec.members[member_id]
            for topic_id, partitions in sorted(spec.assignment.items(), key=lambda kv: str(kv[0])):
                topic = topics.get(topic_id)
                if topic is None or topic_id not in spec.subscribed_topic_ids:
                    continue
                for p in sorted(partitions):
                    tp = (topic_id, p)
                    if p < topic.num_partitions and tp not in owner:
                        owner[tp] = member_id
                        owned[member_id].add(tp)

        # 2. The rest to the least loaded subscriber.
        ordered_topics = sorted(subscribers, key=lambda t: topics[t].name)
        for topic_id in ordered_topics:
            candidates = subscribers[topic_id]
            for p in range(topics[topic_id].num_partitions):
                tp = (topic_id, p)
                if tp in owner:
                    continue
                target = min(candidates, key=lambda m: (len(owned[m]), m))
                owner[tp] = target
                owned[target].add(tp)

        # 3. Balance, one partition at a time: from the heaviest member that has one a
        #    subscriber two or more lighter could take, to the lightest such subscriber.
        #    Each move lowers the sum of squared counts, so this ends; moving from the
        #    heaviest keeps the moves few (a newcomer takes one from each, not many from one).
        while True:
            move = self._next_move(members, owned, subscribers, topics)
            if move is None:
                break
            tp, source, target = move
            owned[source].discard(tp)
            owned[target].add(tp)
        return partitions_by_topic(owned)

    @staticmethod
    def _next_move(
        members: list[str],
        owned: dict[str, set[TopicPartitionId]],
        subscribers: dict[uuid.UUID, list[str]],
        topics: Mapping[uuid.UUID, TopicMetadata],
    ) -> tuple[TopicPartitionId, str, str] | None:
        for heavy in sorted(members, key=lambda m: (-len(owned[m]), m)):
            limit = len(owned[heavy]) - 2
            if limit < 0:
                return None  # every member at most one apart from the heaviest
            order = sorted(owned[heavy], key=lambda x: (topics[x[0]].name, x[1]), reverse=True)
            for tp in order:
                lighter = [m for m in subscribers[tp[0]] if len(owned[m]) <= limit]
                if lighter:
                    return tp, heavy, min(lighter, key=lambda m: (len(owned[m]), m))
        return None
