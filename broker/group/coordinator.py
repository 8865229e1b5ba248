"""The group coordinator: Kafka's classic group protocol, synchronous and clock-injected.

This is Kafka's ``GroupCoordinator`` (3.x, classic protocol) minus the IO: it owns the
groups, answers JoinGroup/SyncGroup/Heartbeat/LeaveGroup, OffsetCommit/OffsetFetch and
the admin APIs, and parks what cannot be answered yet in the purgatories:

* rebalance purgatory: :class:`DelayedJoin` / :class:`InitialDelayedJoin` keyed by
  :class:`GroupJoinKey`, and :class:`DelayedSync` keyed by :class:`GroupSyncKey`
  (a separate ``sync_purgatory`` may be given; Kafka shares the rebalance one);
* heartbeat purgatory: one :class:`DelayedHeartbeat` per member, keyed by
  :class:`MemberKey`.

Every state change that can satisfy a parked operation calls ``check_and_complete`` on
its key at once (a join, a leave, a sync, a heartbeat, a removal); a forgotten call
would leave the operation waiting for its timeout.

Calling convention for handlers: JoinGroup, SyncGroup and OffsetCommit take a
``response_callback`` that is called exactly once, possibly during the call (answered at
once) and possibly later from the timer, another request or the offsets topic's
replication (parked). The handler layer turns it into an ``asyncio.Future``. Callbacks
must not call back into the coordinator synchronously. Everything else returns its
answer directly.

Persistence: records for ``__consumer_offsets`` go to an injected
:class:`~broker.group.group_log.GroupLog` (see that module for the encoding) and are
replayed with :meth:`GroupCoordinator.load`. As in Kafka, commits and group metadata are
appended with acks=all and the coordinator acts on them only when the log calls back:
committed offsets enter the cache, and a SyncGroup's assignment is handed out, only once
the in-sync replicas have the records; a failed append is answered with Kafka's mapped
error (:func:`commit_error`, :func:`store_group_error`).

Where this differs from Kafka (all deliberate, all small):

* ``group.initial.rebalance.delay.ms=0`` uses a plain DelayedJoin (complete when all
  known members joined) rather than a zero-length InitialDelayedJoin.
* No parked request is ever left unanswered (a handler future would hang and block
  its connection's response order): a member removed while its SyncGroup is parked gets
  UNKNOWN_MEMBER_ID, and a JoinGroup/SyncGroup superseded by a retry of the same
  member gets REBALANCE_IN_PROGRESS. Kafka drops those callbacks.
* Offsets waiting for their append are not tracked as "pending" (Kafka's
  ``pendingOffsetCommits``): OffsetFetch shows the last replicated commit and never
  answers UNSTABLE_OFFSET_COMMIT; commits to one partition complete in append order.
* A ``GroupLog`` that raises (a bug, not an append error) counts as an append that
  failed with UNKNOWN_SERVER_ERROR.
* No coordinator loading/emigration (one coordinator owns all groups), no
  transactional offset commits, no KIP-848 consumer groups.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from broker.group.delayed_heartbeat import DelayedHeartbeat
from broker.group.delayed_join import DelayedJoin, InitialDelayedJoin
from broker.group.delayed_sync import DelayedSync
from broker.group.group_config import NEW_MEMBER_JOIN_TIMEOUT_MS, GroupConfig
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
from broker.group.group_state import GroupState, parse_state
from broker.group.keys import GroupJoinKey, GroupSyncKey, MemberKey
from broker.group.member_metadata import MemberMetadata, Protocols
from broker.group.offsets import NO_LEADER_EPOCH, NO_METADATA, NO_OFFSET, OffsetAndMetadata
from broker.group.partition_hash import partition_for
from broker.group.results import (
    NO_PROTOCOL,
    UNKNOWN_MEMBER_ID,
    CommitCallback,
    GroupOverview,
    GroupSummary,
    JoinCallback,
    JoinGroupResult,
    LeaveGroupResult,
    LeaveMemberResult,
    OffsetFetchPartition,
    SyncCallback,
    SyncGroupResult,
    TopicPartition,
)
from purgatory import Clock, DelayedOperationPurgatory

log = logging.getLogger("broker.group")

E = ErrorCode

# What a commit carries per partition: (offset, leader_epoch, metadata).
CommitValue = tuple[int, int, str | None]


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


class GroupCoordinator:
    """Owns every classic group of this broker. See the module docstring."""

    def __init__(
        self,
        clock: Clock,
        heartbeat_purgatory: DelayedOperationPurgatory[Any],
        rebalance_purgatory: DelayedOperationPurgatory[Any],
        sync_purgatory: DelayedOperationPurgatory[Any] | None = None,
        config: GroupConfig | None = None,
        group_log: GroupLog | None = None,
        uuid_factory: Callable[[], str] | None = None,
    ) -> None:
        self.clock = clock
        self.heartbeat_purgatory = heartbeat_purgatory
        self.rebalance_purgatory = rebalance_purgatory
        self.sync_purgatory = sync_purgatory if sync_purgatory is not None else rebalance_purgatory
        self.config = config if config is not None else GroupConfig()
        self.group_log = group_log
        self._uuid_factory = uuid_factory
        self._groups: dict[str, GroupMetadata] = {}

    # ================================================================ lookup
    def partition_for(self, group_id: str) -> int:
        """The ``__consumer_offsets`` partition holding ``group_id``'s records."""
        return partition_for(group_id, self.config.offsets_topic_num_partitions)

    def get_group(self, group_id: str) -> GroupMetadata | None:
        return self._groups.get(group_id)

    @property
    def groups(self) -> list[GroupMetadata]:
        return list(self._groups.values())

    def _new_group(self, group_id: str) -> GroupMetadata:
        group = GroupMetadata(group_id, GroupState.EMPTY, self.clock, self._uuid_factory)
        self._groups[group_id] = group
        return group

    # ============================================================= JoinGroup
    def handle_join_group(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        require_known_member_id: bool,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: Sequence[tuple[str, bytes]],
        response_callback: JoinCallback,
        *,
        support_skipping_assignment: bool = False,
        reason: str | None = None,
    ) -> None:
        """JoinGroup. ``require_known_member_id`` is True from JoinGroup v4;
        ``support_skipping_assignment`` from v9. JoinGroup v0 has no rebalance timeout:
        pass the session timeout, as Kafka does."""
        protocols = [(name, bytes(meta)) for name, meta in protocols]
        if not group_id:
            response_callback(JoinGroupResult(member_id, E.invalid_group_id))
            return
        if not (
            self.config.group_min_session_timeout_ms
            <= session_timeout_ms
            <= self.config.group_max_session_timeout_ms
        ):
            response_callback(JoinGroupResult(member_id, E.invalid_session_timeout))
            return
        is_unknown_member = member_id == UNKNOWN_MEMBER_ID
        group = self._groups.get(group_id)
        if group is None:
            if not is_unknown_member:
                # A member id for a group we do not know: let it reset and rejoin.
                response_callback(JoinGroupResult(member_id, E.unknown_member_id))
                return
            group = self._new_group(group_id)

        join_reason = reason or "not provided"
        if not self._accept_joining_member(group, member_id):
            group.remove(member_id)
            response_callback(JoinGroupResult(UNKNOWN_MEMBER_ID, E.group_max_size_reached))
        elif is_unknown_member:
            self._do_new_member_join_group(
                group,
                group_instance_id,
                require_known_member_id,
                support_skipping_assignment,
                client_id,
                client_host,
                rebalance_timeout_ms,
                session_timeout_ms,
                protocol_type,
                protocols,
                response_callback,
                join_reason,
            )
        else:
            self._do_current_member_join_group(
                group,
                member_id,
                group_instance_id,
                client_id,
                client_host,
                rebalance_timeout_ms,
                session_timeout_ms,
                protocol_type,
                protocols,
                response_callback,
                join_reason,
            )
        # A join may be the last one the rebalance waits for.
        if group.is_in(GroupState.PREPARING_REBALANCE):
            self.rebalance_purgatory.check_and_complete(GroupJoinKey(group.group_id))

    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        """group.max.size, counted Kafka's way for each state."""
        max_size = self.config.group_max_size
        if group.is_in(GroupState.EMPTY, GroupState.DEAD):
            return True
        if group.is_in(GroupState.PREPARING_REBALANCE):
            # Members already parked count; the last to rejoin are the ones turned away.
            return (
                group.has(member_id) and group.get(member_id).is_awaiting_join
            ) or group.num_awaiting < max_size
        return group.has(member_id) or group.size < max_size

    def _do_new_member_join_group(
        self,
        group: GroupMetadata,
        group_instance_id: str | None,
        require_known_member_id: bool,
        support_skipping_assignment: bool,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: Protocols,
        callback: JoinCallback,
        reason: str,
    ) -> None:
        if group.is_in(GroupState.DEAD):
            callback(JoinGroupResult(UNKNOWN_MEMBER_ID, E.coordinator_not_available))
            return
        if not group.supports_protocols(protocol_type, {name for name, _ in protocols}):
            callback(JoinGroupResult(UNKNOWN_MEMBER_ID, E.inconsistent_group_protocol))
            return
        new_member_id = group.generate_member_id(client_id, group_instance_id)
        if group_instance_id is not None:
            old_member_id = group.current_static_member_id(group_instance_id)
            if old_member_id is not None:
                log.info(
                    "Static member with groupInstanceId=%s and unknown member id joins group %s "
                    "in %s state. Replacing previously mapped member %s with this "
                    "groupInstanceId.",
                    group_instance_id,
                    group.group_id,
                    group.state,
                    old_member_id,
                )
                self._update_static_member_and_rebalance(
                    group,
                    old_member_id,
                    new_member_id,
                    group_instance_id,
                    protocols,
                    rebalance_timeout_ms,
                    session_timeout_ms,
                    callback,
                    reason,
                    support_skipping_assignment,
                )
            else:
                self._add_member_and_rebalance(
                    rebalance_timeout_ms,
                    session_timeout_ms,
                    new_member_id,
                    group_instance_id,
                    client_id,
                    client_host,
                    protocol_type,
                    protocols,
                    group,
                    callback,
                    reason,
                )
        elif require_known_member_id:
            # KIP-394: hand out the id first, so a client that times out and retries
            # does not leave a ghost member per attempt.
            log.info(
                "Dynamic member with unknown member id joins group %s in %s state. Created a "
                "new member id %s and request the member to rejoin with this id.",
                group.group_id,
                group.state,
                new_member_id,
            )
            group.add_pending_member(new_member_id)
            self._add_pending_member_expiration(group, new_member_id, session_timeout_ms)
            callback(JoinGroupResult(new_member_id, E.member_id_required))
        else:
            self._add_member_and_rebalance(
                rebalance_timeout_ms,
                session_timeout_ms,
                new_member_id,
                None,
                client_id,
                client_host,
                protocol_type,
                protocols,
                group,
                callback,
                reason,
            )

    def _validate_current_member(
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

    def _do_current_member_join_group(
        self,
        group: GroupMetadata,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: Protocols,
        callback: JoinCallback,
        reason: str,
    ) -> None:
        if group.is_in(GroupState.DEAD):
            callback(JoinGroupResult(member_id, E.coordinator_not_available))
            return
        if not group.supports_protocols(protocol_type, {name for name, _ in protocols}):
            callback(JoinGroupResult(member_id, E.inconsistent_group_protocol))
            return
        if group.is_pending_member(member_id):
            if group_instance_id is not None:
                # Pending ids are only handed to dynamic members; Kafka throws here.
                log.error(
                    "Unexpected JoinGroup with groupInstanceId=%s for pending member %s",
                    group_instance_id,
                    member_id,
                )
                callback(JoinGroupResult(member_id, E.unknown_server_error))
                return
            self._add_member_and_rebalance(
                rebalance_timeout_ms,
                session_timeout_ms,
                member_id,
                None,
                client_id,
                client_host,
                protocol_type,
                protocols,
                group,
                callback,
                reason,
            )
            return
        error = self._validate_current_member(group, member_id, group_instance_id, "join-group")
        if error is not None:
            callback(JoinGroupResult(member_id, error))
            return
        member = group.get(member_id)
        state = group.state
        if state is GroupState.PREPARING_REBALANCE:
            self._update_member_and_rebalance(
                group, member, protocols, rebalance_timeout_ms, session_timeout_ms, callback
            )
        elif state is GroupState.COMPLETING_REBALANCE:
            if member.matches(protocols):
                # Probably lost the first JoinGroup response: send it again.
                callback(self._join_result(group, member_id, leader_view=True))
            else:
                self._update_member_and_rebalance(
                    group, member, protocols, rebalance_timeout_ms, session_timeout_ms, callback
                )
        elif state is GroupState.STABLE:
            if group.is_leader(member_id) or not member.matches(protocols):
                # The leader rejoins to have topic-metadata changes reassigned; anyone
                # with new metadata needs a new assignment.
                self._update_member_and_rebalance(
                    group, member, protocols, rebalance_timeout_ms, session_timeout_ms, callback
                )
            else:
                # A follower with nothing new: current generation, go sync.
                callback(self._join_result(group, member_id, leader_view=False))
        else:
            log.warning(
                "Attempt to add rejoining member %s of group %s in unexpected group state %s",
                member_id,
                group.group_id,
                state,
            )
            callback(JoinGroupResult(member_id, E.unknown_member_id))

    def _join_result(
        self, group: GroupMetadata, member_id: str, *, leader_view: bool
    ) -> JoinGroupResult:
        """The current generation as a JoinGroup response; the member list only for the
        leader (and only when ``leader_view``)."""
        members = (
            group.current_member_metadata() if leader_view and group.is_leader(member_id) else []
        )
        return JoinGroupResult(
            member_id=member_id,
            error=E.none,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader_id=group.leader_or_empty,
            members=members,
        )

    def _add_member_and_rebalance(
        self,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        protocol_type: str,
        protocols: Protocols,
        group: GroupMetadata,
        callback: JoinCallback,
        reason: str,
    ) -> None:
        member = MemberMetadata(
            member_id=member_id,
            group_instance_id=group_instance_id,
            client_id=client_id,
            client_host=client_host,
            rebalance_timeout_ms=rebalance_timeout_ms,
            session_timeout_ms=session_timeout_ms,
            protocol_type=protocol_type,
            supported_protocols=list(protocols),
            is_new=True,
        )
        # A newcomer during the group's first rebalance extends InitialDelayedJoin.
        if group.is_in(GroupState.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, callback)
        # A new member cannot heartbeat until its JoinGroup is answered, and a client
        # that gave up and retried would leave a ghost: bound it by the new-member timeout.
        self._complete_and_schedule_next_expiration(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(
            group,
            f"Adding new member {member_id} with group instance id {group_instance_id}; "
            f"client reason: {reason}",
        )

    def _update_static_member_and_rebalance(
        self,
        group: GroupMetadata,
        old_member_id: str,
        new_member_id: str,
        group_instance_id: str,
        protocols: Protocols,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        callback: JoinCallback,
        reason: str,
        support_skipping_assignment: bool,
    ) -> None:
        """A known static member restarted: swap in its new member id (KIP-345)."""
        current_leader = group.leader_or_empty
        member = group.replace_static_member(group_instance_id, old_member_id, new_member_id)
        # The old id's heartbeat watch is moot now; let it go rather than linger.
        self.heartbeat_purgatory.check_and_complete(MemberKey(group.group_id, old_member_id))
        self._complete_and_schedule_next_heartbeat_expiration(group, member)

        old_protocols = member.supported_protocols
        old_rebalance_timeout_ms = member.rebalance_timeout_ms
        old_session_timeout_ms = member.session_timeout_ms
        group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, callback)

        state = group.state
        if state is GroupState.STABLE:
            if group.protocol_name == group.select_protocol():
                # Nothing the assignment depends on changed: no rebalance. Persist the new
                # member id, then answer with the current generation.
                log.info(
                    "Static member which joins during Stable stage and doesn't affect "
                    "selectProtocol will not trigger rebalance."
                )

                # Answered once the new member id is replicated (Kafka answers from
                # storeGroup's callback too).
                def on_stored(error: ErrorCode) -> None:
                    if error is not E.none:
                        log.warning(
                            "Failed to persist metadata for group %s: %s", group.group_id, error
                        )
                        if group.current_static_member_id(group_instance_id) != new_member_id:
                            # Replaced or removed while the append waited: nothing to undo.
                            callback(JoinGroupResult(member_id=UNKNOWN_MEMBER_ID, error=error))
                            return
                        group.update_member(
                            member,
                            old_protocols,
                            old_rebalance_timeout_ms,
                            old_session_timeout_ms,
                            None,
                        )
                        old = group.replace_static_member(
                            group_instance_id, new_member_id, old_member_id
                        )
                        self._complete_and_schedule_next_heartbeat_expiration(group, old)
                        callback(
                            JoinGroupResult(
                                member_id=UNKNOWN_MEMBER_ID,
                                error=error,
                                generation_id=group.generation_id,
                                protocol_type=group.protocol_type,
                                protocol_name=group.protocol_name,
                                leader_id=current_leader,
                            )
                        )
                    elif support_skipping_assignment:
                        # JoinGroup v9+: tell the leader it leads, but that it must not assign.
                        is_leader = group.is_leader(new_member_id)
                        group.maybe_invoke_join_callback(
                            member,
                            JoinGroupResult(
                                member_id=new_member_id,
                                error=E.none,
                                generation_id=group.generation_id,
                                protocol_type=group.protocol_type,
                                protocol_name=group.protocol_name,
                                leader_id=group.leader_or_empty,
                                skip_assignment=is_leader,
                                members=group.current_member_metadata() if is_leader else [],
                            ),
                        )
                    else:
                        # Older clients: report the *old* leader id, so a returning leader does
                        # not think it leads and run an assignment the group would ignore.
                        group.maybe_invoke_join_callback(
                            member,
                            JoinGroupResult(
                                member_id=new_member_id,
                                error=E.none,
                                generation_id=group.generation_id,
                                protocol_type=group.protocol_type,
                                protocol_name=group.protocol_name,
                                leader_id=current_leader,
                            ),
                        )

                self._store_group(
                    group,
                    {m.member_id: m.assignment for m in group.all_member_metadata},
                    on_stored,
                )
            else:
                self._maybe_prepare_rebalance(
                    group,
                    f"Group's selectedProtocol will change because static member "
                    f"{new_member_id} with instance id {group_instance_id} joined with change "
                    f"of protocol; client reason: {reason}",
                )
        elif state is GroupState.COMPLETING_REBALANCE:
            # The leader may be assigning to the old member id right now: start over.
            self._prepare_rebalance(
                group,
                f"Updating metadata for static member {new_member_id} with instance id "
                f"{group_instance_id}; client reason: {reason}",
            )
        elif state is GroupState.PREPARING_REBALANCE:
            pass  # it is now parked like everyone else
        else:
            raise RuntimeError(
                f"Group {group.group_id} was not supposed to be in the state {state} when the "
                f"unknown static member {group_instance_id} rejoins."
            )

    def _update_member_and_rebalance(
        self,
        group: GroupMetadata,
        member: MemberMetadata,
        protocols: Protocols,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        callback: JoinCallback,
    ) -> None:
        group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, callback)
        self._maybe_prepare_rebalance(group, f"Member {member.member_id} rejoining")

    def _maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.can_rebalance:
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        """Enter PreparingRebalance and park the join phase."""
        # Members parked in SyncGroup must rejoin instead.
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, E.rebalance_in_progress)
        self._remove_sync_expiration(group)

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
            self.partition_for(group.group_id),
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
            self._maybe_prepare_rebalance(group, reason)
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
                self._remove_heartbeat_for_leaving_member(group, member.member_id)

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
        if group.is_in(GroupState.EMPTY):
            log.info(
                "Group %s with generation %d is now empty (%s-%d)",
                group.group_id,
                group.generation_id,
                GROUP_METADATA_TOPIC_NAME,
                self.partition_for(group.group_id),
            )
            group_id = group.group_id

            def on_stored(error: ErrorCode) -> None:
                if error is not E.none:
                    log.warning("Failed to write empty metadata for group %s: %s", group_id, error)

            self._store_group(group, {}, on_stored)
            return

        log.info(
            "Stabilized group %s generation %d (%s-%d) with %d members",
            group.group_id,
            group.generation_id,
            GROUP_METADATA_TOPIC_NAME,
            self.partition_for(group.group_id),
            group.size,
        )
        for member in group.all_member_metadata:
            group.maybe_invoke_join_callback(
                member, self._join_result(group, member.member_id, leader_view=True)
            )
            self._complete_and_schedule_next_heartbeat_expiration(group, member)
            member.is_new = False
            group.add_pending_sync_member(member.member_id)
        self._schedule_pending_sync(group)

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
    ) -> None:
        """SyncGroup. The leader's ``assignments`` (member id -> bytes) are stored and
        sent to every member; followers' requests are parked until then.
        ``protocol_type``/``protocol_name`` are checked when given (SyncGroup v5+)."""
        if not group_id:
            response_callback(SyncGroupResult(E.invalid_group_id))
            return
        group = self._groups.get(group_id)
        if group is None:
            response_callback(SyncGroupResult(E.unknown_member_id))
            return
        error = self._validate_sync_group(
            group, generation_id, member_id, protocol_type, protocol_name, group_instance_id
        )
        if error is not None:
            response_callback(SyncGroupResult(error))
            return
        state = group.state
        if state is GroupState.EMPTY:
            response_callback(SyncGroupResult(E.unknown_member_id))
        elif state is GroupState.PREPARING_REBALANCE:
            response_callback(SyncGroupResult(E.rebalance_in_progress))
        elif state is GroupState.COMPLETING_REBALANCE:
            member = group.get(member_id)
            superseded = member.awaiting_sync_callback
            member.awaiting_sync_callback = response_callback
            if superseded is not None:
                # A retried SyncGroup replaces the parked one; answer the old one.
                superseded(SyncGroupResult(E.rebalance_in_progress))
            self._remove_pending_sync_member(group, member_id)
            if group.is_leader(member_id):
                log.info(
                    "Assignment received from leader %s for group %s for generation %d. The "
                    "group has %d members, %d of which are static.",
                    member_id,
                    group.group_id,
                    group.generation_id,
                    group.size,
                    len(group.all_static_members),
                )
                assignment = {m: bytes(assignments.get(m, b"")) for m in group.all_members}
                missing = [m for m in group.all_members if m not in assignments]
                if missing:
                    log.warning(
                        "Setting empty assignments for members %s of %s for generation %d",
                        missing,
                        group.group_id,
                        group.generation_id,
                    )
                generation = group.generation_id

                def on_stored(store_error: ErrorCode) -> None:
                    # Members may have joined or left while the ISR caught up: only the
                    # rebalance this assignment belongs to may complete with it.
                    if not (
                        group.is_in(GroupState.COMPLETING_REBALANCE)
                        and group.generation_id == generation
                    ):
                        return
                    if store_error is not E.none:
                        self._reset_and_propagate_assignment_error(group, store_error)
                        self._maybe_prepare_rebalance(
                            group,
                            f"Error {store_error.name} when storing group assignment during "
                            f"SyncGroup (member: {member_id})",
                        )
                    else:
                        self._set_and_propagate_assignment(group, assignment)
                        group.transition_to(GroupState.STABLE)

                self._store_group(group, assignment, on_stored)
        elif state is GroupState.STABLE:
            self._remove_pending_sync_member(group, member_id)
            member = group.get(member_id)
            response_callback(
                SyncGroupResult(E.none, member.assignment, group.protocol_type, group.protocol_name)
            )
            self._complete_and_schedule_next_heartbeat_expiration(group, member)
        else:
            raise RuntimeError(f"Reached unexpected condition for Dead group {group.group_id}")

    def _validate_sync_group(
        self,
        group: GroupMetadata,
        generation_id: int,
        member_id: str,
        protocol_type: str | None,
        protocol_name: str | None,
        group_instance_id: str | None,
    ) -> ErrorCode | None:
        if group.is_in(GroupState.DEAD):
            return E.coordinator_not_available
        error = self._validate_current_member(group, member_id, group_instance_id, "sync-group")
        if error is not None:
            return error
        if generation_id != group.generation_id:
            return E.illegal_generation
        if protocol_type is not None and group.protocol_type != protocol_type:
            return E.inconsistent_group_protocol
        if protocol_name is not None and group.protocol_name != protocol_name:
            return E.inconsistent_group_protocol
        return None

    def _set_and_propagate_assignment(
        self, group: GroupMetadata, assignment: Mapping[str, bytes]
    ) -> None:
        for member in group.all_member_metadata:
            member.assignment = assignment.get(member.member_id, b"")
        self._propagate_assignment(group, E.none)

    def _reset_and_propagate_assignment_error(self, group: GroupMetadata, error: ErrorCode) -> None:
        for member in group.all_member_metadata:
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: GroupMetadata, error: ErrorCode) -> None:
        ok = error is E.none
        for member in group.all_member_metadata:
            result = SyncGroupResult(
                error,
                member.assignment,
                group.protocol_type if ok else None,
                group.protocol_name if ok else None,
            )
            if group.maybe_invoke_sync_callback(member, result):
                # Its session may have run out while it was parked (parked members do not
                # expire): give it a fresh one from now.
                self._complete_and_schedule_next_heartbeat_expiration(group, member)

    # ------------------------------------------------------------ pending sync
    def _remove_pending_sync_member(self, group: GroupMetadata, member_id: str) -> None:
        group.remove_pending_sync_member(member_id)
        self.sync_purgatory.check_and_complete(GroupSyncKey(group.group_id))

    def _remove_sync_expiration(self, group: GroupMetadata) -> None:
        group.clear_pending_sync_members()
        self.sync_purgatory.check_and_complete(GroupSyncKey(group.group_id))

    def _schedule_pending_sync(self, group: GroupMetadata) -> None:
        self.sync_purgatory.try_complete_else_watch(
            DelayedSync(self, group, group.generation_id, group.rebalance_timeout_ms),
            [GroupSyncKey(group.group_id)],
        )

    def try_complete_pending_sync(
        self, group: GroupMetadata, generation_id: int, force_complete: Callable[[], bool]
    ) -> bool:
        if generation_id != group.generation_id or group.is_in(
            GroupState.DEAD, GroupState.EMPTY, GroupState.PREPARING_REBALANCE
        ):
            return force_complete()
        if group.has_received_sync_from_all_members:
            return force_complete()
        return False

    def on_expire_pending_sync(self, group: GroupMetadata, generation_id: int) -> None:
        """The rebalance timeout passed since the join phase: evict who never synced."""
        if generation_id != group.generation_id:
            log.error(
                "Received unexpected notification of sync expiration for %s with an old "
                "generation %d while the group has %d.",
                group.group_id,
                generation_id,
                group.generation_id,
            )
            return
        if not group.is_in(GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            log.error(
                "Received unexpected notification of sync expiration after group %s already "
                "transitioned to the %s state.",
                group.group_id,
                group.state,
            )
            return
        if group.has_received_sync_from_all_members:
            return
        pending = sorted(group.all_pending_sync_members)
        for member_id in pending:
            if group.has(member_id):
                member = group.get(member_id)
                group.maybe_invoke_sync_callback(member, SyncGroupResult(E.unknown_member_id))
            group.remove(member_id)
            self._remove_heartbeat_for_leaving_member(group, member_id)
        log.info(
            "Group %s removed members who haven't sent their sync request: %s",
            group.group_id,
            pending,
        )
        self._prepare_rebalance(group, f"Removing {pending} on pending sync request expiration")

    # ============================================================= Heartbeat
    def handle_heartbeat(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> ErrorCode:
        """Heartbeat: keeps the session alive; REBALANCE_IN_PROGRESS tells a member to
        rejoin."""
        if not group_id:
            return E.invalid_group_id
        group = self._groups.get(group_id)
        if group is None:
            return E.unknown_member_id
        if group.is_in(GroupState.DEAD):
            return E.coordinator_not_available
        error = self._validate_current_member(group, member_id, group_instance_id, "heartbeat")
        if error is not None:
            return error
        if generation_id != group.generation_id:
            return E.illegal_generation
        state = group.state
        if state is GroupState.EMPTY:
            return E.unknown_member_id
        member = group.get(member_id)
        self._complete_and_schedule_next_heartbeat_expiration(group, member)
        if state is GroupState.PREPARING_REBALANCE:
            return E.rebalance_in_progress
        return E.none

    def _complete_and_schedule_next_heartbeat_expiration(
        self, group: GroupMetadata, member: MemberMetadata
    ) -> None:
        self._complete_and_schedule_next_expiration(group, member, member.session_timeout_ms)

    def _complete_and_schedule_next_expiration(
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

    def _add_pending_member_expiration(
        self, group: GroupMetadata, member_id: str, timeout_ms: int
    ) -> None:
        self.heartbeat_purgatory.try_complete_else_watch(
            DelayedHeartbeat(self, group, member_id, True, timeout_ms),
            [MemberKey(group.group_id, member_id)],
        )

    def _remove_heartbeat_for_leaving_member(self, group: GroupMetadata, member_id: str) -> None:
        self.heartbeat_purgatory.check_and_complete(MemberKey(group.group_id, member_id))

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
        group = self._groups.get(group_id)
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
                validation = self._validate_current_member(
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
        self._remove_heartbeat_for_leaving_member(group, member_id)
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
    ) -> None:
        """OffsetCommit. Members commit with their generation; a consumer using
        ``assign()`` commits with generation -1 and member id "" (accepted while the group
        has no members; that creates the group). ``expire_timestamp_ms`` is for
        OffsetCommit v2-v4 clients that set a retention time.

        ``response_callback`` gets an error per partition: at once when the commit is
        refused, else when the offsets topic's in-sync replicas have the commit (or the
        append failed), which may also be during this call."""
        tps = [TopicPartition(*tp) for tp in offsets]
        group = self._groups.get(group_id)
        if group is None:
            if generation_id < 0:
                log.info("Creating simple consumer group %s via manual offset commit.", group_id)
                group = self._new_group(group_id)
            else:
                response_callback(dict.fromkeys(tps, E.illegal_generation))
                return
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
            self._complete_and_schedule_next_heartbeat_expiration(group, group.get(member_id))
        self._store_offsets(group, offsets, expire_timestamp_ms, response_callback)

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
            error = self._validate_current_member(
                group, member_id, group_instance_id, "offset-commit"
            )
            if error is not None:
                return error
            if generation_id != group.generation_id:
                return E.illegal_generation
            return None
        # Generation -1 without a member id while the group has members.
        return E.unknown_member_id

    def _store_offsets(
        self,
        group: GroupMetadata,
        offsets: Mapping[tuple[str, int], CommitValue],
        expire_timestamp_ms: int | None,
        response_callback: CommitCallback,
    ) -> None:
        """Kafka's ``storeOffsets``: the cache changes only once the append succeeded."""
        now = self.clock.now_ms()
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
            response_callback(results)
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
            response_callback(results)

        self._append(group.group_id, records, on_appended)

    # ============================================================ OffsetFetch
    def handle_fetch_offsets(
        self, group_id: str, partitions: Iterable[tuple[str, int]] | None = None
    ) -> tuple[ErrorCode, dict[TopicPartition, OffsetFetchPartition]]:
        """OffsetFetch: committed offsets of ``partitions`` (None: all the group has).
        A partition without a commit gets offset -1, as in Kafka."""
        group = self._groups.get(group_id)
        stored: Mapping[TopicPartition, OffsetAndMetadata] = (
            group.offsets if group is not None and not group.is_in(GroupState.DEAD) else {}
        )
        wanted = list(stored) if partitions is None else [TopicPartition(*tp) for tp in partitions]
        result: dict[TopicPartition, OffsetFetchPartition] = {}
        for tp in wanted:
            om = stored.get(tp)
            if om is None:
                result[tp] = OffsetFetchPartition(NO_OFFSET, NO_LEADER_EPOCH, NO_METADATA, E.none)
            else:
                result[tp] = OffsetFetchPartition(om.offset, om.leader_epoch, om.metadata, E.none)
        return E.none, result

    # ====================================================== admin: describe/list
    def handle_describe_groups(
        self, group_ids: Iterable[str], *, not_found_as_error: bool = False
    ) -> list[GroupSummary]:
        """DescribeGroups. An unknown group is reported in state Dead, or with
        GROUP_ID_NOT_FOUND when ``not_found_as_error`` (DescribeGroups v6+)."""
        out = []
        for group_id in group_ids:
            group = self._groups.get(group_id)
            if group is None or group.is_in(GroupState.DEAD):
                out.append(
                    GroupSummary(
                        group_id,
                        E.group_id_not_found if not_found_as_error else E.none,
                        GroupState.DEAD.value,
                        "",
                        NO_PROTOCOL,
                    )
                )
                continue
            if group.is_in(GroupState.STABLE):
                protocol = group.protocol_name
                members = [m.summary(protocol) for m in group.all_member_metadata]
            else:
                protocol = None
                members = [m.summary(None) for m in group.all_member_metadata]
            out.append(
                GroupSummary(
                    group_id,
                    E.none,
                    group.state.value,
                    group.protocol_type or "",
                    protocol or NO_PROTOCOL,
                    members,
                )
            )
        return out

    def handle_list_groups(
        self, states: Iterable[str] = ()
    ) -> tuple[ErrorCode, list[GroupOverview]]:
        """ListGroups, optionally filtered by state names (case-insensitive, v4+)."""
        wanted = {s.lower() for s in states}
        overviews = [
            GroupOverview(g.group_id, g.protocol_type or "", g.state.value)
            for g in self._groups.values()
            if not g.is_in(GroupState.DEAD) and (not wanted or g.state.value.lower() in wanted)
        ]
        return E.none, overviews

    @staticmethod
    def is_known_state(name: str) -> bool:
        """For handlers validating a ListGroups states filter."""
        return parse_state(name) is not None

    # ====================================================== admin: deletion
    def handle_delete_groups(self, group_ids: Iterable[str]) -> dict[str, ErrorCode]:
        """DeleteGroups: only Empty groups; their offsets go with them."""
        errors: dict[str, ErrorCode] = {}
        for group_id in group_ids:
            group = self._groups.get(group_id)
            if group is None or group.is_in(GroupState.DEAD):
                errors[group_id] = E.group_id_not_found
            elif group.is_in(GroupState.EMPTY):
                removed = group.remove_all_offsets()
                group.transition_to(GroupState.DEAD)
                self._write_tombstones(group, removed, group_tombstone=True)
                self._unload_dead_group(group)
                log.info(
                    "The following groups were deleted: %s. A total of %d offsets were removed.",
                    group_id,
                    len(removed),
                )
                errors[group_id] = E.none
            else:
                errors[group_id] = E.non_empty_group
        return errors

    def handle_offset_delete(
        self, group_id: str, partitions: Iterable[tuple[str, int]]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """OffsetDelete: refused per partition (GROUP_SUBSCRIBED_TO_TOPIC) for topics a
        live consumer group reads; refused for the group (NON_EMPTY_GROUP) when it has
        members and is not a consumer group."""
        tps = [TopicPartition(*tp) for tp in partitions]
        group = self._groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            return E.group_id_not_found, {}
        errors: dict[TopicPartition, ErrorCode] = {}
        if group.is_in(GroupState.EMPTY):
            eligible = tps
        elif group.is_consumer_group:
            eligible = []
            for tp in tps:
                if group.is_subscribed_to_topic(tp.topic):
                    errors[tp] = E.group_subscribed_to_topic
                else:
                    eligible.append(tp)
        else:
            return E.non_empty_group, {}
        if eligible:
            removed = group.remove_offsets(eligible)
            self._write_tombstones(group, removed, group_tombstone=False)
            for tp in eligible:
                errors[tp] = E.none
            log.info(
                "The following offsets of the group %s were deleted: %s. A total of %d offsets "
                "were removed.",
                group_id,
                eligible,
                len(removed),
            )
        return E.none, errors

    def expire_offsets(self, now_ms: int | None = None) -> int:
        """Kafka's periodic offset cleanup (offsets.retention.minutes): drop expired
        offsets, and Empty groups left with none. Returns how many offsets went.

        The broker calls this every ``offsets.retention.check.interval.ms``.
        """
        now = self.clock.now_ms() if now_ms is None else now_ms
        retention_ms = self.config.offsets_retention_ms
        total = 0
        for group in list(self._groups.values()):
            if group.is_in(GroupState.DEAD):
                continue
            removed = group.remove_expired_offsets(now, retention_ms)
            drop_group = group.is_in(GroupState.EMPTY) and not group.has_offsets()
            if drop_group:
                log.info(
                    "Group %s transitioned to Dead in generation %d",
                    group.group_id,
                    group.generation_id,
                )
                group.transition_to(GroupState.DEAD)
            if removed or drop_group:
                self._write_tombstones(group, removed, group_tombstone=drop_group)
            if drop_group:
                self._unload_dead_group(group)
            total += len(removed)
        if total:
            log.info("Removed %d expired offsets", total)
        return total

    def _unload_dead_group(self, group: GroupMetadata) -> None:
        """Forget a Dead group and release anything still watching it."""
        if self._groups.get(group.group_id) is group:
            del self._groups[group.group_id]
        self.rebalance_purgatory.check_and_complete(GroupJoinKey(group.group_id))
        self.sync_purgatory.check_and_complete(GroupSyncKey(group.group_id))
        for member_id in group.all_members + sorted(group.pending_members):
            self.heartbeat_purgatory.check_and_complete(MemberKey(group.group_id, member_id))

    # ============================================================ persistence
    def _append(
        self,
        group_id: str,
        records: list[Record],
        on_done: Callable[[ErrorCode], None] | None,
    ) -> None:
        """Hand ``records`` to the log; ``on_done`` (if any) gets the append's own error
        exactly once, now or when the offsets topic's ISR has the records."""
        if self.group_log is None or not records:
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
            self.group_log.append_to_log(
                group_id, [encode_record(r) for r in records], once if on_done else None
            )
        except Exception:
            log.exception(
                "Appending to %s failed for group %s", GROUP_METADATA_TOPIC_NAME, group_id
            )
            if on_done is not None:
                once(E.unknown_server_error)

    def _store_group(
        self,
        group: GroupMetadata,
        assignment: Mapping[str, bytes],
        on_stored: Callable[[ErrorCode], None],
    ) -> None:
        """Persist the group's generation and members (Kafka's ``storeGroup``);
        ``on_stored`` gets SyncGroup's error for the append (:func:`store_group_error`)."""
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
        self._append(
            group.group_id,
            [GroupMetadataRecord(group.group_id, value)],
            lambda append_error: on_stored(store_group_error(append_error)),
        )

    def _write_tombstones(
        self, group: GroupMetadata, removed: Iterable[TopicPartition], *, group_tombstone: bool
    ) -> None:
        records: list[Record] = [
            OffsetCommitRecord(group.group_id, tp.topic, tp.partition, None) for tp in removed
        ]
        if group_tombstone:
            records.append(GroupMetadataRecord(group.group_id, None))
        # Kafka's cleanup appends on the leader and waits for no one.
        self._append(group.group_id, records, None)

    def load(self, records: Iterable[KeyValue]) -> None:
        """Rebuild groups and offsets from ``__consumer_offsets`` records (at start).

        Replays in order, later records winning (what compaction would keep). Groups come
        back Stable (with members) or Empty, and loaded members must heartbeat within
        their session timeout like anyone else.
        """
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
        for group_id, value in metadata.items():
            group = self._group_from_record(group_id, value)
            group.offsets.update(offsets.pop(group_id, {}))
            self._groups[group_id] = group
            self._on_group_loaded(group)
        for group_id, group_offsets in offsets.items():
            if not group_offsets:
                continue
            group = self._groups.get(group_id) or self._new_group(group_id)
            group.offsets.update(group_offsets)

    def _group_from_record(self, group_id: str, value: GroupMetadataValue) -> GroupMetadata:
        state = GroupState.STABLE if value.members else GroupState.EMPTY
        group = GroupMetadata(group_id, state, self.clock, self._uuid_factory)
        group.generation_id = value.generation
        group.protocol_type = value.protocol_type or None
        group.protocol_name = value.protocol
        for m in value.members:
            protocols = [(value.protocol, m.subscription)] if value.protocol is not None else []
            member = MemberMetadata(
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
            group.add(member)
        group.leader_id = value.leader if value.leader in group.all_members else group.leader_id
        group.current_state_timestamp = (
            value.current_state_timestamp if value.current_state_timestamp >= 0 else None
        )
        group.refresh_subscribed_topics()
        return group

    def _on_group_loaded(self, group: GroupMetadata) -> None:
        log.info(
            "Loading group metadata for %s with generation %d", group.group_id, group.generation_id
        )
        if group.size > self.config.group_max_size:
            self._prepare_rebalance(
                group,
                f"Freshly-loaded group is over capacity ({self.config.group_max_size}). "
                "Rebalancing in order to give a chance for consumers to commit offsets",
            )
        for member in group.all_member_metadata:
            self._complete_and_schedule_next_heartbeat_expiration(group, member)
