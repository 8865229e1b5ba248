"""Kafka's ``GroupCoordinator`` (classic protocol): membership and rebalances.

The coordinator answers JoinGroup, SyncGroup (``group_join.py``, ``group_sync.py``),
Heartbeat and LeaveGroup and validates OffsetCommit; the groups, their offsets and
``__consumer_offsets`` belong to the ``GroupMetadataManager`` it is given, as in Kafka.
What cannot be answered yet is parked: DelayedJoin / InitialDelayedJoin (GroupJoinKey)
and DelayedSync (GroupSyncKey) in the rebalance purgatory, one DelayedHeartbeat per
member (MemberKey) in the heartbeat purgatory.

Every state change that can satisfy a parked operation calls ``check_and_complete`` on
its key at once (a join, a leave, a sync, a heartbeat, a removal); a forgotten call
would leave the operation waiting for its timeout.

Calling convention for handlers: JoinGroup, SyncGroup and OffsetCommit take a
``response_callback`` that is called exactly once, possibly during the call (answered at
once) and possibly later from the timer, another request or the offsets topic's
replication (parked), and the request itself (a ``ParkedRequest``): the coordinator
records where the request waits and how it left (see ``response_callback.py``).
Callbacks must not call back into the coordinator synchronously. Everything else
returns its answer directly.

The coordinator is the broker component of the pair: ``start()`` starts its manager
(which loads the partitions this broker leads and tells the coordinator of every group
loaded or unloaded) and ``stop()`` stops it.

Where this differs from Kafka (all deliberate, all small):

* ``group.initial.rebalance.delay.ms=0`` uses a plain DelayedJoin (complete when all
  known members joined) rather than a zero-length InitialDelayedJoin.
* No parked request is ever left unanswered (a handler future would hang and block
  its connection's response order): a member removed while its SyncGroup is parked gets
  UNKNOWN_MEMBER_ID, and a JoinGroup/SyncGroup superseded by a retry of the same
  member gets REBALANCE_IN_PROGRESS. Kafka drops those callbacks.
* KIP-848 consumer groups are the ``ConsumerGroupCoordinator``'s (``consumer/``); this
  coordinator asks it (``consumer_groups``) whether an id is a consumer group's: then a
  JoinGroup, SyncGroup, Heartbeat or LeaveGroup is a classic member's of that consumer
  group and is served there (Kafka 4's online migration, ``consumer/classic_members.py``),
  and its OffsetCommits are checked against the member epoch there. The migration's
  conversions change this coordinator's group through ``group_migration.py``.
  Transactional offset commits: ``group_txn.py``.
* Streams groups (KIP-1071) are the ``StreamsGroupCoordinator``'s (``streams/``): this
  coordinator hands it the streams groups a load brings (``on_streams_group_loaded``)
  and its members' OffsetCommits to check (member id and epoch).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

import broker.group.group_join as group_join
import broker.group.group_migration as group_migration
import broker.group.group_sync as group_sync
from broker.group.consumer.consumer_group import ConsumerGroup
from broker.group.consumer.coordinator_ports import ClassicGroupMigration
from broker.group.consumer.group_conversion import ClassicMemberSpec
from broker.group.delayed_heartbeat import DelayedHeartbeat
from broker.group.delayed_join import DelayedJoin, InitialDelayedJoin
from broker.group.group_config import GroupConfig
from broker.group.group_log import GROUP_METADATA_TOPIC_NAME
from broker.group.group_metadata import GroupMetadata
from broker.group.group_metadata_manager import CommitValue, GroupMetadataManager
from broker.group.group_state import GroupState
from broker.group.join_params import JoinGroupParams
from broker.group.keys import GroupJoinKey, MemberKey
from broker.group.member_metadata import MemberMetadata
from broker.group.response_callback import ResponseCallback
from broker.group.results import (
    UNKNOWN_MEMBER_ID,
    CommitCallback,
    JoinCallback,
    JoinGroupResult,
    LeaveGroupResult,
    LeaveMemberResult,
    SyncCallback,
    SyncGroupResult,
    TopicPartition,
)
from broker.group.streams.streams_group import StreamsGroup
from broker.server.purgatories import ParkedRequest, PurgatoryName
from purgatory import DelayedOperationPurgatory

log = logging.getLogger("broker.group")

E = ErrorCode


class ConsumerGroups(Protocol):
    """What the classic paths ask of the KIP-848 side (``ConsumerGroupCoordinator``)."""

    def is_consumer_group(self, group_id: str) -> bool: ...

    def maybe_delete_empty_group(self, group_id: str) -> bool: ...

    def validate_offset_commit(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        group_instance_id: str | None = None,
        is_transactional: bool = False,
    ) -> ErrorCode | None: ...

    def on_group_loaded(self, group: ConsumerGroup) -> None: ...

    def on_partition_unloaded(self, partition: int) -> None: ...

    def attach_classic_coordinator(self, classic: ClassicGroupMigration) -> None: ...

    def classic_group_join(
        self, params: JoinGroupParams, callback: ResponseCallback[JoinGroupResult]
    ) -> None: ...

    def classic_group_sync(
        self,
        group_id: str,
        member_id: str,
        instance_id: str | None,
        generation_id: int,
        protocol_type: str | None,
        protocol_name: str | None,
    ) -> SyncGroupResult: ...

    def classic_group_heartbeat(
        self, group_id: str, member_id: str, instance_id: str | None, generation_id: int
    ) -> ErrorCode: ...

    def classic_group_leave(
        self, group_id: str, members: Sequence[tuple[str, str | None]], reason: str | None
    ) -> LeaveGroupResult: ...


class ShareGroups(Protocol):
    """What an unload asks of the share side (``ShareGroupCoordinator``)."""

    def on_partition_unloaded(self, partition: int) -> None: ...


class StreamsGroups(Protocol):
    """What the classic paths ask of the streams side (``StreamsGroupCoordinator``):
    the groups a load brings and an unload takes, and a member's offset commits."""

    def is_streams_group(self, group_id: str) -> bool: ...

    def maybe_delete_empty_group(self, group_id: str) -> bool: ...

    def validate_offset_commit(
        self, group_id: str, member_id: str, member_epoch: int, is_transactional: bool = False
    ) -> ErrorCode | None: ...

    def on_group_loaded(self, group: StreamsGroup) -> None: ...

    def on_partition_unloaded(self, partition: int) -> None: ...


