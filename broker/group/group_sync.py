"""The SyncGroup phase of Kafka's ``GroupCoordinator``, split out of it for size.

After the join phase every member owes a SyncGroup. The leader's carries the
assignment: it is stored in ``__consumer_offsets`` (``storeGroup``, acks=all) and handed
to every member only once the offsets topic's in-sync replicas have it, so the leader's
SyncGroup waits in the Produce purgatory meanwhile (the append records it). The
followers' SyncGroups wait for that assignment; the group's DelayedSync, in the
Rebalance purgatory, bounds their wait (KAFKA-13008's "pending sync": members that
never sync are removed when it expires, and the others are told to rejoin), so that is
where they are recorded. A SyncGroup answered during the call is recorded nowhere.

These are functions of the coordinator: they use its membership and heartbeat
machinery and its group metadata manager, and nothing else.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from kio.schema.errors import ErrorCode

from broker.group.delayed_sync import DelayedSync
from broker.group.group_metadata import GroupMetadata
from broker.group.group_state import GroupState
from broker.group.keys import GroupSyncKey
from broker.group.membership import Membership
from broker.group.response_callback import ResponseCallback
from broker.group.results import SyncGroupResult
from broker.server.purgatories import PurgatoryName

log = logging.getLogger("broker.group")

E = ErrorCode


def handle_sync_group(
    coordinator: Membership,
    group_id: str,
    generation_id: int,
    member_id: str,
    group_instance_id: str | None,
    assignments: Mapping[str, bytes],
    callback: ResponseCallback[SyncGroupResult],
    protocol_type: str | None,
    protocol_name: str | None,
) -> None:
    if not group_id:
        callback(SyncGroupResult(E.invalid_group_id))
        return
    group = coordinator.group_manager.get_group(group_id)
    if group is None:
        callback(SyncGroupResult(E.unknown_member_id))
        return
    error = _validate_sync_group(
        coordinator,
        group,
        generation_id,
        member_id,
        protocol_type,
        protocol_name,
        group_instance_id,
    )
    if error is not None:
        callback(SyncGroupResult(error))
        return
    state = group.state
    if state is GroupState.EMPTY:
        callback(SyncGroupResult(E.unknown_member_id))
    elif state is GroupState.PREPARING_REBALANCE:
        callback(SyncGroupResult(E.rebalance_in_progress))
    elif state is GroupState.COMPLETING_REBALANCE:
        member = group.get(member_id)
        superseded = member.awaiting_sync_callback
        member.awaiting_sync_callback = callback
        if superseded is not None:
            # A retried SyncGroup replaces the parked one; answer the old one.
            superseded(SyncGroupResult(E.rebalance_in_progress))
        remove_pending_sync_member(coordinator, group, member_id)
        if group.is_leader(member_id):
            _store_assignment(coordinator, group, member_id, assignments, callback)
        # A follower waits for the leader's assignment (bounded by the DelayedSync);
        # the leader, if not answered yet, already waits for its append in Produce.
        callback.park(PurgatoryName.REBALANCE)
    elif state is GroupState.STABLE:
        remove_pending_sync_member(coordinator, group, member_id)
        member = group.get(member_id)
        callback(
            SyncGroupResult(E.none, member.assignment, group.protocol_type, group.protocol_name)
        )
        coordinator.complete_and_schedule_next_heartbeat_expiration(group, member)
    else:
        raise RuntimeError(f"Reached unexpected condition for Dead group {group.group_id}")


def _store_assignment(
    coordinator: Membership,
    group: GroupMetadata,
    leader_id: str,
    assignments: Mapping[str, bytes],
    callback: ResponseCallback[SyncGroupResult],
) -> None:
    log.info(
        "Assignment received from leader %s for group %s for generation %d. The "
        "group has %d members, %d of which are static.",
        leader_id,
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
        if not (group.is_in(GroupState.COMPLETING_REBALANCE) and group.generation_id == generation):
            return
        if store_error is not E.none:
            reset_and_propagate_assignment_error(coordinator, group, store_error)
            coordinator.maybe_prepare_rebalance(
                group,
                f"Error {store_error.name} when storing group assignment during "
                f"SyncGroup (member: {leader_id})",
            )
        else:
            _set_and_propagate_assignment(coordinator, group, assignment)
            group.transition_to(GroupState.STABLE)

    coordinator.group_manager.store_group(group, assignment, on_stored, callback.parked_request)


def _validate_sync_group(
    coordinator: Membership,
    group: GroupMetadata,
    generation_id: int,
    member_id: str,
    protocol_type: str | None,
    protocol_name: str | None,
    group_instance_id: str | None,
) -> ErrorCode | None:
    if group.is_in(GroupState.DEAD):
        return E.coordinator_not_available
    error = coordinator.validate_current_member(group, member_id, group_instance_id, "sync-group")
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
    coordinator: Membership, group: GroupMetadata, assignment: Mapping[str, bytes]
) -> None:
    for member in group.all_member_metadata:
        member.assignment = assignment.get(member.member_id, b"")
    _propagate_assignment(coordinator, group, E.none)


def reset_and_propagate_assignment_error(
    coordinator: Membership, group: GroupMetadata, error: ErrorCode
) -> None:
    for member in group.all_member_metadata:
        member.assignment = b""
    _propagate_assignment(coordinator, group, error)


def _propagate_assignment(coordinator: Membership, group: GroupMetadata, error: ErrorCode) -> None:
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
            coordinator.complete_and_schedule_next_heartbeat_expiration(group, member)


# ------------------------------------------------------------------ pending sync
def remove_pending_sync_member(
    coordinator: Membership, group: GroupMetadata, member_id: str
) -> None:
    group.remove_pending_sync_member(member_id)
    coordinator.rebalance_purgatory.check_and_complete(GroupSyncKey(group.group_id))


def remove_sync_expiration(coordinator: Membership, group: GroupMetadata) -> None:
    group.clear_pending_sync_members()
    coordinator.rebalance_purgatory.check_and_complete(GroupSyncKey(group.group_id))


def schedule_pending_sync(coordinator: Membership, group: GroupMetadata) -> None:
    coordinator.rebalance_purgatory.try_complete_else_watch(
        DelayedSync(coordinator, group, group.generation_id, group.rebalance_timeout_ms),
        [GroupSyncKey(group.group_id)],
    )


def try_complete_pending_sync(
    group: GroupMetadata, generation_id: int, force_complete: Callable[[], bool]
) -> bool:
    if generation_id != group.generation_id or group.is_in(
        GroupState.DEAD, GroupState.EMPTY, GroupState.PREPARING_REBALANCE
    ):
        return force_complete()
    if group.has_received_sync_from_all_members:
        return force_complete()
    return False


def on_expire_pending_sync(
    coordinator: Membership, group: GroupMetadata, generation_id: int
) -> None:
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
        coordinator.remove_heartbeat_for_leaving_member(group, member_id)
    log.info(
        "Group %s removed members who haven't sent their sync request: %s",
        group.group_id,
        pending,
    )
    coordinator.prepare_rebalance(group, f"Removing {pending} on pending sync request expiration")
