"""The group coordinator as a broker component: its log, its load, its housekeeping.

The coordinator core (``coordinator.py``) does no IO. This component gives it what a
Kafka broker gives its GroupCoordinator:
- a ``GroupLog`` that appends commits and group metadata to the internal topic
  ``__consumer_offsets``, partition ``partition_for(group_id)``, through the replica
  manager with ``offsets.commit.required.acks`` (acks=all) and
  ``offsets.commit.timeout.ms``, as Kafka's ``appendForGroup`` does: the append waits
  in the Produce purgatory until the partition's in-sync replicas have it, so a commit
  is acknowledged only once it survives the loss of its leader;
- the load of those partitions when this broker leads them (at start, and when it
  becomes their leader after a failover);
- the periodic offset expiry (``offsets.retention.check.interval.ms``);
- the rule of who coordinates a group: the leader of the group's partition.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.cluster_metadata import OFFSETS_TOPIC, BrokerEndpoint, ClusterMetadata, TopicInfo
from broker.config import BrokerConfig
from broker.group.coordinator import GroupCoordinator
from broker.group.group_config import GroupConfig
from broker.group.group_log import AppendCallback, KeyValue
from broker.group.partition_hash import partition_for
from broker.replica.replica_manager import ReplicaManager
from broker.scheduler import PeriodicTask
from protocol.record_batch import build_record_batch, iter_batches, iter_records
from purgatory import Clock, DelayedOperationPurgatory, SystemTimer

if TYPE_CHECKING:
    from broker.replica.delayed_produce import ProduceStatuses

log = logging.getLogger("broker.group")

_LOAD_CHUNK_BYTES = 4 * 1024 * 1024


class OffsetsTopicLog:
    """``GroupLog`` writing to this broker's ``__consumer_offsets`` partitions."""

    def __init__(self, service: GroupCoordinatorService) -> None:
        self._service = service

    def append_to_log(
        self, group_id: str, records: list[KeyValue], on_done: AppendCallback | None = None
    ) -> None:
        service = self._service
        manager = service.replica_manager
        tp = (OFFSETS_TOPIC, service.partition_for(group_id))
        batch = build_record_batch(
            [(key, value, []) for key, value in records], timestamp_ms=service.clock.now_ms()
        )
        if on_done is None:
            # Tombstones: Kafka's cleanup writes them on the leader and waits for no one.
            result = manager.append_to_leader(tp, batch, required_acks=1)
            if result.error is not ErrorCode.none:
                log.warning("append to %s failed: %s", tp, result.error.name)
            return

        def respond(statuses: ProduceStatuses) -> None:
            on_done(statuses[tp].result.error)

        # No request context: the handler waiting on the coordinator accounts for the
        # time it spends parked (this append may serve a commit or a SyncGroup).
        config = service.config
        manager.append_records(
            config.offsets_commit_timeout_ms,
            config.offsets_commit_required_acks,
            {tp: batch},
            respond,
            None,
        )


