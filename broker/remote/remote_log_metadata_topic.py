"""``__remote_log_metadata``: the internal topic that holds every remote segment's events.

Kafka's ``TopicBasedRemoteLogMetadataManager`` creates the topic at its first use
(``rlmm.config.remote.log.metadata.topic.num.partitions`` 50, ``.replication.factor`` 3,
``.retention.ms`` -1: never deleted, ``.min.isr`` 2, cleanup.policy delete), publishes
each event to the partition of its user partition with an acks=all producer
(``ProducerManager``) and reads it back with a consumer (``ConsumerManager``/
``ConsumerTask``) on every broker that hosts that user partition.

Here the topic is a real internal topic of the cluster -- replicated by the followers'
fetches, kept in the brokers' logs and data directories, shown in Metadata -- created
the same way (its replication factor capped by the live brokers, its min ISR by its
replication factor, as minikafka creates the other internal topics). An event is one
record (no key, the value ``remote_log_metadata_records``) appended through the replica
manager of the partition's leader with acks=all (``append``: ``on_done`` gets the
append's error once the in-sync replicas have it or the timeout passed), and read back
from the leader's log up to its high watermark (``read``): what a consumer of the
leader sees. Where we differ: the brokers share a process, so the append and the read
are calls into the leader's replica manager rather than Produce and Fetch requests on
the network (a network fault between two brokers does not stop them); a user
partition's events go to partition ``crc32("topic-partition") % partitions`` (Kafka:
murmur2 of the topic id and partition).
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Callable, Iterator, Mapping
from typing import Protocol

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import ClusterMetadata
from broker.log.cleaner_batch import iter_key_values
from broker.replica.append_origin import AppendOrigin
from broker.replica.delayed_produce import ProduceStatuses
from broker.replica.partition import Partition, TopicPartition
from protocol.record_batch import iter_batches
from protocol.record_builder import build_record_batch

log = logging.getLogger("broker.remote")

REMOTE_LOG_METADATA_TOPIC = "__remote_log_metadata"
#: How long an event's acks=all append may wait (Kafka's producer: delivery.timeout.ms).
APPEND_TIMEOUT_MS = 30000


class MetadataTopicReplicas(Protocol):
    """What the topic needs of a broker's replica manager."""

    partitions: dict[TopicPartition, Partition]

    def append_records(
        self,
        timeout_ms: int,
        required_acks: int,
        entries: dict[TopicPartition, bytes],
        respond: Callable[[ProduceStatuses], None],
        parked_request: None,
        origin: AppendOrigin = ...,
    ) -> None: ...


class RemoteLogMetadataTopic:
    """The topic's partitions: placement, creation, appends and reads at the leader."""

    def __init__(
        self,
        metadata: ClusterMetadata,
        replicas: Callable[[], Mapping[int, MetadataTopicReplicas]],
        wall_clock_ms: Callable[[], int],
        num_partitions: int = 50,
        replication_factor: int = 3,
        retention_ms: int = -1,
        min_isr: int = 2,
    ) -> None:
        self.metadata = metadata
        self._replicas = replicas
        self._wall_clock_ms = wall_clock_ms
        self.configured_partitions = num_partitions
        self.replication_factor = replication_factor
        self.retention_ms = retention_ms
        self.min_isr = min_isr

    @property
    def num_partitions(self) -> int:
        topic = self.metadata.topics.get(REMOTE_LOG_METADATA_TOPIC)
        return len(topic.partitions) if topic is not None else self.configured_partitions

    def partition_for(self, tp: TopicPartition) -> int:
        """The metadata partition that holds ``tp``'s events."""
        return zlib.crc32(f"{tp[0]}-{tp[1]}".encode()) % self.num_partitions

    def ensure_topic(self) -> None:
        """Create the topic at its first use (Kafka's RLMM at its start)."""
        if REMOTE_LOG_METADATA_TOPIC in self.metadata.topics:
            return
        alive = max(len(self.metadata.alive_brokers()), 1)
        replication = min(self.replication_factor, alive)
        self.metadata.create_topic(
            REMOTE_LOG_METADATA_TOPIC,
            self.configured_partitions,
            replication,
            {
                "cleanup.policy": "delete",
                "retention.ms": str(self.retention_ms),
                "min.insync.replicas": str(min(self.min_isr, replication)),
            },
        )

    # -- the producer's side ----------------------------------------------------------

    def append(self, partition: int, value: bytes, on_done: Callable[[ErrorCode], None]) -> None:
        """One event, acks=all, at the partition's leader; ``on_done(error)`` once."""
        self.ensure_topic()
        tp = (REMOTE_LOG_METADATA_TOPIC, partition)
        leader = self._leader_replicas(partition)
        if leader is None:
            on_done(ErrorCode.not_leader_or_follower)
            return
        batch = build_record_batch([(None, value, [])], timestamp_ms=self._wall_clock_ms())

        def respond(statuses: ProduceStatuses) -> None:
            on_done(statuses[tp].result.error)

        leader.append_records(
            APPEND_TIMEOUT_MS, -1, {tp: batch}, respond, None, AppendOrigin.CLIENT
        )

    # -- the consumer's side ----------------------------------------------------------

    def read(self, partition: int, from_offset: int) -> tuple[list[bytes], int]:
        """The event values of ``partition`` from ``from_offset`` up to the leader's high
        watermark, and the offset after them (``from_offset`` when nothing is there or no
        leader answers: the reader tries again at its next look)."""
        leader = self._leader_replicas(partition)
        if leader is None:
            return [], from_offset
        replica = leader.partitions.get((REMOTE_LOG_METADATA_TOPIC, partition))
        if replica is None or not replica.is_leader:
            return [], from_offset
        end = replica.high_watermark
        if end <= from_offset:
            return [], from_offset
        start = max(from_offset, replica.log_start_offset)
        values = [value for value in _values(replica, start, end) if value is not None]
        return values, end

    def _leader_replicas(self, partition: int) -> MetadataTopicReplicas | None:
        state = self.metadata.partition_state(REMOTE_LOG_METADATA_TOPIC, partition)
        if state is None or state.leader < 0:
            return None
        return self._replicas().get(state.leader)


def _values(replica: Partition, start: int, end: int) -> Iterator[bytes | None]:
    """Every record value of ``replica``'s log in [start, end) (whole batches)."""
    offset = start
    while offset < end:
        chunk = replica.log.read(offset, 1 << 20, max_offset=end)
        if not chunk:
            return
        for position, header in iter_batches(chunk, allow_partial_tail=True):
            offset = header.next_offset
            if header.is_control:
                continue
            batch = chunk[position : position + header.size]
            for _, value in iter_key_values(batch, header):
                yield value


__all__ = ["REMOTE_LOG_METADATA_TOPIC", "RemoteLogMetadataTopic"]
