"""RemoteLogManager: one broker's side of tiered storage (Kafka's RemoteLogManager).

Every ``remote.log.manager.task.interval.ms`` (Kafka's RLMTask, one job here for all
partitions) it goes over the hosted partitions of topics with ``remote.storage.enable``:

- every replica learns the tier's start from the metadata manager, so its log start
  (``Partition.log_start_offset``) covers what only the tier holds;
- a leader **copies** its rolled segments, oldest first, one at a time per partition
  (Kafka's RLMCopyTask): the next segment starts after the highest copied offset and must
  end below the last stable offset (which is at most the high watermark) and below the
  active segment. COPY_SEGMENT_STARTED published to ``__remote_log_metadata``, the
  storage manager's copy (its time is the storage model's), then COPY_SEGMENT_FINISHED;
  each step waits for the one before (a publish is acknowledged once the metadata
  partition's in-sync replicas have it, as Kafka's RLM waits on the RLMM's future), and
  the next segment follows at once. A publish that fails abandons the copy (what it left
  in COPY_SEGMENT_STARTED is deleted by a later expiration).
  The copy quota (``remote.log.manager.copy.max.bytes.per.second``) holds the copier; a
  copy that ends after its leader epoch was fenced is deleted, never FINISHED;
- a leader **expires** remote segments past the topic's total retention (retention.ms on
  their max timestamp, retention.bytes over remote + local bytes), oldest first
  (DELETE_SEGMENT_STARTED, delete, DELETE_SEGMENT_FINISHED), and deletes segments a
  dead copy left in COPY_SEGMENT_STARTED (a crash mid-copy: the copy is redone).

Local segments go by the log's own retention with local.retention.ms/.bytes, and only
below the highest copied offset (``local_deletion_bound``, read by the replica manager's
retention, as Kafka's UnifiedLog.deleteOldSegments) -- never what the tier lacks.

It also answers what reads need: ``remote_fetch_info`` turns a consumer's read below the
local log start into a remote read, ``process_remote_fetches`` parks a DelayedRemoteFetch,
``build_follower_state`` is Kafka's ReplicaFetcherTierStateMachine (tier_state.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import ClusterMetadata
from broker.config.broker_config import BrokerConfig
from broker.config.dynamic_config import broker_topic_defaults, dynamic_layers
from broker.ids import IdSource
from broker.log.transaction_index import AbortedTxn
from broker.remote.delayed_remote_fetch import DelayedRemoteFetch
from broker.remote.delayed_remote_list_offsets import (
    DelayedRemoteListOffsets,
    ListOffsetsPartitionStatus,
)
from broker.remote.remote_index_cache import RemoteIndexCache
from broker.remote.remote_log_config import RemoteTopicConfig
from broker.remote.remote_log_metadata_manager import RemoteLogMetadataManager
from broker.remote.remote_log_reader import (
    RemoteLogReader,
    RemoteLogReadResult,
    RemoteStorageFetchInfo,
)
from broker.remote.remote_log_reader_pool import PooledRead, RemoteLogReaderPool
from broker.remote.remote_log_segment_metadata import (
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
)
from broker.remote.remote_storage_manager import LogSegmentData, RemoteStorageManager
from broker.remote.rlm_quota import RLMQuotaManager
from broker.remote.segment_companions import (
    leader_epoch_checkpoint,
    offset_index,
    producer_snapshot,
    time_index,
)
from broker.remote.storage_model import RemoteOperation, RemoteStorageModel
from broker.replica.delayed_fetch import FetchParams, FetchPartitionStatus, FetchResults
from broker.replica.partition import Partition, ReadResult, TopicPartition
from broker.server.purgatories import ParkedRequest, PurgatoryName, PurgatorySet
from broker.server.scheduler import PeriodicTask
from protocol.record_batch import iter_batches
from purgatory import Clock

log = logging.getLogger("broker.remote")

STARTED = RemoteLogSegmentState.COPY_SEGMENT_STARTED
FINISHED = RemoteLogSegmentState.COPY_SEGMENT_FINISHED
DELETE_STARTED = RemoteLogSegmentState.DELETE_SEGMENT_STARTED
DELETE_FINISHED = RemoteLogSegmentState.DELETE_SEGMENT_FINISHED


class RemoteLogManager:
    """Kafka's RemoteLogManager for one broker, built whole by the composition root."""

    def __init__(
        self,
        broker_id: int,
        config: BrokerConfig,
        metadata: ClusterMetadata,
        clock: Clock,
        wall_clock_ms: Callable[[], int],
        purgatories: PurgatorySet,
        partitions: dict[TopicPartition, Partition],
        remote_metadata: RemoteLogMetadataManager,
        storage: RemoteStorageManager,
        model: RemoteStorageModel,
        ids: IdSource,
    ) -> None:
        self.broker_id = broker_id
        self.config = config
        self.metadata = metadata
        self.clock = clock
        self.wall_clock_ms = wall_clock_ms
        self.timer = purgatories.scheduler_timer
        self.remote_fetch_purgatory = purgatories.remote_fetch
        self.remote_list_offsets_purgatory = purgatories.remote_list_offsets
        self.partitions = partitions
        self.remote_metadata = remote_metadata
        self.storage = storage
        self.model = model
        self.ids = ids
        self.reader_pool = RemoteLogReaderPool(
            lambda: self._dynamic_int(
                "remote.log.reader.threads", config.remote_log_reader_threads
            ),
            config.remote_log_reader_max_pending_tasks,
        )
        self.index_cache = RemoteIndexCache(config.remote_log_index_file_cache_total_size_bytes)
        self.reader = RemoteLogReader(
            remote_metadata,
            storage,
            model,
            self.timer,
            self._record_fetch_bytes,
            self.reader_pool,
            self.index_cache,
        )
        self.copy_quota = RLMQuotaManager(
            clock, config.remote_log_manager_copy_max_bytes_per_second
        )
        self.fetch_quota = RLMQuotaManager(
            clock, config.remote_log_manager_fetch_max_bytes_per_second
        )
        self._task = PeriodicTask(
            self.timer,
            f"remote-log-manager-{broker_id}",
            config.remote_log_manager_task_interval_ms,
            self.run_tasks,
        )
        self._copying: set[TopicPartition] = set()
        self._deleting: set[str] = set()
        self._tiered: dict[str, RemoteTopicConfig] = {}
        self._tiered_version = -1
        # Kafka's RemoteCopyBytesPerSec, RemoteFetchBytesPerSec, RemoteFetchRequestsPerSec
        # (as totals), RemoteCopyLagBytes (now), and failed copies/fetches.
        self.copy_bytes = 0
        self.fetch_bytes = 0
        self.fetch_requests = 0
        self.copy_errors = 0
        self.copy_lag_bytes: dict[TopicPartition, int] = {}

    # -- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        self._task.start()

    async def stop(self) -> None:
        self._task.stop()

    # -- which topics are tiered ---------------------------------------------------------

    def remote_config(self, topic: str) -> RemoteTopicConfig | None:
        """The topic's tiered-storage configs when remote.storage.enable, else None."""
        if self.metadata.version != self._tiered_version:
            self._tiered.clear()
            defaults = broker_topic_defaults(self.config, self.metadata, self.broker_id)
            for name, info in self.metadata.topics.items():
                rc = RemoteTopicConfig.from_topic_configs({**defaults, **info.configs})
                if rc.remote_storage_enable:
                    self._tiered[name] = rc
            self._tiered_version = self.metadata.version
        return self._tiered.get(topic)

    def local_deletion_bound(self, tp: TopicPartition) -> int | None:
        """The offset local retention may not reach for a tiered partition: one past the
        highest copied offset (None: not tiered, the log's own rules alone)."""
        if self.remote_config(tp[0]) is None:
            return None
        return self.remote_metadata.highest_offset_for_epoch(tp) + 1

    def _dynamic_int(self, name: str, static: int) -> int:
        """A cluster-wide dynamic config (AlterConfigs), else the static value."""
        for layer in dynamic_layers(self.metadata, self.broker_id):
            if name in layer:
                return int(layer[name])
        return static

    # -- the periodic task ----------------------------------------------------------------

    def run_tasks(self) -> None:
        for tp, partition in list(self.partitions.items()):
            rc = self.remote_config(tp[0])
            if rc is None:
                continue
            self.refresh_log_start(partition)
            if partition.is_leader:
                if not rc.remote_log_copy_disable:
                    self.maybe_copy(partition)
                self.expire_remote(partition, rc)

    def refresh_log_start(self, partition: Partition) -> None:
        partition.remote_log_start_offset = self.remote_metadata.remote_log_start_offset(
            partition.tp
        )

    # -- copying -------------------------------------------------------------------------

    def maybe_copy(self, partition: Partition) -> bool:
        """Start copying the next rolled segment if there is one; True when started."""
        tp = partition.tp
        if tp in self._copying or not partition.is_leader:
            return False
        log_ = partition.log
        next_offset = max(
            self.remote_metadata.highest_offset_for_epoch(tp) + 1, log_.log_start_offset
        )
        bound = min(log_.active_segment_base_offset, partition.last_stable_offset)
        if next_offset >= bound:
            self.copy_lag_bytes.pop(tp, None)
            return False
        data = log_.read(next_offset, max(log_.config.segment_bytes, 1), max_offset=bound)
        batches = list(iter_batches(data, allow_partial_tail=True))
        if not batches:
            return False
        self.copy_lag_bytes[tp] = len(data)
        if self.copy_quota.is_quota_exceeded():
            return False
        end = batches[-1][1].last_offset
        segment = RemoteLogSegmentMetadata(
            segment_id=self.remote_metadata.new_segment_id(tp, self.ids.hex(32)),
            start_offset=next_offset,
            end_offset=end,
            max_timestamp_ms=max(h.max_timestamp for _, h in batches),
            broker_id=self.broker_id,
            event_timestamp_ms=self.wall_clock_ms(),
            segment_size_in_bytes=len(data),
            segment_leader_epochs={
                e.epoch: max(e.start_offset, next_offset)
                for e in partition.epoch_cache.entries
                if e.start_offset <= end
            },
        )
        companions = LogSegmentData(
            log_segment=bytes(data),
            offset_index=offset_index(next_offset, batches),
            time_index=time_index(next_offset, batches),
            leader_epoch_index=leader_epoch_checkpoint(partition.epoch_cache.entries, end),
            producer_snapshot=producer_snapshot(partition.producers.active_producers().values()),
            transaction_index=b"".join(
                t.encode()
                for t in partition.txn_index.entries()
                if next_offset <= t.last_offset <= end
            ),
        )
        self._copying.add(tp)
        epoch = partition.leader_epoch

        def started(error: ErrorCode) -> None:  # COPY_SEGMENT_STARTED is in the topic
            if error is not ErrorCode.none:
                self._copy_failed(segment, f"publishing its start failed: {error.name}")
                return
            self.model.submit(
                self.timer,
                RemoteOperation.COPY,
                companions.size,
                lambda: self.storage.copy_log_segment_data(segment, companions),
                copied,
            )

        def copied(_: object, error: Exception | None) -> None:
            if error is None and not self._still_leader(self.partitions.get(tp), epoch):
                log.info(
                    "broker %d: copy of %s finished after leader epoch %d was fenced; deleting it",
                    self.broker_id,
                    segment.segment_id,
                    epoch,
                )
                self._copying.discard(tp)
                self._delete_segment(segment)
                return
            if error is not None:
                self._copy_failed(segment, str(error))
                self._delete_segment(segment)
                return
            self.copy_quota.record(companions.size)
            self.copy_bytes += len(data)
            self._transition(segment, FINISHED, finished)

        def finished(error: ErrorCode) -> None:  # COPY_SEGMENT_FINISHED is in the topic
            self._copying.discard(tp)
            if error is not ErrorCode.none:  # left STARTED: expiration deletes it
                log.warning("broker %d: %s not finished: %s", self.broker_id, segment, error.name)
                return
            current = self.partitions.get(tp)
            if current is not None:
                self.refresh_log_start(current)
                self.maybe_copy(current)  # the next rolled segment, at once

        self.remote_metadata.add_remote_log_segment_metadata(segment, started)
        return True

    def _copy_failed(self, segment: RemoteLogSegmentMetadata, why: str) -> None:
        self._copying.discard(segment.segment_id.tp)
        self.copy_errors += 1
        log.warning(
            "broker %d: copying %s to the remote tier failed: %s",
            self.broker_id,
            segment.segment_id,
            why,
        )

    @staticmethod
    def _still_leader(partition: Partition | None, epoch: int) -> bool:
        """The copier is still the leader of the epoch it copied under. Kafka cancels a
        partition's RLMCopyTask when its broker stops leading it, and the new leader's
        expiration deletes what the cancelled copy left (a dangling COPY_SEGMENT_STARTED,
        or a segment outside its leader-epoch lineage); here the check is made where the
        copy would commit COPY_SEGMENT_FINISHED, so a fenced leader's late copy never
        becomes readable and is deleted at once (the new leader may hold other records
        at those offsets)."""
        return partition is not None and partition.is_leader and partition.leader_epoch == epoch

    def _transition(
        self,
        segment: RemoteLogSegmentMetadata,
        state: RemoteLogSegmentState,
        then: Callable[[ErrorCode], None],
    ) -> RemoteLogSegmentMetadata | None:
        """Publish ``segment``'s next state; ``then(error)`` once it is in the topic. None
        (and ``then`` told so) when the segment is gone or another broker moved it on."""
        current = self.remote_metadata.segment(segment.segment_id)
        updated = None
        if current is not None:
            try:
                updated = current.with_state(state, self.broker_id, self.wall_clock_ms())
            except ValueError:
                updated = None
        if updated is None:
            then(ErrorCode.invalid_request)
            return None
        self.remote_metadata.update_remote_log_segment_metadata(updated, then)
        return updated

    # -- expiration ----------------------------------------------------------------------

    def expire_remote(self, partition: Partition, rc: RemoteTopicConfig) -> int:
        """Delete remote segments past total retention, and copies a crash left half
        done; returns how many deletions started."""
        tp = partition.tp
        segments = list(self.remote_metadata.list_remote_log_segments(tp))
        doomed = [m for m in segments if m.state is STARTED and tp not in self._copying]
        copied = [m for m in segments if m.state is FINISHED]
        now = self.wall_clock_ms()
        total = sum(m.segment_size_in_bytes for m in copied) + partition.log.size_bytes
        for m in copied:
            by_time = rc.retention_ms >= 0 and now - m.max_timestamp_ms > rc.retention_ms
            by_size = (
                rc.retention_bytes >= 0 and total - m.segment_size_in_bytes >= rc.retention_bytes
            )
            if not (by_time or by_size):
                break
            total -= m.segment_size_in_bytes
            doomed.append(m)
        for m in doomed:
            self._delete_segment(m)
        return len(doomed)

    def _delete_segment(self, segment: RemoteLogSegmentMetadata) -> None:
        """DELETE_SEGMENT_STARTED in the topic, the store's delete, DELETE_SEGMENT_FINISHED
        (the partition's remote log start moves at the first)."""
        sid = segment.segment_id
        if sid.id in self._deleting:
            return
        self._deleting.add(sid.id)
        doomed: list[RemoteLogSegmentMetadata] = []

        def started(error: ErrorCode) -> None:
            if error is not ErrorCode.none:
                self._deleting.discard(sid.id)
                return
            partition = self.partitions.get(sid.tp)
            if partition is not None:
                self.refresh_log_start(partition)
            self.model.submit(
                self.timer,
                RemoteOperation.DELETE,
                0,
                lambda: self.storage.delete_log_segment_data(doomed[0]),
                deleted,
            )

        def deleted(_: object, error: Exception | None) -> None:
            self.index_cache.remove(sid.id)
            if error is not None:
                self._deleting.discard(sid.id)
                log.warning("broker %d: deleting %s failed: %s", self.broker_id, sid, error)
                return
            self._transition(doomed[0], DELETE_FINISHED, lambda _: self._deleting.discard(sid.id))

        current = self.remote_metadata.segment(sid)
        if current is None:
            self._deleting.discard(sid.id)
            return
        try:
            doomed.append(current.with_state(DELETE_STARTED, self.broker_id, self.wall_clock_ms()))
        except ValueError:
            self._deleting.discard(sid.id)
            return
        self.remote_metadata.update_remote_log_segment_metadata(doomed[0], started)

    # -- reads ---------------------------------------------------------------------------

    def _record_fetch_bytes(self, nbytes: int) -> None:
        self.fetch_bytes += nbytes
        self.fetch_quota.record(nbytes)

    def remote_fetch_info(
        self,
        result: ReadResult,
        status: FetchPartitionStatus,
        limit: int,
        min_one: bool,
        read_committed: bool = False,
    ) -> ReadResult:
        """A consumer's read below the local log start (Kafka's handleOffsetOutOfRangeError
        for tiered storage): no records now, and a remote read to do -- none when the
        fetch quota is exceeded or nothing may be read (then just no records)."""
        info = None
        if limit > 0 and not self.fetch_quota.is_quota_exceeded():
            info = RemoteStorageFetchInfo(
                limit, min_one, status.tp, status.fetch_offset, read_committed
            )
        return replace(result, error=ErrorCode.none, delayed_remote_storage_fetch=info)

    def process_remote_fetches(
        self,
        params: FetchParams,
        statuses: list[FetchPartitionStatus],
        results: FetchResults,
        respond: Callable[[FetchResults], None],
        parked_request: ParkedRequest | None,
    ) -> None:
        """Kafka's processRemoteFetches: start every remote read, park the fetch."""
        tasks: dict[TopicPartition, PooledRead | None] = {}
        outcomes: dict[TopicPartition, RemoteLogReadResult] = {}
        purgatory = self.remote_fetch_purgatory
        for status, result in results:
            info = result.delayed_remote_storage_fetch
            if not isinstance(info, RemoteStorageFetchInfo):
                continue
            outcome = RemoteLogReadResult()
            outcomes[status.tp] = outcome
            self.fetch_requests += 1

            def finished(
                read: RemoteLogReadResult,
                outcome: RemoteLogReadResult = outcome,
                tp: Any = status.tp,
            ) -> None:
                outcome.records, outcome.error, outcome.done = read.records, read.error, True
                outcome.aborted_transactions = self._with_local_aborted(tp, read)
                purgatory.check_and_complete(tp)

            tasks[status.tp] = self.reader.async_read(info, finished)
        wait_ms = self._dynamic_int(
            "remote.fetch.max.wait.ms", self.config.remote_fetch_max_wait_ms
        )
        operation = DelayedRemoteFetch(
            tasks, outcomes, wait_ms, statuses, results, self, respond, parked_request
        )
        purgatory.try_complete_else_watch(operation, tuple(outcomes))
        if parked_request is not None and operation.watch_keys:
            parked_request.parked_in(PurgatoryName.REMOTE_FETCH)

    def _with_local_aborted(
        self, tp: TopicPartition, read: RemoteLogReadResult
    ) -> list[AbortedTxn] | None:
        """A read_committed read's aborted transactions: the tier's, then -- when their
        search was not complete (Kafka's collectAbortedTransactions) -- the local log's
        index, where transactions whose markers are not yet copied are."""
        found = read.aborted_transactions
        if found is None or read.txn_search_complete:
            return found
        partition = self.partitions.get(tp)
        if partition is not None:
            local = partition.txn_index.collect_aborted_txns(read.fetch_offset, read.upper_bound)
            found = [*found, *(t for t in local if t not in found)]
        return found

    # -- ListOffsets -------------------------------------------------------------------------

    def latest_tiered_offset(self, tp: TopicPartition) -> int:
        """ListOffsets -5 (LATEST_TIERED): the highest offset the tier holds, -1 if none."""
        return self.remote_metadata.highest_offset_for_epoch(tp)

    def earliest_pending_upload_offset(self, partition: Partition) -> int:
        """ListOffsets -6 (KIP-1023, v11): the first offset not yet in the tier; -1 for a
        topic without ``remote.storage.enable`` (Kafka answers no offset there)."""
        if self.remote_config(partition.tp[0]) is None:
            return -1
        return max(
            self.remote_metadata.highest_offset_for_epoch(partition.tp) + 1,
            partition.log_start_offset,
        )

    def offset_for_timestamp(
        self,
        partition: Partition,
        timestamp: int,
        fetchable: int,
    ) -> ListOffsetsPartitionStatus | None:
        """A timestamp lookup on a tiered partition with remote segments that may hold it:
        the pending status, its remote search started (None: search the local log only).
        The caller parks it with ``park_list_offsets`` with the request's others."""
        tp = partition.tp
        if self.remote_config(tp[0]) is None or not any(
            m.max_timestamp_ms >= timestamp for m in self.remote_metadata.copied_segments(tp)
        ):
            return None
        status = ListOffsetsPartitionStatus(tp, done=False, leader_epoch=partition.leader_epoch)
        purgatory = self.remote_list_offsets_purgatory

        def found(result: tuple[int, int] | None, error: ErrorCode) -> None:
            status.error = error
            if result is None and error is ErrorCode.none:  # not in the tier: the local log
                result = partition.log.offset_for_timestamp(timestamp)
            if result is not None and result[0] < fetchable:
                status.offset, status.timestamp = result
            status.done = True
            purgatory.check_and_complete(tp)

        status.task = self.reader.async_find_offset_by_timestamp(
            tp, timestamp, partition.log_start_offset, found
        )
        return status

    def park_list_offsets(
        self,
        statuses: list[ListOffsetsPartitionStatus],
        timeout_ms: int,
        respond: Callable[[list[ListOffsetsPartitionStatus]], None],
        parked_request: ParkedRequest | None,
    ) -> None:
        """Kafka's DelayedRemoteListOffsets in the RemoteListOffsets purgatory."""
        delay = (
            timeout_ms
            if timeout_ms > 0
            else self._dynamic_int(
                "remote.list.offsets.request.timeout.ms",
                self.config.remote_list_offsets_request_timeout_ms,
            )
        )
        operation = DelayedRemoteListOffsets(delay, statuses, self, respond, parked_request)
        keys = tuple(s.tp for s in statuses if not s.done)
        self.remote_list_offsets_purgatory.try_complete_else_watch(operation, keys)
        if parked_request is not None and operation.watch_keys:
            parked_request.parked_in(PurgatoryName.REMOTE_LIST_OFFSETS)

    def online_partition(self, tp: TopicPartition) -> Partition | None:
        return self.partitions.get(tp)

    # -- sizes -----------------------------------------------------------------------------

    def remote_size_bytes(self, tp: TopicPartition) -> int:
        return self.remote_metadata.remote_size_bytes(tp)
