"""Kafka's share coordinator (ShareCoordinatorService over ShareCoordinatorShards).

Theory of operation. The durable state of every share partition — Kafka's
``ShareGroupOffset``: state epoch, leader epoch, start offset, state batches — lives in
the internal topic ``__share_group_state``, placed by FindCoordinator's SHARE key
``"group:topicId:partition"`` (Java's ``String.hashCode`` modulo the partitions, as for
groups and transactional ids). The leader of a ``__share_group_state`` partition is the
coordinator of its keys: it keeps their state in memory (one shard per partition) and
answers InitializeShareGroupState (83), ReadShareGroupState (84),
WriteShareGroupState (85), DeleteShareGroupState (86) and
ReadShareGroupStateSummary (87) from it.

- A write becomes one record, appended with acks=all: a ``ShareSnapshot`` for a key's
  first write or after ``share.coordinator.snapshot.update.records.per.snapshot``
  updates, else a ``ShareUpdate`` with just the batches written; the in-memory state
  folds it at once (so the next write builds on it) and the answer waits for the
  append. A write with a leader epoch older than the one recorded is
  FENCED_LEADER_EPOCH, an older state epoch FENCED_STATE_EPOCH.
- A read with a newer leader epoch records it (an update record), as Kafka's
  ``readStateAndMaybeUpdateLeaderEpoch``; an unknown key reads as uninitialised
  (start offset -1, state epoch 0), as Kafka 4.1.
- A deleted topic's share partitions lose their state (Kafka's ``onTopicsDeleted``):
  each coordinator writes tombstones for its keys of the topic id.
- On leadership of a partition its records are loaded in slices on the broker's
  ``LoadScheduler`` (COORDINATOR_LOAD_IN_PROGRESS meanwhile); keys of a partition not
  led here are NOT_COORDINATOR. That is what makes the state survive a failover: the
  new leader of the partition loads what the old one wrote.

Differences from Kafka: the in-memory state moves before the append is acknowledged
(Kafka's timeline keeps it uncommitted); a failed append answers its error and the
next leader's load decides. No pruning of the log below the snapshots (the topic is
compacted by key). Create/write timestamps are not kept.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import (
    SHARE_GROUP_STATE_TOPIC,
    BrokerEndpoint,
    ClusterMetadata,
    TopicInfo,
)
from broker.config.broker_config import BrokerConfig
from broker.coordinator.coordinator_loader import (
    ImmediateLoadScheduler,
    LoadJob,
    LoadScheduler,
    LoadSteps,
)
from broker.coordinator.coordinator_partitions import (
    LEADER_MOVED_ERRORS,
    PARTITION_UNAVAILABLE_ERRORS,
    CoordinatorPartitions,
)
from broker.replica.replica_manager import ReplicaManager
from broker.share_coordinator.share_state_records import (
    KeyValue,
    PersisterStateBatch,
    RecordFormatError,
    ShareGroupOffset,
    SharePartitionKey,
    ShareStateLog,
    ShareUpdate,
    apply_update,
    combine_state_batches,
    decode_key,
    decode_snapshot,
    decode_update,
    encode_key,
    encode_snapshot,
    encode_update,
    share_state_log,
    summary_of,
)
from purgatory import Clock

log = logging.getLogger("broker.share_coordinator")

E = ErrorCode
Answer = Callable[[ErrorCode, "str | None"], None]
UNINITIALIZED = ShareGroupOffset(0, 0, -1, -1, ())


@dataclass(frozen=True, slots=True)
class ShareCoordinatorConfig:
    num_partitions: int = 50
    replication_factor: int = 3
    min_isr: int = 2
    segment_bytes: int = 104857600
    snapshot_update_records_per_snapshot: int = 500

    @classmethod
    def from_broker_config(cls, config: BrokerConfig) -> ShareCoordinatorConfig:
        return cls(
            config.share_coordinator_state_topic_num_partitions,
            config.share_coordinator_state_topic_replication_factor,
            config.share_coordinator_state_topic_min_isr,
            config.share_coordinator_state_topic_segment_bytes,
            config.share_coordinator_snapshot_update_records_per_snapshot,
        )


def append_error(error: ErrorCode) -> ErrorCode:
    """The coordinator's answer for a failed append (the persister retries these)."""
    if error in PARTITION_UNAVAILABLE_ERRORS or error is E.request_timed_out:
        return E.coordinator_not_available
    if error in LEADER_MOVED_ERRORS:
        return E.not_coordinator
    return error