class GroupCoordinator:
    """Runs the classic group protocol for the groups its manager holds."""

    def __init__(
        self,
        config: GroupConfig,
        heartbeat_purgatory: DelayedOperationPurgatory[Any],
        rebalance_purgatory: DelayedOperationPurgatory[Any],
        group_manager: GroupMetadataManager,
        consumer_groups: ConsumerGroups | None = None,
        streams_groups: StreamsGroups | None = None,
    ) -> None:
        self.config = config
        self.streams_groups = streams_groups
        self.heartbeat_purgatory = heartbeat_purgatory
        self.rebalance_purgatory = rebalance_purgatory
        self.group_manager = group_manager
        self.consumer_groups = consumer_groups
        if consumer_groups is not None:
            consumer_groups.attach_classic_coordinator(self)
        # The share groups' coordinator is built later, beside the share partitions it
        # fences members on (``broker/share/share_components.py``): attached then.
        self.share_groups: ShareGroups | None = None

    def attach_share_groups(self, share_groups: ShareGroups) -> None:
        self.share_groups = share_groups

    # ------------------------------------------ online migration (ClassicGroupMigration)
    @property
    def classic_group_max_size(self) -> int:
        return self.config.group_max_size

    def hand_over_to_consumer_group(self, group: GroupMetadata) -> None:
        group_migration.hand_over_to_consumer_group(self, group)

    def take_back_from_consumer_group(
        self, group_id: str, generation_id: int, members: Sequence[ClassicMemberSpec]
    ) -> None:
        group_migration.take_back_from_consumer_group(self, group_id, generation_id, members)

    def _consumer_group(self, group_id: str) -> ConsumerGroups | None:
        """The consumer groups' side when ``group_id`` is a consumer group's."""
        groups = self.consumer_groups
        return groups if groups is not None and groups.is_consumer_group(group_id) else None

    # ============================================================== lifecycle
    async def start(self) -> None:
        """Kafka's ``startup``: load the led partitions, follow leadership, expire."""
        self.group_manager.startup(self)

    async def stop(self) -> None:
        self.group_manager.shutdown()

    def get_group(self, group_id: str) -> GroupMetadata | None:
        return self.group_manager.get_group(group_id)

    # ------------------------------------------- GroupLoadListener (the manager)
    def on_group_loaded(self, group: GroupMetadata) -> None:
        """A group came back from the log: its members must heartbeat from now on."""
        log.info(
            "Loading group metadata for %s with generation %d", group.group_id, group.generation_id
        )
        if group.size > self.config.group_max_size:
            self.prepare_rebalance(
                group,
                f"Freshly-loaded group is over capacity ({self.config.group_max_size}). "
                "Rebalancing in order to give a chance for consumers to commit offsets",
            )
        for member in group.all_member_metadata:
            self.complete_and_schedule_next_heartbeat_expiration(group, member)

    def on_consumer_group_loaded(self, group: ConsumerGroup) -> None:
        """A KIP-848 consumer group came back from the log: its coordinator takes it."""
        if self.consumer_groups is not None:
            self.consumer_groups.on_group_loaded(group)

    def on_consumer_groups_unloaded(self, partition: int) -> None:
        """This broker no longer leads ``partition``: its consumer groups go."""
        if self.consumer_groups is not None:
            self.consumer_groups.on_partition_unloaded(partition)
        if self.streams_groups is not None:
            self.streams_groups.on_partition_unloaded(partition)
        if self.share_groups is not None:
            self.share_groups.on_partition_unloaded(partition)

    def on_streams_group_loaded(self, group: StreamsGroup) -> None:
        """A streams group came back from the log: its coordinator takes it."""
        if self.streams_groups is not None:
            self.streams_groups.on_group_loaded(group)

    def on_group_unloaded(self, group: GroupMetadata) -> None:
        """This broker no longer coordinates ``group``: answer what waits on it."""
        generation = group.generation_id
        log.info("Unloading group metadata for %s with generation %d", group.group_id, generation)
        previous = group.state
        group.transition_to(GroupState.DEAD)
        if previous is GroupState.PREPARING_REBALANCE:
            for member in group.all_member_metadata:
                group.maybe_invoke_join_callback(
                    member, JoinGroupResult(member.member_id, E.not_coordinator)
                )
            self.rebalance_purgatory.check_and_complete(GroupJoinKey(group.group_id))
        elif previous in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            for member in group.all_member_metadata:
                group.maybe_invoke_sync_callback(member, SyncGroupResult(E.not_coordinator))
        for member_id in group.all_members + sorted(group.pending_members):
            self.heartbeat_purgatory.check_and_complete(MemberKey(group.group_id, member_id))
        group_sync.remove_sync_expiration(self, group)

    # ============================================================= JoinGroup
    def handle_join_group(
        self,
        params: JoinGroupParams,
        response_callback: JoinCallback,
        parked_request: ParkedRequest | None = None,
    ) -> None:
        """JoinGroup; ``response_callback`` gets the answer, now or when the join phase
        ends. A request that has to wait is recorded in the Rebalance purgatory."""
        callback = ResponseCallback(response_callback, parked_request)
        if not params.group_id:
            callback(JoinGroupResult(params.member_id, E.invalid_group_id))
            return
        if not (
            self.config.group_min_session_timeout_ms
            <= params.session_timeout_ms
            <= self.config.group_max_session_timeout_ms
        ):
            callback(JoinGroupResult(params.member_id, E.invalid_session_timeout))
            return
        consumer_groups = self._consumer_group(params.group_id)
        if consumer_groups is not None and not consumer_groups.maybe_delete_empty_group(
            # Kafka's maybeDeleteEmptyConsumerGroup: an Empty one becomes classic.
            params.group_id
        ):
            # A classic member of a consumer group (Kafka 4's online migration).
            consumer_groups.classic_group_join(params, callback)
            return
        streams = self.streams_groups
        if (
            streams is not None
            and streams.is_streams_group(params.group_id)
            and not streams.maybe_delete_empty_group(params.group_id)
        ):
            # Kafka's maybeDeleteEmptyStreamsGroup: an Empty one becomes classic; one with
            # members is not a classic group (GroupIdNotFoundException: UNKNOWN_MEMBER_ID).
            callback(JoinGroupResult(params.member_id, E.unknown_member_id))
            return
        is_unknown_member = params.member_id == UNKNOWN_MEMBER_ID
        group = self.group_manager.get_or_maybe_create_group(params.group_id, is_unknown_member)
        if group is None:
            # A member id for a group we do not know: let it reset and rejoin.
            callback(JoinGroupResult(params.member_id, E.unknown_member_id))
            return
        group_join.do_join_group(self, group, params, callback)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            # A join may be the last one the rebalance waits for; if not, it waits too.
            self.rebalance_purgatory.check_and_complete(GroupJoinKey(group.group_id))
            if group.is_in(GroupState.PREPARING_REBALANCE):
                callback.park(PurgatoryName.REBALANCE)

    def validate_current_member(
        self, group: GroupMetadata, member_id: str, group_instance_id: str | None, operation: str
    ) -> ErrorCode | None:
        """Static members must use their current member id; anyone must be a member."""
        if group_instance_id is not None:
            current = group.current_static_member_id(group_instance_id)
            if current is None:
                return E.unknown_member_id
            if current != member_id:
                log.info(
                    "Request memberId=%s for static member with groupInstanceId=%s is fenced "
                    "by current memberId=%s during operation %s",
                    member_id,
                    group_instance_id,
                    current,
                    operation,
                )
                return E.fenced_instance_id
            return None
        if not group.has(member_id):
            return E.unknown_member_id
        return None

    # ============================================================== rebalance
    def maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.can_rebalance:
            self.prepare_rebalance(group, reason)

    def prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        """Enter PreparingRebalance and park the join phase."""
        # Members parked in SyncGroup must rejoin instead.
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            group_sync.reset_and_propagate_assignment_error(self, group, E.rebalance_in_progress)
        group_sync.remove_sync_expiration(self, group)

        delayed: DelayedJoin
        delay_ms = self.config.group_initial_rebalance_delay_ms
        if group.is_in(GroupState.EMPTY) and delay_ms > 0:
            delayed = InitialDelayedJoin(
                self,
                self.rebalance_purgatory,
                group,
                delay_ms,
                delay_ms,
                max(group.rebalance_timeout_ms - delay_ms, 0),
            )
        else:
            delayed = DelayedJoin(self, group, group.rebalance_timeout_ms)
        group.transition_to(GroupState.PREPARING_REBALANCE)
        log.info(
            "Preparing to rebalance group %s in state %s with old generation %d (%s-%d) "
            "(reason: %s)",
            group.group_id,
            group.state,
            group.generation_id,
            GROUP_METADATA_TOPIC_NAME,
            self.group_manager.partition_for(group.group_id),
            reason,
        )
        self.rebalance_purgatory.try_complete_else_watch(delayed, [GroupJoinKey(group.group_id)])

    def _remove_member_and_update_group(
        self, group: GroupMetadata, member: MemberMetadata, reason: str
    ) -> None:
        # A member parked in JoinGroup is told to start over (it may still be alive).
        group.maybe_invoke_join_callback(
            member, JoinGroupResult(UNKNOWN_MEMBER_ID, E.unknown_member_id)
        )
        # Not in Kafka: do not leave a parked SyncGroup unanswered.
        group.maybe_invoke_sync_callback(member, SyncGroupResult(E.unknown_member_id))
        group.remove(member.member_id)
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self.maybe_prepare_rebalance(group, reason)
        elif group.is_in(GroupState.PREPARING_REBALANCE):
            self.rebalance_purgatory.check_and_complete(GroupJoinKey(group.group_id))

    def _remove_pending_member_and_update_group(self, group: GroupMetadata, member_id: str) -> None:
        group.remove(member_id)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            self.rebalance_purgatory.check_and_complete(GroupJoinKey(group.group_id))

    # --------------------------------------------------- DelayedJoin callbacks
    def try_complete_join(self, group: GroupMetadata, force_complete: Callable[[], bool]) -> bool:
        if group.has_all_members_joined:
            return force_complete()
        return False

    def on_complete_join(self, group: GroupMetadata) -> None:
        """End of the join phase: drop who did not rejoin, start the next generation."""
        # Static members keep their place (they may be restarting); dynamic ones go.
        gone = [m for m in group.not_yet_rejoined_members() if not m.is_static_member]
        if gone:
            log.info(
                "Group %s removed dynamic members who haven't joined: %s",
                group.group_id,
                [m.member_id for m in gone],
            )
            for member in gone:
                group.remove(member.member_id)
                self.remove_heartbeat_for_leaving_member(group, member.member_id)

        if group.is_in(GroupState.DEAD):
            log.info("Group %s is dead, skipping rebalance stage", group.group_id)
            return
        if not group.maybe_elect_new_joined_leader() and group.size > 0:
            # Only static members are left and none rejoined: wait another round, until
            # their session timeouts remove them.
            log.error(
                "Group %s could not complete rebalance because no members rejoined",
                group.group_id,
            )
            self.rebalance_purgatory.try_complete_else_watch(
                DelayedJoin(self, group, group.rebalance_timeout_ms),
                [GroupJoinKey(group.group_id)],
            )
            return

        group.init_next_generation()
        partition = self.group_manager.partition_for(group.group_id)
        if group.is_in(GroupState.EMPTY):
            log.info(
                "Group %s with generation %d is now empty (%s-%d)",
                group.group_id,
                group.generation_id,
                GROUP_METADATA_TOPIC_NAME,
                partition,
            )
            group_id = group.group_id

            def on_stored(error: ErrorCode) -> None:
                if error is not E.none:
                    log.warning("Failed to write empty metadata for group %s: %s", group_id, error)

            self.group_manager.store_group(group, {}, on_stored)
            return

        log.info(
            "Stabilized group %s generation %d (%s-%d) with %d members",
            group.group_id,
            group.generation_id,
            GROUP_METADATA_TOPIC_NAME,
            partition,
            group.size,
        )
        for member in group.all_member_metadata:
            group.maybe_invoke_join_callback(
                member, group_join.join_result(group, member.member_id, leader_view=True)
            )
            self.complete_and_schedule_next_heartbeat_expiration(group, member)
            member.is_new = False
            group.add_pending_sync_member(member.member_id)
        group_sync.schedule_pending_sync(self, group)

    # ============================================================= SyncGroup
    def handle_sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        assignments: Mapping[str, bytes],
        response_callback: SyncCallback,
        *,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
        parked_request: ParkedRequest | None = None,
    ) -> None:
        """SyncGroup. The leader's ``assignments`` (member id -> bytes) are stored and
        sent to every member; followers' requests are parked until then.
        ``protocol_type``/``protocol_name`` are checked when given (SyncGroup v5+)."""
        consumer_groups = self._consumer_group(group_id)
        if consumer_groups is not None:
            response_callback(
                consumer_groups.classic_group_sync(
                    group_id,
                    member_id,
                    group_instance_id,
                    generation_id,
                    protocol_type,
                    protocol_name,
                )
            )
            return
        group_sync.handle_sync_group(
            self,
            group_id,
            generation_id,
            member_id,
            group_instance_id,
            assignments,
            ResponseCallback(response_callback, parked_request),
            protocol_type,
            protocol_name,
        )

    # --------------------------------------------------- DelayedSync callbacks
    def try_complete_pending_sync(
        self, group: GroupMetadata, generation_id: int, force_complete: Callable[[], bool]
    ) -> bool:
        return group_sync.try_complete_pending_sync(group, generation_id, force_complete)

    def on_expire_pending_sync(self, group: GroupMetadata, generation_id: int) -> None:
        group_sync.on_expire_pending_sync(self, group, generation_id)

    # ============================================================= Heartbeat
    def handle_heartbeat(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> ErrorCode:
        """Heartbeat: keeps the session alive; REBALANCE_IN_PROGRESS tells a member to
        rejoin."""
        if not group_id:
            return E.invalid_group_id
        consumer_groups = self._consumer_group(group_id)
        if consumer_groups is not None:
            return consumer_groups.classic_group_heartbeat(
                group_id, member_id, group_instance_id, generation_id
            )
        group = self.group_manager.get_group(group_id)
        if group is None:
            return E.unknown_member_id
        if group.is_in(GroupState.DEAD):
            return E.coordinator_not_available
        error = self.validate_current_member(group, member_id, group_instance_id, "heartbeat")
        if error is not None:
            return error
        if generation_id != group.generation_id:
            return E.illegal_generation
        state = group.state
        if state is GroupState.EMPTY:
            return E.unknown_member_id
        member = group.get(member_id)
        self.complete_and_schedule_next_heartbeat_expiration(group, member)
        if state is GroupState.PREPARING_REBALANCE:
            return E.rebalance_in_progress
        return E.none

    def complete_and_schedule_next_heartbeat_expiration(
        self, group: GroupMetadata, member: MemberMetadata
    ) -> None:
        self.complete_and_schedule_next_expiration(group, member, member.session_timeout_ms)

    def complete_and_schedule_next_expiration(
        self, group: GroupMetadata, member: MemberMetadata, timeout_ms: int
    ) -> None:
        """Complete the member's current DelayedHeartbeat and start the next one."""
        key = MemberKey(group.group_id, member.member_id)
        member.heartbeat_satisfied = True
        self.heartbeat_purgatory.check_and_complete(key)
        member.heartbeat_satisfied = False
        self.heartbeat_purgatory.try_complete_else_watch(
            DelayedHeartbeat(self, group, member.member_id, False, timeout_ms), [key]
        )

    def add_pending_member_expiration(
        self, group: GroupMetadata, member_id: str, timeout_ms: int
    ) -> None:
        self.heartbeat_purgatory.try_complete_else_watch(
            DelayedHeartbeat(self, group, member_id, True, timeout_ms),
            [MemberKey(group.group_id, member_id)],
        )

    def remove_heartbeat_for_leaving_member(self, group: GroupMetadata, member_id: str) -> None:
        self.heartbeat_purgatory.check_and_complete(MemberKey(group.group_id, member_id))

    # ---------------------------------------------- DelayedHeartbeat callbacks
    def try_complete_heartbeat(
        self,
        group: GroupMetadata,
        member_id: str,
        is_pending: bool,
        force_complete: Callable[[], bool],
    ) -> bool:
        if group.is_in(GroupState.DEAD):
            return force_complete()
        if is_pending:
            # Done once the id joined, or was dropped (left) meanwhile.
            if group.has(member_id) or not group.is_pending_member(member_id):
                return force_complete()
            return False
        if not group.has(member_id) or group.get(member_id).has_satisfied_heartbeat:
            return force_complete()
        return False

    def on_expire_heartbeat(self, group: GroupMetadata, member_id: str, is_pending: bool) -> None:
        if group.is_in(GroupState.DEAD):
            log.info(
                "Received notification of heartbeat expiration for member %s after group %s "
                "had already been unloaded or deleted.",
                member_id,
                group.group_id,
            )
        elif is_pending:
            if group.is_pending_member(member_id):
                log.info(
                    "Pending member %s in group %s has been removed after session timeout "
                    "expiration.",
                    member_id,
                    group.group_id,
                )
                self._remove_pending_member_and_update_group(group, member_id)
        elif not group.has(member_id):
            log.debug("Member %s has already been removed from the group.", member_id)
        else:
            member = group.get(member_id)
            if not member.has_satisfied_heartbeat:
                log.info(
                    "Member %s in group %s has failed, removing it from the group",
                    member.member_id,
                    group.group_id,
                )
                self._remove_member_and_update_group(
                    group, member, f"removing member {member.member_id} on heartbeat expiration"
                )

    # ============================================================ LeaveGroup
    def handle_leave_group(
        self,
        group_id: str,
        members: Sequence[tuple[str, str | None]],
        reason: str | None = None,
    ) -> LeaveGroupResult:
        """LeaveGroup for ``(member_id, group_instance_id)`` pairs (v3+ carries several;
        an admin may name a static member by instance id alone, member id "")."""
        if not group_id:
            return LeaveGroupResult(E.invalid_group_id, [])
        consumer_groups = self._consumer_group(group_id)
        if consumer_groups is not None:
            return consumer_groups.classic_group_leave(group_id, members, reason)
        group = self.group_manager.get_group(group_id)
        if group is None:
            return LeaveGroupResult(
                E.none, [LeaveMemberResult(m, i, E.unknown_member_id) for m, i in members]
            )
        if group.is_in(GroupState.DEAD):
            return LeaveGroupResult(E.coordinator_not_available, [])
        leave_reason = reason or "not provided"
        results: list[LeaveMemberResult] = []
        for member_id, instance_id in members:
            if member_id == UNKNOWN_MEMBER_ID:
                current = (
                    group.current_static_member_id(instance_id) if instance_id is not None else None
                )
                if current is None:
                    error = E.unknown_member_id
                else:
                    self._remove_current_member_from_group(group, current, leave_reason)
                    error = E.none
            elif group.is_pending_member(member_id):
                self._remove_pending_member_and_update_group(group, member_id)
                self.heartbeat_purgatory.check_and_complete(MemberKey(group.group_id, member_id))
                log.info(
                    "Pending member with memberId=%s has left group %s through explicit "
                    "`LeaveGroup` request",
                    member_id,
                    group.group_id,
                )
                error = E.none
            else:
                validation = self.validate_current_member(
                    group, member_id, instance_id, "leave-group"
                )
                if validation is None:
                    self._remove_current_member_from_group(group, member_id, leave_reason)
                    error = E.none
                else:
                    error = validation
            results.append(LeaveMemberResult(member_id, instance_id, error))
        return LeaveGroupResult(E.none, results)

    def _remove_current_member_from_group(
        self, group: GroupMetadata, member_id: str, reason: str
    ) -> None:
        member = group.get(member_id)
        self._remove_member_and_update_group(
            group, member, f"Removing member {member_id} on LeaveGroup; client reason: {reason}"
        )
        self.remove_heartbeat_for_leaving_member(group, member_id)
        log.info(
            "Member %s has left group %s through explicit `LeaveGroup`; client reason: %s",
            member_id,
            group.group_id,
            reason,
        )

    # =========================================================== OffsetCommit
    def handle_commit_offsets(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: Mapping[tuple[str, int], CommitValue],
        response_callback: CommitCallback,
        *,
        expire_timestamp_ms: int | None = None,
        parked_request: ParkedRequest | None = None,
    ) -> None:
        """OffsetCommit. Members commit with their generation; a consumer using
        ``assign()`` commits with generation -1 and member id "" (accepted while the group
        has no members; that creates the group). ``expire_timestamp_ms`` is for
        OffsetCommit v2-v4 clients that set a retention time.

        ``response_callback`` gets an error per partition: at once when the commit is
        refused, else when the offsets topic's in-sync replicas have the commit (or the
        append failed), which may also be during this call. Meanwhile the request waits
        in the Produce purgatory (the manager's append records it)."""
        tps = [TopicPartition(*tp) for tp in offsets]
        consumer_groups = self._consumer_group(group_id)
        streams = self.streams_groups
        if consumer_groups is not None or (
            streams is not None and streams.is_streams_group(group_id)
        ):
            # A KIP-848 or streams group: its member epoch is checked there; its offsets
            # are kept in the one offsets store, an Empty classic group of the same id.
            validator = consumer_groups if consumer_groups is not None else streams
            assert validator is not None
            error = validator.validate_offset_commit(group_id, member_id, generation_id)
            if error is not None:
                response_callback(dict.fromkeys(tps, error))
                return
            holder = self.group_manager.get_or_maybe_create_group(group_id, True)
            assert holder is not None
            self.group_manager.store_offsets(
                holder, offsets, response_callback, parked_request=parked_request
            )
            return
        group = self.group_manager.get_or_maybe_create_group(group_id, False)
        if group is None:
            if generation_id >= 0:
                response_callback(dict.fromkeys(tps, E.illegal_generation))
                return
            log.info("Creating simple consumer group %s via manual offset commit.", group_id)
            group = self.group_manager.get_or_maybe_create_group(group_id, True)
            assert group is not None
        error = self._validate_offset_commit(group, generation_id, member_id, group_instance_id)
        if error is not None:
            response_callback(dict.fromkeys(tps, error))
            return
        state = group.state
        if state is GroupState.COMPLETING_REBALANCE:
            # The member knows the new generation but has no assignment yet.
            response_callback(dict.fromkeys(tps, E.rebalance_in_progress))
            return
        if state in (GroupState.STABLE, GroupState.PREPARING_REBALANCE):
            # Commits count as a sign of life; during PreparingRebalance they are still
            # accepted (the heartbeat response tells the member to rejoin).
            self.complete_and_schedule_next_heartbeat_expiration(group, group.get(member_id))
        self.group_manager.store_offsets(
            group,
            offsets,
            response_callback,
            expire_timestamp_ms=expire_timestamp_ms,
            parked_request=parked_request,
        )

    def _validate_offset_commit(
        self,
        group: GroupMetadata,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
    ) -> ErrorCode | None:
        if group.is_in(GroupState.DEAD):
            return E.coordinator_not_available
        if generation_id < 0 and group.is_in(GroupState.EMPTY):
            return None  # admin client or a consumer without group management
        if generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID or group_instance_id is not None:
            error = self.validate_current_member(
                group, member_id, group_instance_id, "offset-commit"
            )
            if error is not None:
                return error
            if generation_id != group.generation_id:
                return E.illegal_generation
            return None
        # Generation -1 without a member id while the group has members.
        return E.unknown_member_id
