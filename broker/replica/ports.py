"""What the delayed operations read of the replica manager that parks them.

Kafka's DelayedProduce, DelayedFetch and DelayedDeleteRecords hold the ReplicaManager
and look their partitions up in it each time they are checked. Here a DelayedProduce
reads only :class:`OnlinePartitions`; DelayedFetch and DelayedDeleteRecords declare, in
their own modules, the little more they read on top of it (``FetchReplicas``,
``DeleteRecordsReplicas``). So the delayed operations need not import the manager that
imports them; ``ReplicaManager`` is the one implementation.
"""

from __future__ import annotations

from typing import Protocol

from broker.replica.partition import Partition, TopicPartition


class OnlinePartitions(Protocol):
    """The partitions this broker hosts (Kafka's ``getPartitionOrException``, without
    the exception: a missing partition is ``None``)."""

    def online_partition(self, tp: TopicPartition) -> Partition | None: ...
