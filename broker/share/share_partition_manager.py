"""SharePartitionManager: what ShareFetch and ShareAcknowledge call on a partition's leader.

Kafka's SharePartitionManager: it owns the share partitions this broker leads (one
``SharePartition`` per group and partition, made on the first fetch), the share session
cache, and the ShareFetch purgatory's operations.

- ``new_context`` applies a request's session epoch (``share_session.py`` has the rules)
  and says which partitions a fetch reads: a full request's, or all of the session's.
- ``acknowledge`` hands a partition's acknowledgement batches to its share partition.
- ``fetch_messages`` acquires what it can now; with nothing acquired and a max wait it
  parks a ``DelayedShareFetch`` (watched on the group's and the partition's keys) that a
  log append, a high-watermark move, a release or a lock expiry completes.
- ``close_session`` (epoch -1, or a member fenced by the group coordinator) releases
  every record the member holds, so that the other members get them at once.

A new share partition without durable state starts at the group's
``share.auto.offset.reset`` (see below). Reads are read_uncommitted below the high
watermark — or, for a group whose ``share.isolation.level`` is read_committed, below the
last stable offset, with the aborted transactions the read overlaps: their batches are
archived, never delivered (Kafka's ``ShareFetchUtils``/``SharePartition`` filter). The
records returned are the whole batches the acquired offsets are in, cut after the last
acquired offset's batch (the client keeps only the acquired offsets). Control batches
(transaction markers) are skipped: their offsets are never acquired. A fetch acquires
whole batches past its MaxRecords unless its ShareAcquireMode (v2) is record_limit
(KIP-1206).

Each share partition runs with its group's GROUP configs (``partition_config``):
``share.record.lock.duration.ms``, ``share.delivery.count.limit`` and
``share.partition.max.record.locks`` (KIP-1240), else the broker's ``group.share.*``;
RENEW acknowledgements need ``share.renew.acknowledge.enable`` (KIP-1222).

With a persister (``persister.py``), a new share partition is made initialising and
reads its durable state from the share coordinator (Kafka's ``maybeInitialize``):
fetches wait for it in the ShareFetch purgatory and are woken once it is read; an
uninitialised state (start offset -1) starts where the group's
``share.auto.offset.reset`` says (a GROUP config: ``latest``, the high watermark, by
default; ``earliest``; ``by_duration:``). Each change of durable state is written
through the persister (``pending_writes`` counts those not answered yet). A share
partition is dropped when its leadership moves away, and made again (and read again)
when it comes back with a new leader epoch; it is dropped with its topic (a metadata
listener), and one made for a topic id the name no longer has is made again: a topic
recreated under the name starts fresh (Kafka keys share partitions by topic id; the
share coordinator deletes the old topic's durable state).

Differences from Kafka: a share partition whose read fails is dropped (the next fetch
makes it again) rather than kept FAILED; ``BatchSize`` is accepted and not used (one
acquisition lock per run of offsets acquired together).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import ClusterMetadata, TopicInfo
from broker.group.group_configs import (
    SHARE_DELIVERY_COUNT_LIMIT,
    SHARE_PARTITION_MAX_RECORD_LOCKS,
    SHARE_RECORD_LOCK_DURATION_MS,
    duration_ms,
)
from broker.log.transaction_index import AbortedTxn
from broker.replica.partition import Partition
from broker.replica.replica_manager import ReplicaManager
from broker.server.purgatories import ParkedRequest, PurgatoryName
from broker.share.delayed_share_fetch import (
    DelayedShareFetch,
    ShareFetchParams,
    ShareFetchPartition,
    TopicPartition,
    group_key,
)
from broker.share.dlq.dlq_manager import ShareGroupDLQManager
from broker.share.dlq.dlq_records import DLQRecordParameter
from broker.share.persister import StatePersister
from broker.share.share_partition import (
    ABORTED,
    CONTROL,
    DATA,
    AcknowledgementBatch,
    AcquiredRecords,
    SharePartition,
    SharePartitionConfig,
    StateWrite,
    WriteDone,
)
from broker.share.share_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    SessionPartitions,
    ShareSessionCache,
    ShareSessionKey,
    next_epoch,
)
from broker.share_coordinator.share_state_records import (
    PersisterStateBatch,
    ShareGroupOffset,
    SharePartitionKey,
)
from protocol.record_batch import iter_batches
from purgatory import Clock, DelayedOperationPurgatory, SystemTimer

log = logging.getLogger("broker.share")

#: A state write refused with these drops the share partition (Kafka maps FENCED_LEADER_EPOCH
#: to NotLeaderOrFollowerException; both fence the share partition there).
_FENCED = (ErrorCode.fenced_state_epoch, ErrorCode.fenced_leader_epoch)

#: What a client is told of a state write the share coordinator refused (Kafka's
#: SharePartition.fetchPersisterError); anything else is UNKNOWN_SERVER_ERROR.
_PERSISTER_ERRORS = {
    ErrorCode.none: ErrorCode.none,
    ErrorCode.not_coordinator: ErrorCode.coordinator_not_available,
    ErrorCode.coordinator_not_available: ErrorCode.coordinator_not_available,
    ErrorCode.coordinator_load_in_progress: ErrorCode.coordinator_not_available,
    ErrorCode.group_id_not_found: ErrorCode.group_id_not_found,
    ErrorCode.unknown_topic_or_partition: ErrorCode.unknown_topic_or_partition,
    ErrorCode.fenced_state_epoch: ErrorCode.fenced_state_epoch,
    ErrorCode.fenced_leader_epoch: ErrorCode.not_leader_or_follower,
}


def persister_error(error: ErrorCode) -> ErrorCode:
    """The error an acknowledgement's answer carries for its state write's ``error``."""
    return _PERSISTER_ERRORS.get(error, ErrorCode.unknown_server_error)


@dataclass(slots=True)
class SharePartitionResult:
    error: ErrorCode = ErrorCode.none
    error_message: str | None = None
    records: bytes = b""
    acquired: list[AcquiredRecords] = field(default_factory=list)
    leader_id: int = -1
    leader_epoch: int = -1


ShareFetchResults = dict[ShareFetchPartition, SharePartitionResult]


class ShareGroupSettings(Protocol):
    """What the manager reads of a group's GROUP configs (``GroupConfigManager``, the
    one implementation; a Protocol so that the group configs need not know this
    package)."""

    def overrides(self, group_id: str) -> Mapping[str, str]: ...

    def value(self, group_id: str, name: str) -> int: ...

    def share_auto_offset_reset(self, group_id: str) -> str: ...

    def share_read_committed(self, group_id: str) -> bool: ...

    def share_renew_acknowledge_enable(self, group_id: str) -> bool: ...


ShareKey = tuple[str, str, int]  # (group id, topic, partition)


class SharePartitionManager:
    """The share partitions, sessions and delayed share fetches of one broker."""

    def __init__(
        self,
        config: SharePartitionConfig,
        clock: Clock,
        metadata: ClusterMetadata,
        replica_manager: ReplicaManager,
        share_fetch_purgatory: DelayedOperationPurgatory[DelayedShareFetch],
        lock_timer: SystemTimer,
        session_cache: ShareSessionCache,
        persister: StatePersister | None = None,
        group_configs: ShareGroupSettings | None = None,
        dead_letters: ShareGroupDLQManager | None = None,
    ) -> None:
        self.config = config  # the broker's: a group without GROUP configs uses it
        self._clock = clock
        self._metadata = metadata
        self._replica_manager = replica_manager
        self._purgatory = share_fetch_purgatory
        self.lock_timer = lock_timer
        self.session_cache = session_cache
        self.partitions: dict[ShareKey, SharePartition] = {}
        self._persister = persister
        self.persister = persister  # DescribeShareGroupOffsets reads through it too
        self._group_configs = group_configs
        self.dead_letters = dead_letters
        metadata.subscribe(self.topic_changed)
        # group -> (the overrides it was made from, its share partitions' config)
        self._configs: dict[str, tuple[object, SharePartitionConfig]] = {}
        self._leader_epochs: dict[ShareKey, int] = {}  # the epoch each was made at
        self._topic_ids: dict[ShareKey, uuid.UUID | None] = {}  # the topic each was made of
        self.pending_writes = 0
        # told when the write the acknowledgement being applied makes is answered
        self._write_waiter: Callable[[ErrorCode], None] | None = None

    # -- the group's settings (GROUP configs) ----------------------------------------

    def partition_config(self, group_id: str) -> SharePartitionConfig:
        """The group's share.record.lock.duration.ms, share.delivery.count.limit and
        share.partition.max.record.locks (its overrides, else the broker's); made again
        only when its overrides change (read on every fetch and acknowledgement)."""
        configs = self._group_configs
        if configs is None:
            return self.config
        overrides = configs.overrides(group_id)
        cached = self._configs.get(group_id)
        if cached is not None and cached[0] is overrides:
            return cached[1]
        config = SharePartitionConfig(
            record_lock_duration_ms=configs.value(group_id, SHARE_RECORD_LOCK_DURATION_MS),
            delivery_count_limit=configs.value(group_id, SHARE_DELIVERY_COUNT_LIMIT),
            max_record_locks=configs.value(group_id, SHARE_PARTITION_MAX_RECORD_LOCKS),
        )
        self._configs[group_id] = (overrides, config)
        return config

    def read_committed(self, group_id: str) -> bool:
        """The group's ``share.isolation.level`` is read_committed."""
        configs = self._group_configs
        return configs is not None and configs.share_read_committed(group_id)

    def _auto_offset_reset(self, group_id: str) -> str:
        configs = self._group_configs
        return "latest" if configs is None else configs.share_auto_offset_reset(group_id)

    # -- share partitions ---------------------------------------------------------------

    def topic_changed(self, name: str, topic: TopicInfo | None) -> None:
        """A metadata listener: a deleted topic's share partitions go with it (Kafka
        keys them by topic id: a topic recreated under the name is another topic, whose
        records start at delivery count 1)."""
        if topic is not None:
            return
        for group, topic_name, partition in [k for k in self.partitions if k[1] == name]:
            self._drop(group, (topic_name, partition))

    def share_partition(self, group_id: str, tp: TopicPartition) -> SharePartition | None:
        return self.partitions.get((group_id, tp[0], tp[1]))

    def _leader(self, tp: TopicPartition) -> tuple[Partition | None, ErrorCode]:
        partition = self._replica_manager.online_partition(tp)
        if partition is not None and partition.is_leader:
            return partition, ErrorCode.none
        if self._metadata.partition_state(*tp) is None:
            return None, ErrorCode.unknown_topic_or_partition
        return None, ErrorCode.not_leader_or_follower

    def _get_or_create(self, group_id: str, partition: Partition) -> SharePartition:
        key = (group_id, partition.topic, partition.partition)
        sp = self.partitions.get(key)
        if sp is not None and (
            self._leader_epochs.get(key) != partition.leader_epoch
            or self._topic_ids.get(key) != self._topic_id(partition.topic)
        ):
            # led again since, or another topic of the name: read the state again
            self._drop(group_id, partition.tp)
            sp = None
        if sp is None:
            sp = self._create(key, group_id, partition)
        elif sp.start_offset < partition.log_start_offset:
            sp.move_start_offset(partition.log_start_offset)
        sp.config = self.partition_config(group_id)
        return sp

    def _topic_id(self, topic: str) -> uuid.UUID | None:
        info = self._metadata.topics.get(topic)
        return None if info is None else info.topic_id

    def _create(self, key: ShareKey, group_id: str, partition: Partition) -> SharePartition:
        wake_key = group_key(group_id, partition.tp)
        topic = self._metadata.topics.get(partition.topic)
        persister = self._persister if topic is not None else None
        state_key = None
        if topic is not None:
            state_key = SharePartitionKey(group_id, topic.topic_id, partition.partition)
        leader_epoch = partition.leader_epoch
        on_write: StateWrite | None = None
        if persister is not None and state_key is not None:
            written = state_key

            def write(
                start: int, batches: tuple[PersisterStateBatch, ...], done: WriteDone | None
            ) -> None:
                self._write(key, written, leader_epoch, start, batches, done)

            on_write = write

        sp = SharePartition(
            group_id,
            partition.topic,
            partition.partition,
            partition.high_watermark,
            self.partition_config(group_id),
            self.lock_timer,
            on_available=lambda: self._wake(wake_key),
            initialized=on_write is None,
            on_write=on_write,
            dead_letters=self._dead_letter_port(key, topic),
        )
        self.partitions[key] = sp
        self._leader_epochs[key] = leader_epoch
        self._topic_ids[key] = None if topic is None else topic.topic_id
        if persister is None or state_key is None:
            return sp

        reading = [True]  # an answer while still here needs no wake-up: the caller checks

        def on_read(error: ErrorCode, state: ShareGroupOffset) -> None:
            self._initialize(key, sp, partition, error, state, wake=not reading[0])

        persister.read_state(state_key, leader_epoch, on_read)
        reading[0] = False
        return sp

    def _dead_letter_port(self, key: ShareKey, topic: TopicInfo | None) -> _DeadLetterPort | None:
        if self.dead_letters is None or topic is None:
            return None
        return _DeadLetterPort(self, self.dead_letters, key, topic.topic_id)

    def finish_archiving(self, key: ShareKey, sp: SharePartition, first: int, last: int) -> None:
        """A DLQ write ended: its run is archived, if ``sp`` is still the share partition
        of ``key`` (one dropped meanwhile left its run ARCHIVING in the durable state,
        for the next leader to write again)."""
        if self.partitions.get(key) is sp:
            sp.finish_archiving(first, last)

    def _initialize(
        self,
        key: ShareKey,
        sp: SharePartition,
        partition: Partition,
        error: ErrorCode,
        state: ShareGroupOffset,
        wake: bool,
    ) -> None:
        if self.partitions.get(key) is not sp:
            return  # dropped meanwhile
        if error is not ErrorCode.none:
            log.warning("Failed to initialize the share partition %s: %s", key, error.name)
            self._drop(key[0], (key[1], key[2]))
            return
        start = state.start_offset
        if start < 0:
            start = self._reset_offset(key[0], partition)
        start = max(start, partition.log_start_offset)
        sp.initialize(
            start, state.state_batches if state.start_offset >= 0 else (), state.state_epoch
        )
        if wake:
            self._wake(group_key(key[0], (key[1], key[2])))

    def _reset_offset(self, group_id: str, partition: Partition) -> int:
        """Where a share partition without durable state starts: the group's
        ``share.auto.offset.reset`` — the high watermark (latest), the log start
        (earliest), or the first record at or after now minus a duration."""
        strategy = self._auto_offset_reset(group_id)
        if strategy == "earliest":
            return partition.log_start_offset
        back_ms = duration_ms(strategy)
        if back_ms is not None:
            wall_ms = self._replica_manager.wall_clock_ms()
            found = partition.log.offset_for_timestamp(wall_ms - back_ms)
            if found is not None:
                return min(found[0], partition.high_watermark)
        return partition.high_watermark

    def _write(
        self,
        key: ShareKey,
        state_key: SharePartitionKey,
        leader_epoch: int,
        start: int,
        batches: tuple[PersisterStateBatch, ...],
        done: WriteDone | None,
    ) -> None:
        persister = self._persister
        sp = self.partitions.get(key)
        if persister is None or sp is None:
            return
        self.pending_writes += 1
        waiter, self._write_waiter = self._write_waiter, None

        def on_done(error: ErrorCode) -> None:
            self.pending_writes -= 1
            if error is not ErrorCode.none:
                log.warning("Failed to write the share state of %s: %s", state_key, error.name)
            if done is not None:
                done(error is ErrorCode.none)  # a refused acknowledgement is rolled back
            if error in _FENCED and self.partitions.get(key) is sp:
                # Kafka's handleFencedSharePartitionException: the state was re-initialised
                # elsewhere (AlterShareGroupOffsets) or a newer leader writes it; the next
                # fetch here makes the share partition again and reads the state afresh
                self._drop(key[0], (key[1], key[2]))
            if waiter is not None:
                waiter(persister_error(error))

        persister.write_state(state_key, sp.state_epoch, leader_epoch, start, batches, on_done)

    def _wake(self, key: object) -> None:
        self._purgatory.check_and_complete(key)

    def _drop(self, group_id: str, tp: TopicPartition) -> None:
        sp = self.partitions.pop((group_id, tp[0], tp[1]), None)
        self._leader_epochs.pop((group_id, tp[0], tp[1]), None)
        self._topic_ids.pop((group_id, tp[0], tp[1]), None)
        if sp is not None:
            sp.release_all_locks()

    # -- sessions -----------------------------------------------------------------------

    def new_context(
        self,
        key: ShareSessionKey,
        epoch: int,
        requested: SessionPartitions,
        forgotten: list[tuple[uuid.UUID, int]],
        acknowledge_only: bool = False,
        has_acknowledgements: bool = False,
        connection_id: str | None = None,
    ) -> tuple[ErrorCode, list[ShareFetchPartition]]:
        """Apply a request's share session epoch; the partitions its fetch reads. As
        Kafka: an initial request may not acknowledge (INVALID_REQUEST), and replaces
        the member's session without releasing its records (their locks run out)."""
        now = self._clock.now_ms()
        if epoch == INITIAL_EPOCH:
            if acknowledge_only:
                return ErrorCode.invalid_share_session_epoch, []
            if has_acknowledgements:
                return ErrorCode.invalid_request, []
            self.session_cache.remove(key)
            if self.session_cache.maybe_create(key, requested, now, connection_id) is None:
                return ErrorCode.share_session_limit_reached, []
            return ErrorCode.none, _fetch_partitions(requested)
        error, session = self.session_cache.check_epoch(key, epoch)
        if session is None:
            return error, []
        if epoch == FINAL_EPOCH:
            return ErrorCode.none, []
        session.epoch = next_epoch(session.epoch)
        session.last_used_ms = now
        if not acknowledge_only:
            session.partitions.update(requested)
            for gone in forgotten:
                session.partitions.pop(gone, None)
        return ErrorCode.none, _fetch_partitions(session.partitions)

    def close_session(self, key: ShareSessionKey) -> int:
        """Close a member's session and release what it holds; how many offsets."""
        self.session_cache.remove(key)
        return self.release_member(*key)

    def connection_closed(self, connection_id: str) -> int:
        """A client connection closed: the share sessions it opened end and their
        members' records are released (Kafka 4.1). How many offsets."""
        return sum(
            self.release_member(*key) for key in self.session_cache.remove_connection(connection_id)
        )

    def delete_group(self, group_id: str) -> None:
        """DeleteGroups of a share group: its share partitions here are dropped."""
        for group, topic, partition in [k for k in self.partitions if k[0] == group_id]:
            self._drop(group, (topic, partition))

    def reset_partitions(self, group_id: str, tps: list[TopicPartition]) -> int:
        """AlterShareGroupOffsets/DeleteShareGroupOffsets changed the durable state of
        these partitions: the group's in-memory share partitions of them here are dropped
        (an in-memory one is valid only at the state epoch it read), so that the next
        fetch reads the new state. How many were dropped."""
        dropped = [tp for tp in tps if (group_id, tp[0], tp[1]) in self.partitions]
        for tp in dropped:
            self._drop(group_id, tp)
        return len(dropped)

    def release_member(self, group_id: str, member_id: str) -> int:
        released = 0
        for (group, _topic, _partition), sp in list(self.partitions.items()):
            if group == group_id:
                released += sp.release_acquired_records(member_id)
        return released

    # -- acknowledge --------------------------------------------------------------------

    def acknowledge(
        self,
        group_id: str,
        member_id: str,
        tp: TopicPartition,
        batches: list[AcknowledgementBatch],
        allow_renew: bool = False,
        on_written: Callable[[ErrorCode], None] | None = None,
    ) -> tuple[ErrorCode, str | None]:
        """Apply the acknowledgements. ``on_written`` is called once: when the state
        write they made is answered (Kafka answers an acknowledgement once its state is
        durable), or at once when they made none."""
        result = self._acknowledge(group_id, member_id, tp, batches, allow_renew, on_written)
        if self._write_waiter is not None:  # no write was made
            self._write_waiter = None
            if on_written is not None:
                on_written(ErrorCode.none)
        return result

    def _acknowledge(
        self,
        group_id: str,
        member_id: str,
        tp: TopicPartition,
        batches: list[AcknowledgementBatch],
        allow_renew: bool,
        on_written: Callable[[ErrorCode], None] | None,
    ) -> tuple[ErrorCode, str | None]:
        partition, error = self._leader(tp)
        if partition is None:
            self._drop(group_id, tp)
            return error, None
        sp = self.share_partition(group_id, tp)
        if sp is None:
            return ErrorCode.invalid_record_state, "No records were acquired on this partition."
        self._write_waiter = on_written
        sp.config = self.partition_config(group_id)
        configs = self._group_configs
        renew_enabled = configs is None or configs.share_renew_acknowledge_enable(group_id)
        return sp.acknowledge(member_id, batches, allow_renew, renew_enabled)

    # -- fetch --------------------------------------------------------------------------

    def fetch_messages(
        self,
        params: ShareFetchParams,
        respond: Callable[[ShareFetchResults], None],
        parked_request: ParkedRequest | None,
    ) -> None:
        """Kafka's fetchMessages for a share fetch: acquire now, else park."""
        if params.max_wait_ms <= 0 or not params.partitions or self.can_complete(params):
            respond(self.acquire_all(params))
            return
        operation = DelayedShareFetch(
            params, self, lambda p: respond(self.acquire_all(p)), parked_request
        )
        keys: list[object] = []
        for fp in params.partitions:
            keys.append(group_key(params.group_id, fp.tp))
            keys.append(fp.tp)
        self._purgatory.try_complete_else_watch(operation, keys)
        if parked_request is not None and operation.watch_keys:
            parked_request.parked_in(PurgatoryName.SHARE_FETCH)

    def can_complete(self, params: ShareFetchParams) -> bool:
        """Whether one of the fetch's partitions has something to answer now."""
        for fp in params.partitions:
            partition, _error = self._leader(fp.tp)
            if partition is None:
                return True
            sp = self._get_or_create(params.group_id, partition)
            committed = self.read_committed(params.group_id)
            bound = partition.last_stable_offset if committed else partition.high_watermark
            if sp.can_acquire_records(bound):
                return True
        return False

    def acquire_all(self, params: ShareFetchParams) -> ShareFetchResults:
        results: ShareFetchResults = {}
        remaining_bytes = params.max_bytes
        remaining_records = params.max_records
        read_committed = self.read_committed(params.group_id)
        for fp in params.partitions:
            result = self._acquire_partition(
                params, fp.tp, remaining_bytes, remaining_records, read_committed
            )
            remaining_bytes -= len(result.records)
            remaining_records -= sum(a.last_offset - a.first_offset + 1 for a in result.acquired)
            results[fp] = result
        return results

    def _acquire_partition(
        self,
        params: ShareFetchParams,
        tp: TopicPartition,
        max_bytes: int,
        max_records: int,
        read_committed: bool,
    ) -> SharePartitionResult:
        group_id = params.group_id
        partition, error = self._leader(tp)
        if partition is None:
            self._drop(group_id, tp)
            return SharePartitionResult(error)
        result = SharePartitionResult(
            leader_id=partition.leader_id, leader_epoch=partition.leader_epoch
        )
        sp = self._get_or_create(group_id, partition)
        bound = partition.last_stable_offset if read_committed else partition.high_watermark
        if max_records <= 0 or not sp.can_acquire_records(bound):
            return result
        read = partition.read(
            sp.next_fetch_offset(),
            max(max_bytes, 0),
            up_to_log_end=False,
            read_committed=read_committed,
        )
        if read.error is not ErrorCode.none or not read.records:
            return result
        batches, ends = _fetched_batches(read.records, read.aborted_transactions)
        acquired = sp.acquire(params.member_id, batches, max_records, params.record_limit)
        if acquired:
            last_acquired = acquired[-1].last_offset
            cut = next(ends[i] for i, b in enumerate(batches) if b[1] >= last_acquired)
            result.records = bytes(read.records[:cut])
            result.acquired = acquired
        return result


class _DeadLetterPort:
    """A share partition's ``DeadLetters``: the broker's DLQ manager, with the partition's
    key and topic id, and its manager's ``finish_archiving`` when a write ends."""

    __slots__ = ("_dlq", "_key", "_manager", "_topic_id")

    def __init__(
        self,
        manager: SharePartitionManager,
        dlq: ShareGroupDLQManager,
        key: ShareKey,
        topic_id: uuid.UUID,
    ) -> None:
        self._manager = manager
        self._dlq = dlq
        self._key = key
        self._topic_id = topic_id

    def enabled(self, group_id: str) -> bool:
        return self._dlq.enabled(group_id)

    def enqueue(
        self, partition: SharePartition, first: int, last: int, delivery_count: int, cause: str
    ) -> None:
        group_id, topic, index = self._key
        param = DLQRecordParameter(
            group_id, topic, self._topic_id, index, first, last, delivery_count, cause
        )
        manager, key = self._manager, self._key
        self._dlq.enqueue(param, lambda: manager.finish_archiving(key, partition, first, last))


def _fetched_batches(
    records: bytes | memoryview, aborted: list[AbortedTxn] | None
) -> tuple[list[tuple[int, int, int]], list[int]]:
    """Each fetched batch's (base, last, kind) and end position in ``records``. With
    the aborted transactions of a read_committed read, a transactional batch of an
    aborted producer's transaction (first offset to marker) is ABORTED (Kafka's
    ``ShareFetchUtils``/``SharePartition`` filter them the same way)."""
    batches: list[tuple[int, int, int]] = []
    ends: list[int] = []
    for pos, header in iter_batches(records, allow_partial_tail=True):
        kind = DATA
        if header.is_control:
            kind = CONTROL
        elif aborted and header.is_transactional:
            pid, base = header.producer_id, header.base_offset
            if any(
                t.producer_id == pid and t.first_offset <= base <= t.last_offset for t in aborted
            ):
                kind = ABORTED
        batches.append((header.base_offset, header.last_offset, kind))
        ends.append(pos + header.size)
    return batches, ends


def _fetch_partitions(partitions: SessionPartitions) -> list[ShareFetchPartition]:
    return [
        ShareFetchPartition(topic_id, topic, partition)
        for (topic_id, partition), topic in partitions.items()
    ]