class GroupCoordinatorService:
    def __init__(
        self,
        broker_id: int,
        config: BrokerConfig,
        clock: Clock,
        metadata: ClusterMetadata,
        replica_manager: ReplicaManager,
        heartbeat_purgatory: DelayedOperationPurgatory[Any],
        rebalance_purgatory: DelayedOperationPurgatory[Any],
        scheduler_timer: SystemTimer,
    ) -> None:
        self.broker_id = broker_id
        self.config = config
        self.clock = clock
        self.metadata = metadata
        self.replica_manager = replica_manager
        self.num_partitions = config.offsets_topic_num_partitions
        self.coordinator = GroupCoordinator(
            clock,
            heartbeat_purgatory,
            rebalance_purgatory,
            None,
            GroupConfig.from_broker_config(config),
            group_log=OffsetsTopicLog(self),
        )
        self._loaded: set[int] = set()
        self._offset_expiry = PeriodicTask(
            scheduler_timer,
            f"offset-expiry-{broker_id}",
            config.offsets_retention_check_interval_ms,
            self._expire_offsets,
        )

    # -- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        topic = self.metadata.topics.get(OFFSETS_TOPIC)
        if topic is not None:
            self.num_partitions = len(topic.partitions)
        self.metadata.subscribe(self._on_metadata_change)
        self._load_led_partitions()
        self._offset_expiry.start()

    async def stop(self) -> None:
        self.metadata.unsubscribe(self._on_metadata_change)
        self._offset_expiry.stop()

    def _expire_offsets(self) -> None:
        removed = self.coordinator.expire_offsets()
        if removed:
            log.info("expired %d committed offsets", removed)

    # -- coordinator placement ---------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def ensure_offsets_topic(self) -> TopicInfo:
        """Create ``__consumer_offsets`` on first use, as Kafka does."""
        cluster = self.metadata
        topic = cluster.topics.get(OFFSETS_TOPIC)
        if topic is None:
            config = self.config
            alive = max(len(cluster.alive_brokers()), 1)
            topic = cluster.create_topic(
                OFFSETS_TOPIC,
                config.offsets_topic_num_partitions,
                min(config.offsets_topic_replication_factor, alive),
                {"cleanup.policy": "compact"},
            )
        self.num_partitions = len(topic.partitions)
        return topic

    def coordinator_endpoint(self, group_id: str) -> tuple[ErrorCode, BrokerEndpoint | None]:
        topic = self.ensure_offsets_topic()
        state = topic.partitions[self.partition_for(group_id)]
        endpoint = self.metadata.brokers.get(state.leader)
        if endpoint is None or not endpoint.alive:
            return ErrorCode.coordinator_not_available, None
        return ErrorCode.none, endpoint

    def check_coordinator(self, group_id: str) -> ErrorCode:
        """NONE when this broker coordinates ``group_id``, else Kafka's error for it."""
        if not group_id:
            return ErrorCode.invalid_group_id
        topic = self.metadata.topics.get(OFFSETS_TOPIC)
        if topic is None:
            return ErrorCode.coordinator_not_available
        partition = self.partition_for(group_id)
        if topic.partitions[partition].leader != self.broker_id:
            return ErrorCode.not_coordinator
        if partition not in self._loaded:
            return ErrorCode.coordinator_load_in_progress
        return ErrorCode.none

    # -- loading -----------------------------------------------------------------------

    def _on_metadata_change(self, name: str, topic: TopicInfo | None) -> None:
        if name == OFFSETS_TOPIC:
            if topic is not None:
                self.num_partitions = len(topic.partitions)
            self._load_led_partitions()

    def _load_led_partitions(self) -> None:
        topic = self.metadata.topics.get(OFFSETS_TOPIC)
        if topic is None:
            return
        for state in topic.partitions:
            if state.leader == self.broker_id and state.partition not in self._loaded:
                self._load_partition(state.partition)
            elif state.leader != self.broker_id:
                self._loaded.discard(state.partition)

    def _load_partition(self, index: int) -> None:
        partition = self.replica_manager.online_partition((OFFSETS_TOPIC, index))
        if partition is None:
            return
        records: list[KeyValue] = []
        offset = partition.log_start_offset
        end = partition.log_end_offset
        while offset < end:
            chunk = partition.log.read(offset, _LOAD_CHUNK_BYTES, max_offset=end)
            if not chunk:
                break
            for _position, header in iter_batches(chunk, allow_partial_tail=True):
                offset = header.last_offset + 1
            for record in _records_of(chunk):
                if record[0] is not None:
                    records.append(record)
        if records:
            self.coordinator.load(records)
            log.info("loaded %d records of %s-%d", len(records), OFFSETS_TOPIC, index)
        self._loaded.add(index)


def _records_of(chunk: bytes) -> list[tuple[bytes, bytes | None]]:
    out: list[tuple[bytes, bytes | None]] = []
    view = memoryview(chunk)
    for position, header in iter_batches(chunk, allow_partial_tail=True):
        batch = view[position : position + header.size]
        for record in iter_records(batch):
            if record.key is not None:
                out.append((bytes(record.key), record.value))
    return out
