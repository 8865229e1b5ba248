"""Kafka's ``GroupMetadataManager``: the groups this broker coordinates, and their log.

The coordinator (``group_coordinator.py``) decides what happens to a group; this
component keeps the groups and makes their state durable, as Kafka's manager does:

* **the cache** of groups (``groupMetadataCache``) with their committed offsets;
* **appends** to ``__consumer_offsets``, partition ``partition_for(group_id)``, through
  an injected :class:`~broker.group.group_log.GroupLog`: ``store_group`` (a generation,
  its members and assignment) and ``store_offsets`` (a commit) are written with acks=all
  and take effect only in the append's callback, once the in-sync replicas have them;
  a failed append is answered with Kafka's mapped error (:func:`commit_error`,
  :func:`store_group_error`). The request an append serves is handed to the log, so
  it is recorded as waiting in the Produce purgatory;
* **fetch offsets** (``get_offsets``);
* **load and unload**: when this broker becomes the leader of an offsets-topic
  partition it reads the partition back and rebuilds its groups
  (``load_groups_for_partition``, Kafka's ``loadGroupsAndOffsets``); when it stops
  leading it, it drops them (``remove_groups_for_partition``). The coordinator is told
  of each group through a :class:`GroupLoadListener`, Kafka's ``onGroupLoaded`` and
  ``onGroupUnloaded``;
* **expiry** of committed offsets every ``offsets.retention.check.interval.ms``
  (``cleanup_group_metadata``, Kafka's ``delete-expired-group-metadata`` job), a task on
  the broker's scheduler timer: nothing sleeps, the injected clock rules;
* **placement**: who coordinates a group (the leader of its partition), the creation of
  ``__consumer_offsets`` on first use, and the error a request gets when this broker is
  not, or not yet, its coordinator.

Where this differs from Kafka:

* Offsets waiting for their append are not tracked as "pending" (Kafka's
  ``pendingOffsetCommits``): OffsetFetch shows the last replicated commit; commits to
  one partition complete in append order. Transactional offsets are (``txn_offsets.py``,
  ``group_txn.py``): until their marker OffsetFetch with ``require_stable`` answers
  UNSTABLE_OFFSET_COMMIT.
* A ``GroupLog`` that raises (a bug, not an append error) counts as an append that
  failed with UNKNOWN_SERVER_ERROR.
* A partition loads at once, on the event loop (Kafka loads on a scheduler thread and
  answers COORDINATOR_LOAD_IN_PROGRESS meanwhile); a partition whose replica is not
  online yet stays "loading" until the next metadata change.
* Deleting a group writes its group tombstone even at generation 0.
* No coordinator epochs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from kio.schema.errors import ErrorCode

from broker.cluster_metadata import OFFSETS_TOPIC, BrokerEndpoint, ClusterMetadata, TopicInfo
from broker.group.group_config import OffsetConfig
from broker.group.group_log import (
    GROUP_METADATA_TOPIC_NAME,
    GroupLog,
    GroupMetadataRecord,
    GroupMetadataValue,
    KeyValue,
    MemberRecord,
    OffsetCommitRecord,
    Record,
    decode_all,
    encode_record,
)
from broker.group.group_metadata import GroupMetadata
from broker.group.group_state import GroupState
from broker.group.member_metadata import MemberMetadata
from broker.group.offsets import NO_LEADER_EPOCH, NO_METADATA, NO_OFFSET, OffsetAndMetadata
from broker.group.partition_hash import partition_for
from broker.group.results import CommitCallback, OffsetFetchPartition, TopicPartition
from broker.group.txn_offsets import resolve_transactions, restore_pending_txn_offsets
from broker.purgatories import ParkedRequest
from broker.scheduler import PeriodicTask
from purgatory import Clock, SystemTimer

log = logging.getLogger("broker.group")

E = ErrorCode

# What a commit carries per partition: (offset, leader_epoch, metadata).
CommitValue = tuple[int, int, str | None]
StoreCallback = Callable[[ErrorCode], None]
# Which offsets a cleanup removes from a group (Kafka's ``selector``).
OffsetSelector = Callable[[GroupMetadata], list[TopicPartition]]


def commit_error(append_error: ErrorCode) -> ErrorCode:
    """OffsetCommit's error for a failed append to ``__consumer_offsets`` (Kafka's
    ``storeOffsets``): the client retries or rediscovers the coordinator on these."""
    if append_error is E.none:
        return E.none
    if append_error in (
        E.unknown_topic_or_partition,
        E.not_enough_replicas,
        E.not_enough_replicas_after_append,
        E.request_timed_out,
    ):
        return E.coordinator_not_available
    if append_error in (E.not_leader_or_follower, E.kafka_storage_error):
        return E.not_coordinator
    if append_error in (E.message_too_large, E.record_list_too_large, E.invalid_fetch_size):
        return E.invalid_commit_offset_size
    return E.unknown_server_error


def store_group_error(append_error: ErrorCode) -> ErrorCode:
    """SyncGroup's (and a static rejoin's) error for a failed group-metadata append
    (Kafka's ``storeGroup``): a timeout asks the members to rejoin."""
    if append_error in (
        E.unknown_topic_or_partition,
        E.not_enough_replicas,
        E.not_enough_replicas_after_append,
    ):
        return E.coordinator_not_available
    if append_error in (E.not_leader_or_follower, E.kafka_storage_error):
        return E.not_coordinator
    if append_error is E.request_timed_out:
        return E.rebalance_in_progress
    if append_error in (E.message_too_large, E.record_list_too_large, E.invalid_fetch_size):
        return E.unknown_server_error
    return append_error


class GroupLoadListener(Protocol):
    """Told of each group a load brings in or an unload takes away (the coordinator)."""

    def on_group_loaded(self, group: GroupMetadata) -> None: ...

    def on_group_unloaded(self, group: GroupMetadata) -> None: ...


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
    ) -> None:
        self.broker_id = broker_id
        self.config = config
        self._clock = clock
        self._metadata = metadata
        self._log = group_log
        self._uuid_factory = uuid_factory
        self._num_partitions = config.offsets_topic_num_partitions
        self._groups: dict[str, GroupMetadata] = {}
        self._owned_partitions: set[int] = set()
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
        topic = self._metadata.topics.get(OFFSETS_TOPIC)
        if topic is not None:
            self._num_partitions = len(topic.partitions)
        self._metadata.subscribe(self._on_metadata_change)
        self._follow_leadership()
        self._expiry.start()

    def shutdown(self) -> None:
        self._metadata.unsubscribe(self._on_metadata_change)
        self._expiry.stop()
        self._listener = None
        self._owned_partitions.clear()
        self._groups.clear()

    # ============================================================== placement
    def partition_for(self, group_id: str) -> int:
        """The ``__consumer_offsets`` partition holding ``group_id``'s records."""
        return partition_for(group_id, self._num_partitions)

    def ensure_offsets_topic(self) -> TopicInfo:
        """Create ``__consumer_offsets`` on first use, as Kafka does."""
        cluster = self._metadata
        topic = cluster.topics.get(OFFSETS_TOPIC)
        if topic is None:
            alive = max(len(cluster.alive_brokers()), 1)
            topic = cluster.create_topic(
                OFFSETS_TOPIC,
                self.config.offsets_topic_num_partitions,
                min(self.config.offsets_topic_replication_factor, alive),
                {"cleanup.policy": "compact"},
            )
        self._num_partitions = len(topic.partitions)
        return topic

    def coordinator_endpoint(self, group_id: str) -> tuple[ErrorCode, BrokerEndpoint | None]:
        """FindCoordinator: the leader of the group's partition, if it is alive."""
        topic = self.ensure_offsets_topic()
        state = topic.partitions[self.partition_for(group_id)]
        endpoint = self._metadata.brokers.get(state.leader)
        if endpoint is None or not endpoint.alive:
            return E.coordinator_not_available, None
        return E.none, endpoint

    def check_coordinator(self, group_id: str) -> ErrorCode:
        """NONE when this broker coordinates ``group_id`` and has loaded it, else Kafka's
        error for it (Kafka's ``validateGroupStatus``)."""
        if not group_id:
            return E.invalid_group_id
        topic = self._metadata.topics.get(OFFSETS_TOPIC)
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
    def _on_metadata_change(self, name: str, topic: TopicInfo | None) -> None:
        if name != OFFSETS_TOPIC:
            return
        if topic is not None:
            self._num_partitions = len(topic.partitions)
        self._follow_leadership()

    def _follow_leadership(self) -> None:
        """Kafka's onElection / onResignation, from the shared cluster metadata."""
        listener = self._listener
        if listener is None:
            return
        topic = self._metadata.topics.get(OFFSETS_TOPIC)
        led = (
            {s.partition for s in topic.partitions if s.leader == self.broker_id}
            if topic is not None
            else set()
        )
        for partition in sorted(self._owned_partitions - led):
            self.remove_groups_for_partition(partition, listener.on_group_unloaded)
        for partition in sorted(led - self._owned_partitions):
            self.load_groups_for_partition(partition, listener.on_group_loaded)

    def load_groups_for_partition(
        self, partition: int, on_group_loaded: Callable[[GroupMetadata], None]
    ) -> bool:
        """Rebuild the groups and offsets of ``partition`` from its records.

        Replays in order, later records winning (what compaction would keep). Groups come
        back Stable (with members) or Empty; ``on_group_loaded`` gets each group with
        metadata (the coordinator makes its members heartbeat like anyone else). False
        when this broker has no online replica of the partition yet.
        """
        entries = self._log.read_log(partition)
        if entries is None:
            return False
        records, open_txns = resolve_transactions(entries)
        loaded = self._replay(records)
        restore_pending_txn_offsets(open_txns, self._group_for_load)
        self._owned_partitions.add(partition)
        if records:
            log.info(
                "Finished loading offsets and group metadata from %s-%d: %d records",
                GROUP_METADATA_TOPIC_NAME,
                partition,
                len(records),
            )
        for group in loaded:
            on_group_loaded(group)
        return True

    def _replay(self, records: Iterable[KeyValue]) -> list[GroupMetadata]:
        offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        metadata: dict[str, GroupMetadataValue] = {}
        removed: set[str] = set()
        for record in decode_all(records):
            if isinstance(record, OffsetCommitRecord):
                per_group = offsets.setdefault(record.group_id, {})
                tp = TopicPartition(record.topic, record.partition)
                if record.value is None:
                    per_group.pop(tp, None)
                else:
                    per_group[tp] = record.value
            elif record.value is None:
                metadata.pop(record.group_id, None)
                removed.add(record.group_id)
            else:
                metadata[record.group_id] = record.value
                removed.discard(record.group_id)

        for group_id in removed:
            existing = self._groups.pop(group_id, None)
            if existing is not None and not existing.is_in(GroupState.DEAD):
                existing.transition_to(GroupState.DEAD)
        loaded = []
        for group_id, value in metadata.items():
            group = self._group_from_record(group_id, value)
            group.offsets.update(offsets.pop(group_id, {}))
            self._groups[group_id] = group
            loaded.append(group)
        for group_id, group_offsets in offsets.items():
            if group_offsets:
                offsets_only = self.get_or_maybe_create_group(group_id, True)
                assert offsets_only is not None
                offsets_only.offsets.update(group_offsets)
        return loaded

    def _group_for_load(self, group_id: str) -> GroupMetadata:
        group = self.get_or_maybe_create_group(group_id, True)
        assert group is not None
        return group

    def _group_from_record(self, group_id: str, value: GroupMetadataValue) -> GroupMetadata:
        """Kafka's ``GroupMetadata.loadGroup``."""
        group = self._new_group(group_id, GroupState.STABLE if value.members else GroupState.EMPTY)
        group.generation_id = value.generation
        group.protocol_type = value.protocol_type or None
        group.protocol_name = value.protocol
        for m in value.members:
            protocols = [(value.protocol, m.subscription)] if value.protocol is not None else []
            group.add(
                MemberMetadata(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    session_timeout_ms=m.session_timeout_ms,
                    protocol_type=value.protocol_type,
                    supported_protocols=protocols,
                    assignment=m.assignment,
                )
            )
        group.leader_id = value.leader if value.leader in group.all_members else group.leader_id
        group.current_state_timestamp = (
            value.current_state_timestamp if value.current_state_timestamp >= 0 else None
        )
        group.refresh_subscribed_topics()
        return group

    def remove_groups_for_partition(
        self, partition: int, on_group_unloaded: Callable[[GroupMetadata], None]
    ) -> None:
        """This broker no longer leads ``partition``: forget its groups (Kafka's
        ``removeGroupsForPartition``); ``on_group_unloaded`` answers what waited on them."""
        self._owned_partitions.discard(partition)
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
                [encode_record(r) for r in records],
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
        now = self._clock.now_ms()
        results: dict[TopicPartition, ErrorCode] = {}
        accepted: dict[TopicPartition, OffsetAndMetadata] = {}
        for raw_tp, (offset, leader_epoch, metadata) in offsets.items():
            tp = TopicPartition(*raw_tp)
            text = metadata if metadata is not None else NO_METADATA
            if len(text.encode("utf-8")) > self.config.offset_metadata_max_bytes:
                results[tp] = E.offset_metadata_too_large
                continue
            accepted[tp] = OffsetAndMetadata(
                offset=offset,
                leader_epoch=leader_epoch if leader_epoch is not None else NO_LEADER_EPOCH,
                metadata=text,
                commit_timestamp=now,
                expire_timestamp=expire_timestamp_ms,
            )
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
