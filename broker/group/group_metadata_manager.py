"""Kafka's ``GroupMetadataManager``: the groups this broker coordinates, and their log.

The coordinator (``group_coordinator.py``) decides what happens to a group; this
component keeps the groups and makes their state durable, as Kafka's manager does:

* **the cache** of groups (``groupMetadataCache``) with their committed offsets;
* **appends** to ``__consumer_offsets``, partition ``partition_for(group_id)``, through
  an injected :class:`~broker.group.group_log.GroupLog`: ``store_group`` (a generation,
  its members and assignment) and ``store_offsets`` (a commit) are written with acks=all
  and take effect only in the append's callback, once the in-sync replicas have them;
  a failed append is answered with Kafka's mapped error (``append_errors.py``). The
  request an append serves is handed to the log, so it is recorded as waiting in the
  Produce purgatory;
* **fetch offsets** (``get_offsets``);
* **load and unload**: when this broker becomes the leader of an offsets-topic
  partition it reads it back and rebuilds its groups (``load_groups_for_partition``,
  Kafka's ``loadGroupsAndOffsets``; the steps are ``group_loader.py``'s) in slices on
  the injected :class:`~broker.coordinator.coordinator_loader.LoadScheduler` (the broker's: a
  couple of milliseconds per event-loop iteration), its groups answering
  COORDINATOR_LOAD_IN_PROGRESS meanwhile; the groups are installed only if this broker
  still leads the partition at the leader epoch the load began at. When it stops
  leading one it drops its groups, or gives its load up (``remove_groups_for_partition``).
  The coordinator hears of each group through a :class:`GroupLoadListener` (Kafka's
  ``onGroupLoaded``, ``onGroupUnloaded``), KIP-848 consumer groups included (their
  records, key versions 3-8, replayed by ``group_loader``; written through
  ``append_consumer_group_records``, acks=all, like the classic groups' records). A
  transaction marker landing in a partition being loaded takes effect once it is loaded
  (``defer_txn_completion_while_loading``), as Kafka runs it after the load on the
  loading thread;
* **expiry** of committed offsets every ``offsets.retention.check.interval.ms``
  (``cleanup_group_metadata``, Kafka's ``delete-expired-group-metadata`` job), a task on
  the broker's scheduler timer: nothing sleeps, the injected clock rules;
* **placement**: who coordinates a group (the leader of its partition), the creation of
  ``__consumer_offsets`` on first use (compacted, with ``offsets.topic.segment.bytes``
  segments so that the log cleaner can compact all but the last one), and the error a
  request gets when this broker is not, or not yet, its coordinator.

Where this differs from Kafka:

* Offsets waiting for their append are not tracked as "pending" (Kafka's
  ``pendingOffsetCommits``): OffsetFetch shows the last replicated commit; commits to
  one partition complete in append order. Transactional offsets are (``txn_offsets.py``,
  ``group_txn.py``): until their marker OffsetFetch with ``require_stable`` answers
  UNSTABLE_OFFSET_COMMIT.
* A ``GroupLog`` that raises (a bug, not an append error) counts as an append that
  failed with UNKNOWN_SERVER_ERROR.
* A partition loads in slices on the event loop, not on a thread (``coordinator_loader``
  says why), and stays "loading" while its replica is not online.
* Deleting a group writes its group tombstone even at generation 0.
* No coordinator epochs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator, Iterable, Mapping
from typing import Protocol

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import (
    OFFSETS_TOPIC,
    BrokerEndpoint,
    ClusterMetadata,
    TopicInfo,
)
from broker.coordinator.coordinator_loader import (
    ImmediateLoadScheduler,
    LoadJob,
    LoadScheduler,
    LoadSteps,
)
from broker.coordinator.coordinator_partitions import CoordinatorPartitions
from broker.group.append_errors import commit_error, store_group_error
from broker.group.consumer.consumer_group import ConsumerGroup
from broker.group.consumer.consumer_group_records import (
    ConsumerGroupRecord,
    encode_consumer_group_record,
)
from broker.group.group_config import OffsetConfig
from broker.group.group_loader import LoadedPartition, PartitionLoad, load_partition
from broker.group.group_log import (
    GROUP_METADATA_TOPIC_NAME,
    GroupLog,
    GroupMetadataRecord,
    GroupMetadataValue,
    KeyValue,
    MemberRecord,
    OffsetCommitRecord,
    Record,
    encode_record,
)
from broker.group.group_metadata import GroupMetadata
from broker.group.group_state import GroupState
from broker.group.offsets import NO_LEADER_EPOCH, NO_METADATA, NO_OFFSET, OffsetAndMetadata
from broker.group.results import CommitCallback, OffsetFetchPartition, TopicPartition
from broker.group.streams.streams_group import StreamsGroup
from broker.group.txn_offsets import complete_pending_txn_offsets
from broker.server.purgatories import ParkedRequest
from broker.server.scheduler import PeriodicTask
from purgatory import Clock, SystemTimer

log = logging.getLogger("broker.group")

E = ErrorCode

# What a commit carries per partition: (offset, leader_epoch, metadata).
CommitValue = tuple[int, int, str | None]
StoreCallback = Callable[[ErrorCode], None]
# Which offsets a cleanup removes from a group (Kafka's ``selector``).
OffsetSelector = Callable[[GroupMetadata], list[TopicPartition]]


class GroupLoadListener(Protocol):
    """Told of each group a load brings in or an unload takes away (the coordinator),
    and of each KIP-848 consumer group a load brings in and each partition whose consumer
    groups go."""

    def on_group_loaded(self, group: GroupMetadata) -> None: ...

    def on_group_unloaded(self, group: GroupMetadata) -> None: ...

    def on_consumer_group_loaded(self, group: ConsumerGroup) -> None: ...

    def on_consumer_groups_unloaded(self, partition: int) -> None: ...

    def on_streams_group_loaded(self, group: StreamsGroup) -> None: ...


class GroupMetadataManager:
    """The groups of this broker's ``__consumer_offsets`` partitions. See the module
    docstring."""

    def __init__(
        self,
        broker_id: int,
        config: OffsetConfig,
        clock: Clock,
        metadata: ClusterMetadata,
        group_log: GroupLog,
        scheduler_timer: SystemTimer,
        uuid_factory: Callable[[], str] | None = None,
        load_scheduler: LoadScheduler | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.config = config
        self._clock = clock
        self._log = group_log
        self._uuid_factory = uuid_factory
        self._partitions = CoordinatorPartitions(
            OFFSETS_TOPIC,
            broker_id,
            metadata,
            config.offsets_topic_num_partitions,
            config.offsets_topic_replication_factor,
            lambda _replication: {
                "cleanup.policy": "compact",
                "segment.bytes": str(config.offsets_topic_segment_bytes),
            },
        )
        self._groups: dict[str, GroupMetadata] = {}
        self._owned_partitions: set[int] = set()
        self._loading: dict[int, PartitionLoad] = {}
        # Runs the loads; by default at once (unit tests), the broker's in slices.
        self._load_scheduler = load_scheduler or ImmediateLoadScheduler()
        self._listener: GroupLoadListener | None = None
        self._expiry = PeriodicTask(
            scheduler_timer,
            f"delete-expired-group-metadata-{broker_id}",
            config.offsets_retention_check_interval_ms,
            self.cleanup_group_metadata,
        )

    # ============================================================== lifecycle
    def startup(self, listener: GroupLoadListener) -> None:
        """Load the partitions this broker leads, follow leadership changes, and start
        the offset expiry. ``listener`` hears of every group loaded or unloaded."""
        self._listener = listener
        self._partitions.follow(self._follow_leadership)
        self._expiry.start()

    def shutdown(self) -> None:
        self._partitions.unfollow()
        self._expiry.stop()
        if self._listener is not None:
            for partition in sorted(self._owned_partitions):
                self._listener.on_consumer_groups_unloaded(partition)
        self._listener = None
        for partition in list(self._loading):
            self._cancel_load(partition)
        self._owned_partitions.clear()
        self._groups.clear()

    # ============================================================== placement
    def partition_for(self, group_id: str) -> int:
        """The ``__consumer_offsets`` partition holding ``group_id``'s records."""
        return self._partitions.partition_for(group_id)

    def ensure_offsets_topic(self) -> TopicInfo:
        """Create ``__consumer_offsets`` on first use, as Kafka does."""
        return self._partitions.ensure_topic()

    def coordinator_endpoint(self, group_id: str) -> tuple[ErrorCode, BrokerEndpoint | None]:
        """FindCoordinator: the leader of the group's partition, if it is alive."""
        return self._partitions.coordinator_endpoint(group_id)

    def check_coordinator(self, group_id: str) -> ErrorCode:
        """NONE when this broker coordinates ``group_id`` and has loaded it, else Kafka's
        error for it (Kafka's ``validateGroupStatus``)."""
        if not group_id:
            return E.invalid_group_id
        topic = self._partitions.topic()
        if topic is None:
            return E.coordinator_not_available
        partition = self.partition_for(group_id)
        if topic.partitions[partition].leader != self.broker_id:
            return E.not_coordinator
        if partition not in self._owned_partitions:
            return E.coordinator_load_in_progress
        return E.none

    # ================================================================== cache
    def get_group(self, group_id: str) -> GroupMetadata | None:
        return self._groups.get(group_id)

    def get_or_maybe_create_group(self, group_id: str, create: bool) -> GroupMetadata | None:
        """The group; a new Empty one when it is unknown and ``create`` is set."""
        group = self._groups.get(group_id)
        if group is None and create:
            group = self._new_group(group_id, GroupState.EMPTY)
            self._groups[group_id] = group
        return group

    @property
    def current_groups(self) -> list[GroupMetadata]:
        return list(self._groups.values())

    def _new_group(self, group_id: str, state: GroupState) -> GroupMetadata:
        return GroupMetadata(group_id, state, self._clock, self._uuid_factory)

    # ========================================================== load / unload
    def _follow_leadership(self) -> None:
        """Kafka's onElection / onResignation, from the cluster metadata: unload what this
        broker no longer leads, load what it leads now (again if at another epoch)."""
        listener = self._listener
        if listener is None:
            return
        led = self._partitions.led_partitions()
        for partition in sorted((self._owned_partitions | set(self._loading)) - set(led)):
            self.remove_groups_for_partition(
                partition, listener.on_group_unloaded, listener.on_consumer_groups_unloaded
            )
        for partition, epoch in sorted(led.items()):
            load = self._loading.get(partition)
            if load is not None and load.leader_epoch != epoch:
                self._cancel_load(partition)
                load = None
            if load is None and partition not in self._owned_partitions:
                self.load_groups_for_partition(
                    partition, listener.on_group_loaded, epoch, listener.on_consumer_group_loaded
                )

    def load_groups_for_partition(
        self,
        partition: int,
        on_group_loaded: Callable[[GroupMetadata], None],
        leader_epoch: int | None = None,
        on_consumer_group_loaded: Callable[[ConsumerGroup], None] | None = None,
    ) -> bool:
        """Start rebuilding the groups and offsets of ``partition`` from its records
        (``group_loader.load_partition``) on the load scheduler; its groups answer
        COORDINATOR_LOAD_IN_PROGRESS until it is done. ``on_group_loaded`` then gets each
        group that had metadata (the coordinator makes its members heartbeat like anyone
        else), ``on_consumer_group_loaded`` each KIP-848 consumer group. With
        ``leader_epoch``, the load is given up if, when done, this broker no longer leads
        the partition at that epoch. False when this broker has no online
        replica of the partition yet (it stays loading until the next metadata change).
        """
        entries = self._log.open_log(partition)
        if entries is None:
            return False
        self._cancel_load(partition)
        load = PartitionLoad(partition, leader_epoch, self._clock.now_ms())
        self._loading[partition] = load
        load.job = LoadJob(
            f"{GROUP_METADATA_TOPIC_NAME}-{partition}",
            self._load_steps(
                load,
                load_partition(entries, self._new_group),
                on_group_loaded,
                on_consumer_group_loaded,
            ),
        )
        self._load_scheduler.schedule(load.job)
        return True

    def _load_steps(
        self,
        load: PartitionLoad,
        steps: Generator[int, None, LoadedPartition],
        on_group_loaded: Callable[[GroupMetadata], None],
        on_consumer_group_loaded: Callable[[ConsumerGroup], None] | None,
    ) -> LoadSteps:
        partition = load.partition
        try:
            loaded = yield from steps
        except Exception:  # a bug: the next metadata change tries again
            log.exception("Error loading %s-%d", GROUP_METADATA_TOPIC_NAME, partition)
            loaded = None
        if self._loading.get(partition) is not load:
            return  # given up meanwhile
        del self._loading[partition]
        if loaded is None:
            return
        if load.leader_epoch is not None and not self._partitions.leads(
            partition, load.leader_epoch
        ):
            log.info("Not loading %s-%d: not its leader", GROUP_METADATA_TOPIC_NAME, partition)
            return
        installed = self._install(partition, loaded, load)
        log.log(
            logging.INFO if loaded.records else logging.DEBUG,
            "Finished loading offsets and group metadata from %s-%d in %d milliseconds "
            "(%d slices): %d records, %d groups, %d consumer groups",
            GROUP_METADATA_TOPIC_NAME,
            partition,
            self._clock.now_ms() - load.started_ms,
            load.job.slices if load.job is not None else 0,
            loaded.records,
            len(loaded.groups),
            len(loaded.consumer_groups),
        )
        for group_id in loaded.with_metadata:
            if installed.get(group_id) is not None:
                on_group_loaded(installed[group_id])
        if on_consumer_group_loaded is not None:
            for consumer_group in loaded.consumer_groups.values():
                on_consumer_group_loaded(consumer_group)
        if self._listener is not None:
            for streams_group in loaded.streams_groups.values():
                self._listener.on_streams_group_loaded(streams_group)

    def _install(
        self, partition: int, loaded: LoadedPartition, load: PartitionLoad
    ) -> dict[str, GroupMetadata]:
        """Put a loaded partition's groups in the cache: from now on this broker is their
        coordinator. A group already cached stays (Kafka's ``addGroup``). Returns the
        groups put in."""
        for group_id in loaded.removed:
            existing = self._groups.pop(group_id, None)
            if existing is not None and not existing.is_in(GroupState.DEAD):
                existing.transition_to(GroupState.DEAD)
        installed = {}
        for group_id, group in loaded.groups.items():
            if self._groups.setdefault(group_id, group) is group:
                installed[group_id] = group
            else:
                log.warning("Not loading group %s: it is already cached", group_id)
        self._owned_partitions.add(partition)
        for producer_id, is_commit in load.txn_completions:
            complete_pending_txn_offsets(installed.values(), producer_id, is_commit)
        return installed

    def _cancel_load(self, partition: int) -> None:
        load = self._loading.pop(partition, None)
        if load is not None and load.job is not None:
            load.job.cancel()

    @property
    def loading_partitions(self) -> frozenset[int]:
        """The partitions being loaded now."""
        return frozenset(self._loading)

    def defer_txn_completion_while_loading(
        self, producer_id: int, partitions: Iterable[int], is_commit: bool
    ) -> None:
        """A transaction's marker reached these partitions: those still loading apply it
        once loaded (Kafka runs the completion on the thread that loads, after the
        load), since their groups are not in the cache yet."""
        for partition in partitions:
            load = self._loading.get(partition)
            if load is not None:
                load.txn_completions.append((producer_id, is_commit))

    def remove_groups_for_partition(
        self,
        partition: int,
        on_group_unloaded: Callable[[GroupMetadata], None],
        on_consumer_groups_unloaded: Callable[[int], None] | None = None,
    ) -> None:
        """This broker no longer leads ``partition``: give up its load if one is under way,
        forget its groups (Kafka's ``removeGroupsForPartition``); ``on_group_unloaded``
        answers what waited on them, ``on_consumer_groups_unloaded`` drops the partition's
        consumer groups."""
        self._cancel_load(partition)
        self._owned_partitions.discard(partition)
        if on_consumer_groups_unloaded is not None:
            on_consumer_groups_unloaded(partition)
        gone = [g for g in self._groups.values() if self.partition_for(g.group_id) == partition]
        for group in gone:
            del self._groups[group.group_id]
            on_group_unloaded(group)
        log.info(
            "Finished unloading %s-%d: removed %d cached groups",
            GROUP_METADATA_TOPIC_NAME,
            partition,
            len(gone),
        )

    # ================================================================ appends
    def _append_for_group(
        self,
        group_id: str,
        records: list[Record],
        on_done: StoreCallback | None,
        parked_request: ParkedRequest | None = None,
        producer: tuple[int, int] | None = None,
    ) -> None:
        """Hand ``records`` to the log; ``on_done`` (if any) gets the append's own error
        exactly once, now or when the offsets topic's ISR has the records. ``producer``:
        a TxnOffsetCommit's (producer id, epoch), written as a transactional batch."""
        if not records:
            if on_done is not None:
                on_done(E.none)
            return
        self._append_records(
            group_id, [encode_record(r) for r in records], on_done, parked_request, producer
        )

    def _append_records(
        self,
        group_id: str,
        records: list[KeyValue],
        on_done: StoreCallback | None,
        parked_request: ParkedRequest | None = None,
        producer: tuple[int, int] | None = None,
    ) -> None:
        answered = False

        def once(error: ErrorCode) -> None:
            nonlocal answered
            if not answered:
                answered = True
                assert on_done is not None
                on_done(error)

        try:
            self._log.append_to_log(
                self.partition_for(group_id),
                records,
                once if on_done is not None else None,
                parked_request,
                producer=producer,
            )
        except Exception:
            log.exception(
                "Appending to %s failed for group %s", GROUP_METADATA_TOPIC_NAME, group_id
            )
            if on_done is not None:
                once(E.unknown_server_error)

    def append_consumer_group_records(
        self,
        group_id: str,
        records: list[ConsumerGroupRecord],
        on_done: StoreCallback | None,
        parked_request: ParkedRequest | None = None,
    ) -> None:
        """A KIP-848 consumer group's records (``consumer_group_records.py``), written
        like the classic group's: acks=all to the group's partition, in call order;
        ``on_done`` gets the append's own error once the in-sync replicas have them."""
        if not records:
            if on_done is not None:
                on_done(E.none)
            return
        self._append_records(
            group_id, [encode_consumer_group_record(r) for r in records], on_done, parked_request
        )

    def append_coordinator_records(
        self,
        group_id: str,
        records: list[KeyValue],
        on_done: StoreCallback | None,
        parked_request: ParkedRequest | None = None,
    ) -> None:
        """Records already encoded (a streams group's, ``streams/streams_group_records.py``),
        written as a consumer group's are."""
        self._append_records(group_id, records, on_done, parked_request)

    def store_group(
        self,
        group: GroupMetadata,
        assignment: Mapping[str, bytes],
        callback: StoreCallback,
        parked_request: ParkedRequest | None = None,
    ) -> None:
        """Persist the group's generation and members (Kafka's ``storeGroup``);
        ``callback`` gets SyncGroup's error for the append (:func:`store_group_error`)."""
        protocol = group.protocol_name
        members = [
            MemberRecord(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                session_timeout_ms=m.session_timeout_ms,
                subscription=m.metadata(protocol) if protocol is not None else b"",
                assignment=assignment.get(m.member_id, b""),
            )
            for m in group.all_member_metadata
        ]
        value = GroupMetadataValue(
            protocol_type=group.protocol_type or "",
            generation=group.generation_id,
            protocol=protocol,
            leader=group.leader_id,
            current_state_timestamp=(
                group.current_state_timestamp if group.current_state_timestamp is not None else -1
            ),
            members=members,
        )
        self._append_for_group(
            group.group_id,
            [GroupMetadataRecord(group.group_id, value)],
            lambda append_error: callback(store_group_error(append_error)),
            parked_request,
        )

    def store_offsets(
        self,
        group: GroupMetadata,
        offsets: Mapping[tuple[str, int], CommitValue],
        callback: CommitCallback,
        *,
        expire_timestamp_ms: int | None = None,
        parked_request: ParkedRequest | None = None,
    ) -> None:
        """Kafka's ``storeOffsets``: the cache changes only once the append succeeded.
        ``callback`` gets an error per partition, now or when the append is done."""
        results, accepted = self.accept_offsets(offsets, expire_timestamp_ms)
        if not accepted:
            callback(results)
            return
        records: list[Record] = [
            OffsetCommitRecord(group.group_id, tp.topic, tp.partition, om)
            for tp, om in accepted.items()
        ]

        def on_appended(append_error: ErrorCode) -> None:
            error = commit_error(append_error)
            if error is E.none:
                # A group deleted meanwhile stays deleted (its tombstone came first).
                if not group.is_in(GroupState.DEAD):
                    group.offsets.update(accepted)
            else:
                log.debug(
                    "Offset commit of group %s failed when appending to %s: %s",
                    group.group_id,
                    GROUP_METADATA_TOPIC_NAME,
                    append_error.name,
                )
            for tp in accepted:
                results[tp] = error
            callback(results)

        self._append_for_group(group.group_id, records, on_appended, parked_request)

    def accept_offsets(
        self,
        offsets: Mapping[tuple[str, int], CommitValue],
        expire_timestamp_ms: int | None = None,
    ) -> tuple[dict[TopicPartition, ErrorCode], dict[TopicPartition, OffsetAndMetadata]]:
        """The offsets of a commit (plain or transactional) that may be stored, stamped
        now, and the error of each that may not: OFFSET_METADATA_TOO_LARGE when its
        metadata is over ``offset.metadata.max.bytes``."""
        now = self._clock.now_ms()
        rejected: dict[TopicPartition, ErrorCode] = {}
        accepted: dict[TopicPartition, OffsetAndMetadata] = {}
        for raw_tp, (offset, leader_epoch, metadata) in offsets.items():
            tp = TopicPartition(*raw_tp)
            text = metadata if metadata is not None else NO_METADATA
            if len(text.encode("utf-8")) > self.config.offset_metadata_max_bytes:
                rejected[tp] = E.offset_metadata_too_large
                continue
            accepted[tp] = OffsetAndMetadata(
                offset=offset,
                leader_epoch=leader_epoch if leader_epoch is not None else NO_LEADER_EPOCH,
                metadata=text,
                commit_timestamp=now,
                expire_timestamp=expire_timestamp_ms,
            )
        return rejected, accepted

    def get_offsets(
        self,
        group_id: str,
        partitions: Iterable[tuple[str, int]] | None = None,
        require_stable: bool = False,
    ) -> dict[TopicPartition, OffsetFetchPartition]:
        """OffsetFetch: committed offsets of ``partitions`` (None: all the group has).
        A partition without a commit gets offset -1, as in Kafka; with ``require_stable``
        one with a transactional commit pending gets UNSTABLE_OFFSET_COMMIT."""
        group = self._groups.get(group_id)
        stored: Mapping[TopicPartition, OffsetAndMetadata] = (
            group.offsets if group is not None and not group.is_in(GroupState.DEAD) else {}
        )
        wanted = list(stored) if partitions is None else [TopicPartition(*tp) for tp in partitions]
        result: dict[TopicPartition, OffsetFetchPartition] = {}
        pending = (
            group.pending_txn_offsets if group is not None and partitions is not None else None
        )
        for tp in wanted:
            om = stored.get(tp)
            if (
                require_stable
                and pending
                and pending.has_pending_offset_commits_for_topic_partition(tp)
            ):
                result[tp] = OffsetFetchPartition(
                    NO_OFFSET, NO_LEADER_EPOCH, NO_METADATA, E.unstable_offset_commit
                )
            elif om is None:
                result[tp] = OffsetFetchPartition(NO_OFFSET, NO_LEADER_EPOCH, NO_METADATA, E.none)
            else:
                result[tp] = OffsetFetchPartition(om.offset, om.leader_epoch, om.metadata, E.none)
        return result

    # ================================================================ cleanup
    def cleanup_group_metadata(
        self,
        groups: Iterable[GroupMetadata] | None = None,
        selector: OffsetSelector | None = None,
    ) -> int:
        """Kafka's ``cleanupGroupMetadata``: remove the offsets ``selector`` picks from
        each group, make an Empty group left without offsets Dead, write the tombstones
        (on the leader, waiting for no one) and forget Dead groups. Returns how many
        offsets went. Without arguments, the periodic expiry: every group, the offsets
        past ``offsets.retention.minutes``."""
        expiring = selector is None
        if groups is None:
            groups = list(self._groups.values())
        if selector is None:
            now = self._clock.now_ms()
            retention_ms = self.config.offsets_retention_ms

            def expired(group: GroupMetadata) -> list[TopicPartition]:
                return group.remove_expired_offsets(now, retention_ms)

            selector = expired
        total = 0
        for group in groups:
            if group.is_in(GroupState.DEAD) and self._groups.get(group.group_id) is not group:
                continue  # already forgotten
            removed = selector(group)
            if group.is_in(GroupState.EMPTY) and not group.has_offsets():
                log.info(
                    "Group %s transitioned to Dead in generation %d",
                    group.group_id,
                    group.generation_id,
                )
                group.transition_to(GroupState.DEAD)
            is_dead = group.is_in(GroupState.DEAD)
            records: list[Record] = [
                OffsetCommitRecord(group.group_id, tp.topic, tp.partition, None) for tp in removed
            ]
            if is_dead and self._groups.get(group.group_id) is group:
                del self._groups[group.group_id]
                records.append(GroupMetadataRecord(group.group_id, None))
            self._append_for_group(group.group_id, records, None)
            total += len(removed)
        if expiring and total:
            log.info("Removed %d expired offsets", total)
        return total
