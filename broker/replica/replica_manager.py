"""A broker's replicas: which partitions it hosts, in which role, and their logs.

It follows the shared ``ClusterMetadata``: when a topic appears, grows, disappears or a
leader moves, it creates, re-roles or removes its local partitions. It owns the Fetch
and Produce purgatories' keys — the partitions — and is the one place that calls
``check_and_complete`` after a state change: an append, a high-watermark move, a
follower's fetch, a leadership change.

Kafka's entry points keep their names: ``append_records`` (Kafka's appendRecords: the
leader's append, then a ``DelayedProduce`` in the Produce purgatory for acks=all, the
request's context told where it waits) and ``fetch_messages`` (fetchMessages: a read, else
a ``DelayedFetch`` on every partition read; a fetch with a replica id is a follower's and
first updates that follower's log end and log start, which moves the high watermark and the
ISR), ``delete_records`` (the leader's log start, then a ``DelayedDeleteRecords``) and
``alter_replica_log_dir`` (AlterReplicaLogDirs, through the ``LogManager``). The delayed
operations read it through the small ports of ``ports.py``. Its housekeeping runs as
``PeriodicTask``s on the scheduler timer: ISR expiration (``replica.lag.time.max.ms``; the
change is asked of the controller and comes back as metadata), log retention and producer-id
expiration. Replication quotas (``quota/replication_quota_manager.py``): an out-of-sync
follower of a throttled partition gets no records while the leader quota is exceeded
(``should_leader_throttle``, also asked by ``DelayedFetch``), and what is served of
throttled partitions is recorded; in-sync replicas are never throttled, as in Kafka.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from broker import buggify, real_clock
from broker.buggify import (
    FETCH_FEWER_BYTES,
    LEADER_STEP_DOWN_MID_APPEND,
    PRODUCE_RESPONSE_DELAYED,
    PURGATORY_COMPLETION_DELAYED,
)
from broker.cluster.cluster_metadata import ClusterMetadata, TopicInfo
from broker.cluster.controller import Controller
from broker.config.broker_config import BrokerConfig
from broker.config.dynamic_config import broker_topic_defaults
from broker.log import LogConfig, LogManager, PartitionLog
from broker.log.log_config import LONG_MAX
from broker.log.transaction_index import TransactionIndex
from broker.quota.replication_quota_manager import ReplicationQuotas
from broker.remote.remote_log_config import RemoteTopicConfig, local_log_config
from broker.replica.append_origin import AppendOrigin
from broker.replica.delayed_delete_records import (
    DelayedDeleteRecords,
    DeleteRecordsPartitionStatus,
    DeleteRecordsStatuses,
)
from broker.replica.delayed_fetch import (
    DelayedFetch,
    FetchParams,
    FetchPartitionStatus,
    FetchResults,
    all_at_log_end,
)
from broker.replica.delayed_produce import DelayedProduce, ProducePartitionStatus, ProduceStatuses
from broker.replica.partition import (
    AppendResult,
    FollowerState,
    Partition,
    ReadResult,
    TopicPartition,
)
from broker.replica.remote_log_port import RemoteLogPort
from broker.replica.replica_fetcher import ReplicaFetcherManager
from broker.server.purgatories import ParkedRequest, PurgatoryName, PurgatorySet
from broker.server.scheduler import PeriodicTask
from purgatory import Clock, DelayedOperationPurgatory

log = logging.getLogger("broker.replica")


class ReplicaManager:
    """Kafka's ReplicaManager for one broker, built whole by the composition root."""

    def __init__(
        self,
        broker_id: int,
        metadata: ClusterMetadata,
        config: BrokerConfig,
        clock: Clock,
        purgatories: PurgatorySet,
        logs: LogManager,
        controller: Controller,
        fetcher_manager: ReplicaFetcherManager,
        wall_clock_ms: Callable[[], int] = real_clock.wall_clock_ms,
        *,
        replication_quotas: ReplicationQuotas | None = None,
        remote_log_manager: RemoteLogPort | None = None,
    ) -> None:
        # It parks requests in the Produce, Fetch and DeleteRecords purgatories, wakes the
        # ShareFetch one, and runs its housekeeping on the scheduler timer.
        scheduler_timer = purgatories.scheduler_timer
        self.broker_id = broker_id
        # Kafka's quotas.leader (and, through the fetcher manager, quotas.follower).
        self.replication_quotas = replication_quotas
        self.metadata = metadata
        self.config = config
        self.clock = clock
        # min.insync.replicas by topic, valid while ``metadata.version`` is this.
        self._min_isr: dict[str, int] = {}
        self._min_isr_version = -1
        # Kafka's allPartitions: the table the fetcher manager was built over (it reads
        # it; this manager fills it).
        self.partitions = fetcher_manager.partitions
        # A restarted broker without a data dir gets its memory logs back (its "disk").
        self.log_manager = logs
        self.controller = controller
        self.fetcher_manager = fetcher_manager
        self._housekeeping = [
            # Kafka's isr-expiration task runs every replica.lag.time.max.ms / 2.
            PeriodicTask(
                scheduler_timer,
                f"isr-expiration-{broker_id}",
                config.replica_lag_time_max_ms / 2,
                self.maybe_shrink_isr,
            ),
            PeriodicTask(
                scheduler_timer,
                f"log-retention-{broker_id}",
                config.log_retention_check_interval_ms,
                self.apply_retention,
            ),
            PeriodicTask(
                scheduler_timer,
                f"producer-expiration-{broker_id}",
                config.producer_id_expiration_check_interval_ms,
                self.remove_expired_producers,
            ),
        ]
        if config.log_flush_scheduler_interval_ms < LONG_MAX:  # Kafka's kafka-log-flusher
            self._housekeeping.append(
                PeriodicTask(
                    scheduler_timer,
                    f"log-flusher-{broker_id}",
                    config.log_flush_scheduler_interval_ms,
                    lambda: logs.flush_dirty_logs(clock.now_ms()),
                )
            )
        # Kafka's IsrShrinksPerSec / IsrExpandsPerSec, as counts (for metrics).
        self.isr_shrinks = 0
        self.isr_expands = 0
        # acks=all produces that really waited in the Produce purgatory.
        self.delayed_produces = 0
        self.fetch_purgatory = purgatories.fetch
        self.produce_purgatory = purgatories.produce
        self.delete_records_purgatory = purgatories.delete_records
        # DelayedShareFetch (KIP-932) waits on the high watermark under the partition's
        # key too (Kafka's DelayedShareFetchPartitionKey).
        self.share_fetch_purgatory: DelayedOperationPurgatory[Any] | None = purgatories.share_fetch
        # Tiered storage (broker/remote/): None unless remote.log.storage.system.enable.
        self.remote_log_manager = remote_log_manager
        self.remote_fetch_purgatory = purgatories.remote_fetch
        self.remote_list_offsets_purgatory = purgatories.remote_list_offsets
        self._existing_logs: dict[TopicPartition, PartitionLog] = {}
        # Epoch milliseconds for LogAppendTime: the broker's ``Clock`` is the loop's
        # monotonic one, right for deadlines but not a date (Kafka: ``time.milliseconds()``).
        self.wall_clock_ms = wall_clock_ms

    # -- lifecycle (a broker component) ------------------------------------------------

    async def start(self) -> None:
        self._existing_logs = dict(self.log_manager.load_all())
        cluster = self.metadata
        cluster.subscribe(self._on_metadata_change)
        for name, topic in list(cluster.topics.items()):
            self._on_metadata_change(name, topic)
        # Logs on disk for topics that no longer exist are left alone (Kafka would delete
        # them once the controller confirms); they are closed here.
        for tp, stray in self._existing_logs.items():
            if tp not in self.partitions:
                stray.close()
        self._existing_logs = {}
        for job in self._housekeeping:
            job.start()
        if self.remote_log_manager is not None:
            await self.remote_log_manager.start()

    async def stop(self) -> None:
        self.metadata.unsubscribe(self._on_metadata_change)
        for job in self._housekeeping:
            job.stop()
        if self.remote_log_manager is not None:
            await self.remote_log_manager.stop()
        await self.fetcher_manager.stop()
        for partition in self.partitions.values():
            partition.log.close()
        self.partitions.clear()

    # -- metadata ----------------------------------------------------------------------

    def _topic_log_config(self, topic: TopicInfo) -> LogConfig:
        # The broker's topic defaults, dynamic broker configs included (KIP-226).
        configs = broker_topic_defaults(self.config, self.metadata, self.broker_id)
        configs.update(topic.configs)
        config = LogConfig.from_topic_configs(configs)
        if self.remote_log_manager is not None:  # tiered: the log keeps local.retention.*
            config = local_log_config(config, RemoteTopicConfig.from_topic_configs(configs))
        return config

    def _on_metadata_change(self, name: str, topic: TopicInfo | None) -> None:
        if topic is None:
            for tp in [tp for tp in self.partitions if tp[0] == name]:
                self._remove_partition(tp, delete=True)
            return
        now = self.clock.now_ms()
        for state in topic.partitions:
            tp = (name, state.partition)
            if self.broker_id not in state.replicas:
                if tp in self.partitions:
                    self._remove_partition(tp, delete=True)
                continue
            partition = self.partitions.get(tp)
            if partition is None:
                partition = self._create_partition(topic, state.partition)
            else:
                self._apply_topic_config(partition, topic)
            # KIP-966: with ELR on, the HW waits for min ISR (what makes the ELR safe).
            min_isr = self.min_insync_replicas(tp) if self.controller.elr_enabled else 0
            if partition.min_isr != min_isr:
                partition.min_isr = min_isr
                if partition.is_leader and partition.maybe_increment_high_watermark():
                    self.complete_delayed_requests(tp)
            if state.leader == self.broker_id:
                if not partition.is_leader or partition.leader_epoch != state.leader_epoch:
                    self.fetcher_manager.remove_partitions([tp])
                    partition.make_leader(state.leader_epoch, state.replicas, state.isr, now)
                    self.complete_delayed_requests(tp)
                elif partition.isr != state.isr or partition.replicas != state.replicas:
                    # An ISR change: a shrink may move the HW (and fail acks=all produces
                    # that now lack min.insync.replicas); check what waits either way.
                    partition.replicas = list(state.replicas)
                    partition.isr = list(state.isr)
                    for replica in state.replicas:  # a reassignment's new replicas
                        if replica != self.broker_id and replica not in partition.followers:
                            partition.followers[replica] = FollowerState(0, now, now)
                    partition.maybe_increment_high_watermark()
                    self.complete_delayed_requests(tp)
            else:
                was_leader = partition.is_leader
                new_role = (
                    was_leader
                    or partition.leader_id != state.leader
                    or partition.leader_epoch != state.leader_epoch
                    or tp not in self.fetcher_manager.following()
                )
                partition.make_follower(state.leader, state.leader_epoch, state.replicas, state.isr)
                if was_leader:
                    self.complete_delayed_requests(tp)
                if state.leader < 0:
                    self.fetcher_manager.remove_partitions([tp])
                elif new_role:
                    self.fetcher_manager.add_partition(tp, state.leader, state.leader_epoch)

    def _create_partition(self, topic: TopicInfo, index: int) -> Partition:
        tp = (topic.name, index)
        config = self._topic_log_config(topic)
        partition_log = self._existing_logs.pop(tp, None)
        if partition_log is None:
            partition_log = self.log_manager.get_or_create(topic.name, index, config)
        else:  # reopened at start with the default config: the topic's own from now on
            partition_log.config = config
        partition = Partition(
            topic=topic.name,
            partition=index,
            log=partition_log,
            broker_id=self.broker_id,
            max_message_bytes=config.max_message_bytes,
            log_append_time=config.message_timestamp_type == "LogAppendTime",
            timestamp_before_max_ms=config.message_timestamp_before_max_ms,
            timestamp_after_max_ms=config.message_timestamp_after_max_ms,
            high_watermark=partition_log.log_end_offset,
        )
        if partition_log.log_end_offset > partition_log.log_start_offset:
            partition.rebuild_from_log()  # epochs and producers of a reopened log
        if self.remote_log_manager is not None:
            self.remote_log_manager.refresh_log_start(partition)
        self.partitions[tp] = partition
        return partition

    def refresh_tier_start(self, partition: Partition) -> None:
        """Re-read where the remote tier starts before answering below the local log
        start: a broker that just started (or became leader) may not have read the
        tier's metadata yet when the partition opened (Kafka keeps the log start in its
        log-start-offset checkpoint). Nothing without tiered storage."""
        if self.remote_log_manager is not None:
            self.remote_log_manager.refresh_log_start(partition)

    def _apply_topic_config(self, partition: Partition, topic: TopicInfo) -> None:
        """Topic config changes (AlterConfigs) reach partitions that already exist."""
        config = self._topic_log_config(topic)
        if partition.log.config != config:
            partition.log.config = config
            partition.max_message_bytes = config.max_message_bytes
            partition.log_append_time = config.message_timestamp_type == "LogAppendTime"
            partition.timestamp_before_max_ms = config.message_timestamp_before_max_ms
            partition.timestamp_after_max_ms = config.message_timestamp_after_max_ms

    def _remove_partition(self, tp: TopicPartition, delete: bool) -> None:
        self.fetcher_manager.remove_partitions([tp])
        partition = self.partitions.pop(tp)
        partition.log.close()
        if delete:
            self.log_manager.delete(tp[0], tp[1])
        self.complete_delayed_requests(tp)

    # -- lookups -----------------------------------------------------------------------

    def online_partition(self, tp: TopicPartition) -> Partition | None:
        return self.partitions.get(tp)

    def complete_delayed_requests(self, tp: TopicPartition) -> None:
        """A state change of ``tp``: wake every parked operation watching it (fetch,
        produce, DeleteRecords, share fetch, remote fetch and remote ListOffsets)."""
        self.fetch_purgatory.check_and_complete(tp)
        self.produce_purgatory.check_and_complete(tp)
        self.delete_records_purgatory.check_and_complete(tp)
        if self.share_fetch_purgatory is not None:
            self.share_fetch_purgatory.check_and_complete(tp)
        self.remote_fetch_purgatory.check_and_complete(tp)
        # DelayedRemoteListOffsets' cases a and b (leadership moved, partition gone).
        self.remote_list_offsets_purgatory.check_and_complete(tp)

    # -- produce -----------------------------------------------------------------------

    def min_insync_replicas(self, tp: TopicPartition) -> int:
        """The topic's ``min.insync.replicas`` (its override, else the broker's dynamic
        or static default), asked on every acks=all produce and each of its checks:
        kept per topic until the cluster metadata (configs included) changes."""
        version = self.metadata.version
        if version != self._min_isr_version:
            self._min_isr.clear()
            self._min_isr_version = version
        name = tp[0]
        cached = self._min_isr.get(name)
        if cached is not None:
            return cached
        topic = self.metadata.topics.get(name)
        if topic is not None and "min.insync.replicas" in topic.configs:
            value = int(topic.configs["min.insync.replicas"])
        else:
            defaults = broker_topic_defaults(self.config, self.metadata, self.broker_id)
            value = int(defaults.get("min.insync.replicas", self.config.min_insync_replicas))
        self._min_isr[name] = value
        return value

    def append_to_leader(
        self,
        tp: TopicPartition,
        records: bytes,
        required_acks: int,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        transaction_version: int = 0,
    ) -> AppendResult:
        """Append one partition's batches; wake what the append may satisfy."""
        partition = self.partitions.get(tp)
        if partition is None:
            return AppendResult(_unknown_or_not_leader(self, tp))
        if required_acks == -1 and partition.is_leader:
            min_isr = self.min_insync_replicas(tp)
            if len(partition.isr) < min_isr:
                return AppendResult(
                    ErrorCode.not_enough_replicas,
                    error_message=f"ISR {partition.isr} is smaller than min.insync.replicas "
                    f"{min_isr}",
                )
        result = partition.append_records_to_leader(
            records, self.wall_clock_ms(), origin, transaction_version
        )
        if result.error is ErrorCode.none:
            # Followers wait on the log end, consumers on the high watermark: both may go.
            self.fetch_purgatory.check_and_complete(tp)
            if result.hw_changed:
                self.produce_purgatory.check_and_complete(tp)
                if self.share_fetch_purgatory is not None:
                    self.share_fetch_purgatory.check_and_complete(tp)
        return result

    def append_records(
        self,
        timeout_ms: int,
        required_acks: int,
        entries: dict[TopicPartition, bytes],
        respond: Callable[[ProduceStatuses], None],
        parked_request: ParkedRequest | None,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        transaction_version: int = 0,
    ) -> None:
        """Kafka's appendRecords: append now; with acks=all, park until the ISR has it.

        ``origin`` is who writes (Kafka's AppendOrigin): CLIENT for Produce; COORDINATOR
        for the coordinators' own records — the transaction coordinator's COMMIT/ABORT
        markers (``protocol.record_batch.build_control_batch``), which a client may not
        write — and REPLICATION never comes here (followers append in the fetcher).
        ``transaction_version`` is the markers' (WriteTxnMarkers v2, KIP-1228): from 2 a
        marker's epoch must be above the producer's.
        """
        statuses: ProduceStatuses = {}
        for tp, records in entries.items():
            result = self.append_to_leader(tp, records, required_acks, origin, transaction_version)
            statuses[tp] = ProducePartitionStatus(
                result, result.last_offset + 1, acks_pending=result.error is ErrorCode.none
            )
            if result.error is ErrorCode.none and buggify.fires(LEADER_STEP_DOWN_MID_APPEND):
                self.controller.move_leader_away(tp[0], tp[1], self.broker_id)
        must_wait = required_acks == -1 and any(s.acks_pending for s in statuses.values())
        if not must_wait:
            for status in statuses.values():
                status.acks_pending = False
            if origin is AppendOrigin.CLIENT:
                buggify.deferred(PRODUCE_RESPONSE_DELAYED, lambda: respond(statuses))
            else:
                respond(statuses)
            return
        if origin is AppendOrigin.CLIENT:  # a coordinator applies its state in log order
            respond = _late_answer(respond)
        operation = DelayedProduce(
            timeout_ms, statuses, self, self.min_insync_replicas, respond, parked_request
        )
        if not self.produce_purgatory.try_complete_else_watch(operation, list(statuses)):
            self.delayed_produces += 1
        if parked_request is not None and operation.watch_keys:
            parked_request.parked_in(PurgatoryName.PRODUCE)

    # -- delete records ----------------------------------------------------------------

    def is_alive_broker(self, broker_id: int) -> bool:
        """Kafka's metadataCache.hasAliveBroker (the low watermark counts live ones)."""
        endpoint = self.metadata.brokers.get(broker_id)
        return endpoint is not None and endpoint.alive

    def delete_records(
        self,
        timeout_ms: int,
        offsets: dict[TopicPartition, int],
        respond: Callable[[DeleteRecordsStatuses], None],
        parked_request: ParkedRequest | None,
    ) -> None:
        """Kafka's deleteRecords: each leader moves its log start now (offset -1: to the
        high watermark); answer at once, or park a DelayedDeleteRecords until every
        replica's log start has followed."""
        statuses = {tp: self._delete_records_on_local_log(tp, o) for tp, o in offsets.items()}
        if not any(status.must_wait for status in statuses.values()):
            respond(statuses)
            return
        operation = DelayedDeleteRecords(timeout_ms, statuses, self, respond, parked_request)
        self.delete_records_purgatory.try_complete_else_watch(operation, list(statuses))
        if parked_request is not None and operation.watch_keys:
            parked_request.parked_in(PurgatoryName.DELETE_RECORDS)

    def _delete_records_on_local_log(
        self, tp: TopicPartition, offset: int
    ) -> DeleteRecordsPartitionStatus:
        partition = self.partitions.get(tp)
        if partition is None or not partition.is_leader:
            return DeleteRecordsPartitionStatus(offset, -1, _unknown_or_not_leader(self, tp))
        if not self._cleanup_policy_deletes(tp[0]):
            return DeleteRecordsPartitionStatus(offset, -1, ErrorCode.policy_violation)
        if offset == -1:
            offset = partition.high_watermark
        if offset < 0 or offset > partition.high_watermark:
            return DeleteRecordsPartitionStatus(offset, -1, ErrorCode.offset_out_of_range)
        if offset > partition.log_start_offset:
            partition.log.delete_records_before(offset)
            partition.on_log_start_offset_changed()
            self.complete_delayed_requests(tp)
        return DeleteRecordsPartitionStatus(
            offset, partition.low_watermark_if_leader(self.is_alive_broker)
        )

    def _cleanup_policy_deletes(self, topic: str) -> bool:
        """Whether the topic's cleanup.policy includes ``delete`` (Kafka's precondition
        of DeleteRecords: POLICY_VIOLATION otherwise)."""
        info = self.metadata.topics.get(topic)
        policy: str = self.config.log_cleanup_policy
        if info is not None:
            policy = info.configs.get("cleanup.policy", policy)
        return "delete" in [part.strip() for part in policy.split(",")]

    # -- log dirs ----------------------------------------------------------------------

    def alter_replica_log_dir(self, tp: TopicPartition, path: str) -> ErrorCode:
        """Kafka's alterReplicaLogDirs for one partition: move its log to the log dir
        ``path`` (``LogManager.move``: copy, then swap; see its docstring).

        A dir that is not one of ours is LOG_DIR_NOT_FOUND; a partition not hosted here
        is REPLICA_NOT_AVAILABLE, and will be created in that dir if it comes.
        """
        logs = self.log_manager
        if len(f"{tp[0]}-{tp[1]}.{'0' * 32}-future") > 255:
            return ErrorCode.invalid_topic_exception  # Kafka's KAFKA-4893 limit
        destination = logs.find_log_dir(path)
        if destination is None:
            if not logs.log_dirs and path == f"memory://broker-{self.broker_id}":
                return ErrorCode.none if tp in self.partitions else ErrorCode.replica_not_available
            return ErrorCode.log_dir_not_found
        partition = self.partitions.get(tp)
        if partition is None:
            logs.preferred_log_dirs[tp] = destination
            return ErrorCode.replica_not_available
        try:
            moved = logs.move(tp[0], tp[1], destination)
        except OSError as exc:
            log.warning("broker %d: moving %s-%d failed: %s", self.broker_id, *tp, exc)
            return ErrorCode.kafka_storage_error
        if moved is not None:
            partition.log = moved
            partition.txn_index = TransactionIndex(moved.directory, moved.segment_base_offsets)
            partition.rebuild_from_log()
            self.complete_delayed_requests(tp)
        return ErrorCode.none

    # -- fetch -------------------------------------------------------------------------

    def fetch_messages(
        self,
        params: FetchParams,
        statuses: list[FetchPartitionStatus],
        respond: Callable[[FetchResults], None],
        parked_request: ParkedRequest | None,
    ) -> None:
        """Kafka's fetchMessages: answer now if we can, else park a DelayedFetch."""
        if params.is_from_follower and self.replication_quotas is not None:
            respond = self._recording_leader_quota(respond)
        if (
            params.is_from_follower
            and params.max_wait_ms > 0
            and not buggify.may_fire(FETCH_FEWER_BYTES)  # (its read draws per partition)
            and all_at_log_end(self.partitions, statuses)
        ):  # what the read would find (nothing), without reading: most follower fetches
            self.update_follower_fetch_state(params.replica_id, statuses)
        elif self._answered_now(params, statuses, respond, parked_request):
            return
        operation = DelayedFetch(params, statuses, self, respond, parked_request)
        # A tuple: the purgatory keeps it as the operation's watch_keys, no copy made.
        keys = (statuses[0].tp,) if len(statuses) == 1 else tuple([s.tp for s in statuses])
        self.fetch_purgatory.try_complete_else_watch(operation, keys)
        if parked_request is not None and operation.watch_keys:
            parked_request.parked_in(PurgatoryName.FETCH)

    def _answered_now(
        self,
        params: FetchParams,
        statuses: list[FetchPartitionStatus],
        respond: Callable[[FetchResults], None],
        parked_request: ParkedRequest | None,
    ) -> bool:
        """Read; answer (True) unless the fetch is to wait for more bytes."""
        results = self.read_from_local_log(params, statuses)
        if params.is_from_follower:
            # As Kafka: only a read that succeeded tells us where the follower is; a
            # fenced (stale epoch) or refused read must not move the HW or the ISR.
            self.update_follower_fetch_state(
                params.replica_id, [s for s, r in results if r.error is ErrorCode.none]
            )
        remote = self.remote_log_manager
        if remote is not None and any(r.delayed_remote_storage_fetch for _, r in results):
            remote.process_remote_fetches(params, statuses, results, respond, parked_request)
            return True
        available = sum([len(r.records) for _, r in results])
        errored = any([r.error is not ErrorCode.none for _, r in results])
        if params.max_wait_ms <= 0 or not statuses or errored or available >= params.min_bytes:
            respond(results)
            return True
        return False

    def _recording_leader_quota(
        self, respond: Callable[[FetchResults], None]
    ) -> Callable[[FetchResults], None]:
        """``respond``, after recording what it sends of throttled partitions into the
        leader quota, in-sync followers' bytes too (KafkaApis' ``quotas.leader.record``
        with ``sizeOfThrottledPartitions``)."""
        quotas = self.replication_quotas
        assert quotas is not None
        quotas.refresh()
        if not quotas.leader.throttles_any:
            return respond  # the common case: nothing to count, nothing wrapped

        def recorded(results: FetchResults) -> None:
            quotas.refresh()
            leader = quotas.leader
            size = sum(
                len(result.records)
                for status, result in results
                if result.records and leader.is_throttled(*status.tp)
            )
            if size:
                leader.record(size)
            respond(results)

        return recorded

    def should_leader_throttle(self, partition: Partition, replica_id: int) -> bool:
        """Kafka's ``shouldLeaderThrottle``: an out-of-sync follower of a throttled
        partition while the leader's replication quota is exceeded gets no records."""
        quotas = self.replication_quotas
        if quotas is None:
            return False
        return quotas.should_leader_throttle(
            partition.topic, partition.partition, replica_id in partition.isr
        )

    def update_follower_fetch_state(
        self, replica_id: int, statuses: list[FetchPartitionStatus]
    ) -> None:
        """A follower fetched: note its log end; the HW and the ISR may move."""
        now = self.clock.now_ms()
        partitions = self.partitions
        for status in statuses:
            partition = partitions.get(status.tp)
            if partition is None or partition.leader_id != partition.broker_id:
                continue
            if partition.update_follower(replica_id, status.fetch_offset, now):
                self.complete_delayed_requests(status.tp)
            if partition.update_follower_log_start(replica_id, status.log_start_offset):
                # Kafka's leaderLWIncremented: a parked DeleteRecords may be answered.
                self.delete_records_purgatory.check_and_complete(status.tp)
            # (an ISR member never joins it: the usual case, asked without a call)
            if replica_id not in partition.isr and partition.should_join_isr(replica_id):
                self._alter_isr(partition, [*partition.isr, replica_id], expand=True)

    # -- ISR ---------------------------------------------------------------------------

    def _alter_isr(self, partition: Partition, new_isr: list[int], *, expand: bool) -> None:
        """Ask the controller for a new ISR; the change comes back as metadata."""
        error = self.controller.alter_partition_isr(
            partition.topic, partition.partition, self.broker_id, partition.leader_epoch, new_isr
        )
        if error is ErrorCode.none:
            if expand:
                self.isr_expands += 1
            else:
                self.isr_shrinks += 1
        else:
            log.debug("ISR change of %s refused: %s", partition.tp, error)

    def maybe_shrink_isr(self) -> None:
        """Drop followers that have not caught up within ``replica.lag.time.max.ms``."""
        now = self.clock.now_ms()
        max_lag = self.config.replica_lag_time_max_ms
        for partition in list(self.partitions.values()):
            lagging = partition.out_of_sync_replicas(now, max_lag)
            if lagging:
                log.info(
                    "broker %d: shrinking ISR of %s-%d: %s out of sync",
                    self.broker_id,
                    partition.topic,
                    partition.partition,
                    lagging,
                )
                new_isr = [r for r in partition.isr if r not in lagging]
                self._alter_isr(partition, new_isr, expand=False)

    def apply_retention(self) -> int:
        """Kafka's log retention check: delete what ``retention.ms``/``.bytes`` allow.

        Never at or above the high watermark. A log whose start moved may wake a fetch
        parked at an offset that no longer exists.
        """
        now = self.wall_clock_ms()
        deleted = 0
        remote = self.remote_log_manager
        for tp, partition in list(self.partitions.items()):
            start = partition.log_start_offset
            bound = partition.high_watermark
            copied = None if remote is None else remote.local_deletion_bound(tp)
            if copied is not None:  # tiered: only what the remote tier has may go
                bound = min(bound, copied)
            deleted += partition.log.apply_retention(now, high_watermark=bound)
            # (also after a DeleteRecords since the last run: cheap when nothing moved)
            partition.on_log_start_offset_changed()
            if partition.log_start_offset != start:
                self.complete_delayed_requests(tp)
        if deleted:
            log.info("retention deleted %d bytes", deleted)
        return deleted

    def remove_expired_producers(self) -> None:
        """Kafka's producer-expiration task: forget producers idle for
        ``producer.id.expiration.ms`` (their last timestamp against the wall clock)."""
        now = self.wall_clock_ms()
        expiration_ms = self.config.producer_id_expiration_ms
        for partition in list(self.partitions.values()):
            partition.remove_expired_producers(now, expiration_ms)

    # -- OffsetForLeaderEpoch ----------------------------------------------------------

    def last_offset_for_leader_epoch(
        self, tp: TopicPartition, current_leader_epoch: int, leader_epoch: int
    ) -> tuple[ErrorCode, int, int]:
        """``(error, epoch, end_offset)`` for OffsetForLeaderEpoch (leader only)."""
        partition = self.partitions.get(tp)
        if partition is None:
            return _unknown_or_not_leader(self, tp), -1, -1
        return partition.last_offset_for_leader_epoch(current_leader_epoch, leader_epoch)

    # -- reads -------------------------------------------------------------------------

    def read_from_local_log(
        self, params: FetchParams, statuses: list[FetchPartitionStatus]
    ) -> FetchResults:
        """Read every partition of a fetch, within the response's ``max_bytes``.

        KIP-74: the first batch of the first partition that has data is returned whole
        even when it is larger than the limits, so that a consumer can always progress.
        """
        results: FetchResults = []
        remaining = params.max_bytes
        min_one = True
        follower = params.is_from_follower
        read_committed = params.read_committed
        fewer_bytes = buggify.may_fire(FETCH_FEWER_BYTES)  # (asked once, not per partition)
        partitions = self.partitions
        append = results.append
        for status in statuses:
            partition = partitions.get(status.tp)
            if partition is None:
                append((status, ReadResult(_unknown_or_not_leader(self, status.tp))))
                continue
            epoch = status.current_leader_epoch
            if (
                epoch >= 0
                and epoch != partition.leader_epoch
                and partition.leader_id == partition.broker_id
            ):  # `_check_leader_epoch`, asked only when it refuses
                fenced = _check_leader_epoch(partition, epoch)
                assert fenced is not None
                append((status, ReadResult(fenced)))
                continue
            limit = min(status.partition_max_bytes, remaining if remaining > 0 else 0)
            if fewer_bytes and limit and buggify.fires(FETCH_FEWER_BYTES):
                limit = 1  # one batch while nothing is read yet (KIP-74), else nothing
            fetch_offset = status.fetch_offset
            if fetch_offset < partition.log.log_start_offset:  # below the local log
                self.refresh_tier_start(partition)
            result = partition.read(
                fetch_offset,
                limit,
                up_to_log_end=follower,
                min_one=min_one,
                read_committed=read_committed,
            )
            if (
                result.error is ErrorCode.offset_moved_to_tiered_storage
                and not follower
                and self.remote_log_manager is not None
            ):  # a consumer below the local log start: the remote tier answers
                result = self.remote_log_manager.remote_fetch_info(
                    result, status, limit, min_one, params.read_committed
                )
                if result.delayed_remote_storage_fetch is not None:
                    remaining -= limit  # Kafka's estimate: all it may read
                    min_one = False
            if (
                result.records
                and follower
                and self.should_leader_throttle(partition, params.replica_id)
            ):
                result = dataclasses.replace(result, records=b"")
            if result.records:
                remaining -= len(result.records)
                min_one = False
            append((status, result))
        return results


def _late_answer(respond: Callable[[ProduceStatuses], None]) -> Callable[[ProduceStatuses], None]:
    """BUGGIFY: a client's acks=all produce, once complete, may be answered late."""

    def answer(statuses: ProduceStatuses) -> None:
        buggify.deferred(PURGATORY_COMPLETION_DELAYED, lambda: respond(statuses))

    return answer


def _check_leader_epoch(partition: Partition, current_leader_epoch: int) -> ErrorCode | None:
    """KIP-320: a fetch naming an older epoch is fenced, a newer one is unknown yet."""
    if current_leader_epoch < 0 or not partition.is_leader:
        return None
    if current_leader_epoch < partition.leader_epoch:
        return ErrorCode.fenced_leader_epoch
    if current_leader_epoch > partition.leader_epoch:
        return ErrorCode.unknown_leader_epoch
    return None


def _unknown_or_not_leader(manager: ReplicaManager, tp: TopicPartition) -> ErrorCode:
    state = manager.metadata.partition_state(*tp)
    if state is None:
        return ErrorCode.unknown_topic_or_partition
    return ErrorCode.not_leader_or_follower