class ShareCoordinator:
    """The share-partition state of this broker's ``__share_group_state`` partitions."""

    def __init__(
        self,
        broker_id: int,
        config: ShareCoordinatorConfig,
        metadata: ClusterMetadata,
        state_log: ShareStateLog,
        load_scheduler: LoadScheduler | None = None,
    ) -> None:
        self.config = config
        self._metadata = metadata
        self._log = state_log
        self._load_scheduler = load_scheduler or ImmediateLoadScheduler()
        self.partitions = CoordinatorPartitions(
            SHARE_GROUP_STATE_TOPIC,
            broker_id,
            metadata,
            config.num_partitions,
            config.replication_factor,
            self._topic_configs,
        )
        self._shards: dict[int, dict[SharePartitionKey, ShareGroupOffset]] = {}
        self._updates: dict[SharePartitionKey, int] = {}  # updates since the snapshot
        self._loading: dict[int, int] = {}  # partition -> leader epoch being loaded
        self._loaded_epochs: dict[int, int] = {}  # partition -> leader epoch it was loaded at
        self._load_jobs: dict[int, LoadJob] = {}

    def _topic_configs(self, replication: int) -> dict[str, str]:
        return {
            "cleanup.policy": "compact",
            "min.insync.replicas": str(min(self.config.min_isr, replication)),
            "segment.bytes": str(self.config.segment_bytes),
        }

    # ============================================================== lifecycle
    async def start(self) -> None:
        self.startup()

    async def stop(self) -> None:
        self.shutdown()

    def startup(self) -> None:
        self.partitions.follow(self._follow_leadership)
        self._metadata.subscribe(self._on_topic_change)

    def shutdown(self) -> None:
        self.partitions.unfollow()
        self._metadata.unsubscribe(self._on_topic_change)
        for job in self._load_jobs.values():
            job.cancel()
        self._load_jobs.clear()
        self._shards.clear()
        self._loaded_epochs.clear()
        self._loading.clear()

    # ============================================================== placement
    def partition_for(self, key: SharePartitionKey) -> int:
        return self.partitions.partition_for(key.coordinator_key)

    def coordinator_endpoint(self, key: str) -> tuple[ErrorCode, BrokerEndpoint | None]:
        """FindCoordinator (key type 2): the leader of the key's partition, if alive."""
        return self.partitions.coordinator_endpoint(key)

    def _shard(
        self, key: SharePartitionKey
    ) -> tuple[ErrorCode, dict[SharePartitionKey, ShareGroupOffset] | None]:
        partition = self.partition_for(key)
        if partition in self._loading:
            return E.coordinator_load_in_progress, None
        shard = self._shards.get(partition)
        if shard is None:
            return E.not_coordinator, None
        return E.none, shard

    def _unknown_partition(self, key: SharePartitionKey) -> bool:
        topic = self._metadata.topic_by_id(key.topic_id)
        return topic is None or not 0 <= key.partition < len(topic.partitions)

    # ================================================================== reads
    def read_state(
        self, key: SharePartitionKey, leader_epoch: int
    ) -> tuple[ErrorCode, str | None, ShareGroupOffset]:
        """ReadShareGroupState: the key's state (uninitialised if none)."""
        error, shard = self._shard(key)
        if shard is None:
            return error, None, UNINITIALIZED
        if key.partition < 0 or self._unknown_partition(key):
            return E.unknown_topic_or_partition, None, UNINITIALIZED
        state = shard.get(key)
        if state is None:
            return E.none, None, UNINITIALIZED
        if state.leader_epoch > leader_epoch and leader_epoch != -1:
            return E.fenced_leader_epoch, None, UNINITIALIZED
        if leader_epoch > state.leader_epoch:
            self._append(key, shard, ShareUpdate(state.snapshot_epoch, leader_epoch, -1, ()), None)
        return E.none, None, shard[key]

    def read_state_summary(
        self, key: SharePartitionKey, leader_epoch: int
    ) -> tuple[ErrorCode, str | None, ShareGroupOffset]:
        """ReadShareGroupStateSummary: the state without its batches, with how many of
        its offsets past the start offset are done (``summary_of``)."""
        error, message, state = self.read_state(key, leader_epoch)
        return error, message, summary_of(state)

    # ================================================================= writes
    def write_state(
        self,
        key: SharePartitionKey,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: tuple[PersisterStateBatch, ...],
        answer: Answer,
    ) -> None:
        """WriteShareGroupState: the batches written over the key's state."""
        error, shard = self._shard(key)
        if shard is None:
            answer(error, None)
            return
        if key.partition < 0 or self._unknown_partition(key):
            answer(E.unknown_topic_or_partition, None)
            return
        if not all(map(_valid_batch, batches)):
            answer(E.invalid_request, "Invalid state batch.")
            return
        state = shard.get(key)
        if state is not None and state.leader_epoch > leader_epoch:
            answer(E.fenced_leader_epoch, "Request leader epoch smaller than last recorded.")
            return
        if state is not None and state.state_epoch > state_epoch:
            answer(E.fenced_state_epoch, "Request state epoch smaller than last recorded.")
            return
        if (
            state is None
            or self._updates.get(key, 0) >= self.config.snapshot_update_records_per_snapshot
        ):
            self._snapshot(
                key, shard, state, state_epoch, leader_epoch, start_offset, batches, answer
            )
            return
        update = ShareUpdate(state.snapshot_epoch, leader_epoch, start_offset, batches)
        self._append(key, shard, update, answer)

    def initialize_state(
        self, key: SharePartitionKey, state_epoch: int, start_offset: int, answer: Answer
    ) -> None:
        """InitializeShareGroupState: a new snapshot at ``start_offset``."""
        error, shard = self._shard(key)
        if shard is None:
            answer(error, None)
            return
        state = shard.get(key)
        if state is not None and state.state_epoch >= state_epoch:
            answer(E.fenced_state_epoch, "Initialize request state epoch not newer.")
            return
        self._snapshot(key, shard, None, state_epoch, -1, start_offset, (), answer)

    def delete_state(self, key: SharePartitionKey, answer: Answer) -> None:
        """DeleteShareGroupState: tombstones for both of the key's records."""
        error, shard = self._shard(key)
        if shard is None:
            answer(error, None)
            return
        shard.pop(key, None)
        self._updates.pop(key, None)
        records: list[KeyValue] = [
            (encode_key(key, update=False), None),
            (encode_key(key, update=True), None),
        ]
        self._log.append_to_log(self.partition_for(key), records, _answering(answer))

    def _on_topic_change(self, name: str, topic: TopicInfo | None) -> None:
        """Kafka's ``ShareCoordinatorService.onTopicsDeleted``: the state of a deleted
        topic's share partitions (keyed by its topic id) is deleted from the shards led
        here, tombstones written, so that a topic recreated under the name starts fresh."""
        if topic is not None or name == SHARE_GROUP_STATE_TOPIC:
            return
        for shard in self._shards.values():
            for key in [k for k in shard if self._metadata.topic_by_id(k.topic_id) is None]:
                log.info("Deleting the share state of %s: its topic %s was deleted", key, name)
                self.delete_state(key, _ignore)

    def _snapshot(
        self,
        key: SharePartitionKey,
        shard: dict[SharePartitionKey, ShareGroupOffset],
        state: ShareGroupOffset | None,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: tuple[PersisterStateBatch, ...],
        answer: Answer | None,
    ) -> None:
        if state is not None:
            state_epoch = state.state_epoch if state_epoch == -1 else state_epoch
            leader_epoch = state.leader_epoch if leader_epoch == -1 else leader_epoch
            start_offset = state.start_offset if start_offset == -1 else start_offset
        snapshot_epoch = 0 if state is None else (state.snapshot_epoch + 1) & 0xFFFF
        current = () if state is None else state.state_batches
        value = ShareGroupOffset(
            snapshot_epoch,
            state_epoch,
            leader_epoch,
            start_offset,
            combine_state_batches(current, batches, start_offset),
        )
        shard[key] = value
        self._updates[key] = 0
        record = (encode_key(key, update=False), encode_snapshot(value))
        self._log.append_to_log(self.partition_for(key), [record], _answering(answer))

    def _append(
        self,
        key: SharePartitionKey,
        shard: dict[SharePartitionKey, ShareGroupOffset],
        update: ShareUpdate,
        answer: Answer | None,
    ) -> None:
        shard[key] = apply_update(shard[key], update)
        self._updates[key] = self._updates.get(key, 0) + 1
        record = (encode_key(key, update=True), encode_update(update))
        self._log.append_to_log(self.partition_for(key), [record], _answering(answer))

    # ========================================================== load / unload
    @property
    def loading_partitions(self) -> frozenset[int]:
        return frozenset(self._loading)

    @property
    def owned_partitions(self) -> frozenset[int]:
        return frozenset(self._shards)

    def _follow_leadership(self) -> None:
        led = self.partitions.led_partitions()
        for partition in [p for p in {*self._shards, *self._loading} if p not in led]:
            self._unload(partition)
        for partition, epoch in sorted(led.items()):
            if self._loading.get(partition, -2) == epoch:
                self._load(partition, epoch)  # its replica may be online now
            elif self._loaded_epochs.get(partition) != epoch or partition in self._loading:
                self._unload(partition)
                self._loading[partition] = epoch
                self._load(partition, epoch)

    def _unload(self, partition: int) -> None:
        self._shards.pop(partition, None)
        self._loaded_epochs.pop(partition, None)
        self._loading.pop(partition, None)
        job = self._load_jobs.pop(partition, None)
        if job is not None:
            job.cancel()

    def _load(self, partition: int, epoch: int) -> None:
        if partition in self._load_jobs:
            return
        records = self._log.open_log(partition)
        if records is None:
            return  # no online replica yet: still loading
        job = LoadJob(
            f"{SHARE_GROUP_STATE_TOPIC}-{partition}", self._load_steps(partition, epoch, records)
        )
        self._load_jobs[partition] = job
        self._load_scheduler.schedule(job)

    def _load_steps(
        self, partition: int, epoch: int, batches: Iterator[list[KeyValue]]
    ) -> LoadSteps:
        shard: dict[SharePartitionKey, ShareGroupOffset] = {}
        updates: dict[SharePartitionKey, int] = {}
        count = 0
        for records in batches:
            for key_bytes, value in records:
                _replay(shard, updates, key_bytes, value)
            count += len(records)
            yield max(len(records), 1)
        job = self._load_jobs.pop(partition, None)
        if job is None or self._loading.get(partition) != epoch:
            return
        if not self.partitions.leads(partition, epoch):
            return
        del self._loading[partition]
        self._shards[partition] = shard
        self._loaded_epochs[partition] = epoch
        self._updates.update(updates)
        log.info(
            "Finished loading %d share state records from %s-%d at leader epoch %d",
            count,
            SHARE_GROUP_STATE_TOPIC,
            partition,
            epoch,
        )


