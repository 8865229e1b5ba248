"""Kafka's server-side ``RangeAssignor`` (``range``): contiguous ranges per topic.

For each topic, its subscribers in member-id order get contiguous ranges of its
partitions: ``n // m`` each, and the first ``n % m`` one more. Members subscribed to
topics of the same partition count get the same partition numbers of each (what
co-partitioned joins rely on).

Where this differs from Kafka: Kafka's server-side range assignor is sticky (a member
keeps partitions of its current target within its quota) and rack-aware; this one
recomputes the ranges from the member order every time.
"""

from __future__ import annotations

import uuid

from broker.group.consumer.consumer_group_member import Assignment
from broker.group.consumer.partition_assignor import GroupSpec, partitions_by_topic


class RangeAssignor:
    name = "range"

    def assign(self, group_spec: GroupSpec) -> dict[str, Assignment]:
        owned: dict[str, set[tuple[uuid.UUID, int]]] = {m: set() for m in group_spec.members}
        for topic_id, topic in sorted(group_spec.topics.items(), key=lambda kv: kv[1].name):
            subscribers = sorted(
                m for m, spec in group_spec.members.items() if topic_id in spec.subscribed_topic_ids
            )
            if not subscribers:
                continue
            quota, extra = divmod(topic.num_partitions, len(subscribers))
            start = 0
            for index, member_id in enumerate(subscribers):
                count = quota + (1 if index < extra else 0)
                owned[member_id].update((topic_id, p) for p in range(start, start + count))
                start += count
        return partitions_by_topic(owned)