def _valid_batch(batch: PersisterStateBatch) -> bool:
    """A batch a share partition could have written: offsets in order, a delivery state
    that is durable (AVAILABLE, ACKNOWLEDGED, ARCHIVING — Kafka 4.4's dead-letter queue
    write in progress — or ARCHIVED), a count that is not negative."""
    return (
        0 <= batch.first_offset <= batch.last_offset
        and batch.delivery_state in (0, 2, 3, 4)
        and batch.delivery_count >= 0
    )


def _replay(
    shard: dict[SharePartitionKey, ShareGroupOffset],
    updates: dict[SharePartitionKey, int],
    key_bytes: bytes,
    value: bytes | None,
) -> None:
    """One record of a load, as Kafka's ``ShareCoordinatorShard.replay``."""
    try:
        key, is_update = decode_key(key_bytes)
        if value is None:
            shard.pop(key, None)
            updates.pop(key, None)
        elif not is_update:
            shard[key] = decode_snapshot(value)
            updates[key] = 0
        elif key in shard:
            shard[key] = apply_update(shard[key], decode_update(value))
            updates[key] = updates.get(key, 0) + 1
    except RecordFormatError as exc:
        log.warning("Skipping a %s record that does not decode: %s", SHARE_GROUP_STATE_TOPIC, exc)


def _ignore(error: ErrorCode, message: str | None) -> None:
    if error is not ErrorCode.none:
        log.warning("Failed to delete a deleted topic's share state: %s", error.name)


def _answering(answer: Answer | None) -> Callable[[ErrorCode], None]:
    def on_done(error: ErrorCode) -> None:
        if error is not E.none:
            log.warning("A %s append failed: %s", SHARE_GROUP_STATE_TOPIC, error.name)
        if answer is not None:
            answer(append_error(error), None)

    return on_done


def build_share_coordinator(
    broker_id: int,
    config: BrokerConfig,
    metadata: ClusterMetadata,
    replica_manager: ReplicaManager,
    clock: Clock,
    load_scheduler: LoadScheduler,
) -> ShareCoordinator:
    """The broker's share coordinator over its ``__share_group_state`` replicas."""
    return ShareCoordinator(
        broker_id,
        ShareCoordinatorConfig.from_broker_config(config),
        metadata,
        share_state_log(
            replica_manager,
            clock,
            config.share_coordinator_write_timeout_ms,
            config.share_coordinator_load_buffer_size,
        ),
        load_scheduler,
    )
