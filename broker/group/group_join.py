"""The JoinGroup paths of Kafka's ``GroupCoordinator``, split out of it for size.

``GroupCoordinator.handle_join_group`` checks the request and finds (or creates) the
group, then :func:`do_join_group` takes it from there, as Kafka's ``handleJoinGroup``
does: ``doNewMemberJoinGroup`` for a member without an id (KIP-394's MEMBER_ID_REQUIRED
first, or a static member taking over its old id: KIP-345's
``updateStaticMemberAndRebalance``) and ``doCurrentMemberJoinGroup`` for a member that
rejoins (``updateMemberAndRebalance``, or the current generation sent again). A member
whose JoinGroup must wait is added with its ``ResponseCallback``, and the coordinator
parks it in the rebalance.

These are functions of the coordinator: they use its rebalance and heartbeat machinery
(``maybe_prepare_rebalance``, ``complete_and_schedule_next_expiration``, ...) and its
group metadata manager, and nothing else.
"""

from __future__ import annotations

import logging

from kio.schema.errors import ErrorCode

from broker.group.group_config import NEW_MEMBER_JOIN_TIMEOUT_MS
from broker.group.group_metadata import GroupMetadata
from broker.group.group_state import GroupState
from broker.group.join_params import JoinGroupParams
from broker.group.keys import MemberKey
from broker.group.member_metadata import MemberMetadata
from broker.group.membership import Membership
from broker.group.response_callback import ResponseCallback
from broker.group.results import UNKNOWN_MEMBER_ID, JoinGroupResult

log = logging.getLogger("broker.group")

E = ErrorCode
JoinResponse = ResponseCallback[JoinGroupResult]


def do_join_group(
    coordinator: Membership,
    group: GroupMetadata,
    params: JoinGroupParams,
    callback: JoinResponse,
) -> None:
    """Admit the member (``group.max.size``) and take the new- or current-member path."""
    if not _accept_joining_member(coordinator, group, params.member_id):
        group.remove(params.member_id)
        callback(JoinGroupResult(UNKNOWN_MEMBER_ID, E.group_max_size_reached))
    elif params.member_id == UNKNOWN_MEMBER_ID:
        do_new_member_join_group(coordinator, group, params, callback)
    else:
        do_current_member_join_group(coordinator, group, params, callback)


def _accept_joining_member(coordinator: Membership, group: GroupMetadata, member_id: str) -> bool:
    """group.max.size, counted Kafka's way for each state."""
    max_size = coordinator.config.group_max_size
    if group.is_in(GroupState.EMPTY, GroupState.DEAD):
        return True
    if group.is_in(GroupState.PREPARING_REBALANCE):
        # Members already parked count; the last to rejoin are the ones turned away.
        return (
            group.has(member_id) and group.get(member_id).is_awaiting_join
        ) or group.num_awaiting < max_size
    return group.has(member_id) or group.size < max_size


def do_new_member_join_group(
    coordinator: Membership,
    group: GroupMetadata,
    params: JoinGroupParams,
    callback: JoinResponse,
) -> None:
    if group.is_in(GroupState.DEAD):
        callback(JoinGroupResult(UNKNOWN_MEMBER_ID, E.coordinator_not_available))
        return
    if not group.supports_protocols(params.protocol_type, params.protocol_names):
        callback(JoinGroupResult(UNKNOWN_MEMBER_ID, E.inconsistent_group_protocol))
        return
    instance_id = params.group_instance_id
    new_member_id = group.generate_member_id(params.client_id, instance_id)
    if instance_id is not None:
        old_member_id = group.current_static_member_id(instance_id)
        if old_member_id is not None:
            log.info(
                "Static member with groupInstanceId=%s and unknown member id joins group %s "
                "in %s state. Replacing previously mapped member %s with this "
                "groupInstanceId.",
                instance_id,
                group.group_id,
                group.state,
                old_member_id,
            )
            update_static_member_and_rebalance(
                coordinator, group, params, old_member_id, new_member_id, callback
            )
        else:
            add_member_and_rebalance(coordinator, group, params, new_member_id, callback)
    elif params.require_known_member_id:
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
        coordinator.add_pending_member_expiration(group, new_member_id, params.session_timeout_ms)
        callback(JoinGroupResult(new_member_id, E.member_id_required))
    else:
        add_member_and_rebalance(coordinator, group, params, new_member_id, callback)


def do_current_member_join_group(
    coordinator: Membership,
    group: GroupMetadata,
    params: JoinGroupParams,
    callback: JoinResponse,
) -> None:
    member_id = params.member_id
    if group.is_in(GroupState.DEAD):
        callback(JoinGroupResult(member_id, E.coordinator_not_available))
        return
    if not group.supports_protocols(params.protocol_type, params.protocol_names):
        callback(JoinGroupResult(member_id, E.inconsistent_group_protocol))
        return
    if group.is_pending_member(member_id):
        if params.group_instance_id is not None:
            # Pending ids are only handed to dynamic members; Kafka throws here.
            log.error(
                "Unexpected JoinGroup with groupInstanceId=%s for pending member %s",
                params.group_instance_id,
                member_id,
            )
            callback(JoinGroupResult(member_id, E.unknown_server_error))
            return
        add_member_and_rebalance(coordinator, group, params, member_id, callback)
        return
    error = coordinator.validate_current_member(
        group, member_id, params.group_instance_id, "join-group"
    )
    if error is not None:
        callback(JoinGroupResult(member_id, error))
        return
    member = group.get(member_id)
    protocols = list(params.protocols)
    state = group.state
    if state is GroupState.PREPARING_REBALANCE:
        update_member_and_rebalance(coordinator, group, member, params, callback)
    elif state is GroupState.COMPLETING_REBALANCE:
        if member.matches(protocols):
            # Probably lost the first JoinGroup response: send it again.
            callback(join_result(group, member_id, leader_view=True))
        else:
            update_member_and_rebalance(coordinator, group, member, params, callback)
    elif state is GroupState.STABLE:
        if group.is_leader(member_id) or not member.matches(protocols):
            # The leader rejoins to have topic-metadata changes reassigned; anyone
            # with new metadata needs a new assignment.
            update_member_and_rebalance(coordinator, group, member, params, callback)
        else:
            # A follower with nothing new: current generation, go sync.
            callback(join_result(group, member_id, leader_view=False))
    else:
        log.warning(
            "Attempt to add rejoining member %s of group %s in unexpected group state %s",
            member_id,
            group.group_id,
            state,
        )
        callback(JoinGroupResult(member_id, E.unknown_member_id))


def join_result(group: GroupMetadata, member_id: str, *, leader_view: bool) -> JoinGroupResult:
    """The current generation as a JoinGroup response; the member list only for the
    leader (and only when ``leader_view``)."""
    members = group.current_member_metadata() if leader_view and group.is_leader(member_id) else []
    return JoinGroupResult(
        member_id=member_id,
        error=E.none,
        generation_id=group.generation_id,
        protocol_type=group.protocol_type,
        protocol_name=group.protocol_name,
        leader_id=group.leader_or_empty,
        members=members,
    )


def add_member_and_rebalance(
    coordinator: Membership,
    group: GroupMetadata,
    params: JoinGroupParams,
    member_id: str,
    callback: JoinResponse,
) -> None:
    member = MemberMetadata(
        member_id=member_id,
        group_instance_id=params.group_instance_id,
        client_id=params.client_id,
        client_host=params.client_host,
        rebalance_timeout_ms=params.rebalance_timeout_ms,
        session_timeout_ms=params.session_timeout_ms,
        protocol_type=params.protocol_type,
        supported_protocols=list(params.protocols),
        is_new=True,
    )
    # A newcomer during the group's first rebalance extends InitialDelayedJoin.
    if group.is_in(GroupState.PREPARING_REBALANCE) and group.generation_id == 0:
        group.new_member_added = True
    group.add(member, callback)
    # A new member cannot heartbeat until its JoinGroup is answered, and a client
    # that gave up and retried would leave a ghost: bound it by the new-member timeout.
    coordinator.complete_and_schedule_next_expiration(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
    coordinator.maybe_prepare_rebalance(
        group,
        f"Adding new member {member_id} with group instance id {params.group_instance_id}; "
        f"client reason: {params.join_reason}",
    )


def update_member_and_rebalance(
    coordinator: Membership,
    group: GroupMetadata,
    member: MemberMetadata,
    params: JoinGroupParams,
    callback: JoinResponse,
) -> None:
    group.update_member(
        member,
        list(params.protocols),
        params.rebalance_timeout_ms,
        params.session_timeout_ms,
        callback,
    )
    coordinator.maybe_prepare_rebalance(group, f"Member {member.member_id} rejoining")


def update_static_member_and_rebalance(
    coordinator: Membership,
    group: GroupMetadata,
    params: JoinGroupParams,
    old_member_id: str,
    new_member_id: str,
    callback: JoinResponse,
) -> None:
    """A known static member restarted: swap in its new member id (KIP-345)."""
    instance_id = params.group_instance_id
    assert instance_id is not None
    current_leader = group.leader_or_empty
    member = group.replace_static_member(instance_id, old_member_id, new_member_id)
    # The old id's heartbeat watch is moot now; let it go rather than linger.
    coordinator.heartbeat_purgatory.check_and_complete(MemberKey(group.group_id, old_member_id))
    coordinator.complete_and_schedule_next_heartbeat_expiration(group, member)

    old_protocols = member.supported_protocols
    old_rebalance_timeout_ms = member.rebalance_timeout_ms
    old_session_timeout_ms = member.session_timeout_ms
    group.update_member(
        member,
        list(params.protocols),
        params.rebalance_timeout_ms,
        params.session_timeout_ms,
        callback,
    )

    state = group.state
    if state is GroupState.STABLE:
        if group.protocol_name == group.select_protocol():
            # Nothing the assignment depends on changed: no rebalance. Persist the new
            # member id, then answer with the current generation (Kafka answers from
            # storeGroup's callback too); meanwhile the JoinGroup waits for the append.
            log.info(
                "Static member which joins during Stable stage and doesn't affect "
                "selectProtocol will not trigger rebalance."
            )

            def on_stored(error: ErrorCode) -> None:
                if error is not E.none:
                    log.warning(
                        "Failed to persist metadata for group %s: %s", group.group_id, error
                    )
                    if group.current_static_member_id(instance_id) != new_member_id:
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
                    old = group.replace_static_member(instance_id, new_member_id, old_member_id)
                    coordinator.complete_and_schedule_next_heartbeat_expiration(group, old)
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
                    return
                is_leader = group.is_leader(new_member_id)
                group.maybe_invoke_join_callback(
                    member,
                    JoinGroupResult(
                        member_id=new_member_id,
                        error=E.none,
                        generation_id=group.generation_id,
                        protocol_type=group.protocol_type,
                        protocol_name=group.protocol_name,
                        # JoinGroup v9+: tell the leader it leads, but that it must not
                        # assign. Older clients get the *old* leader id, so a returning
                        # leader does not run an assignment the group would ignore.
                        leader_id=(
                            group.leader_or_empty
                            if params.support_skipping_assignment
                            else current_leader
                        ),
                        skip_assignment=params.support_skipping_assignment and is_leader,
                        members=(
                            group.current_member_metadata()
                            if params.support_skipping_assignment and is_leader
                            else []
                        ),
                    ),
                )

            coordinator.group_manager.store_group(
                group,
                {m.member_id: m.assignment for m in group.all_member_metadata},
                on_stored,
                callback.parked_request,
            )
        else:
            coordinator.maybe_prepare_rebalance(
                group,
                f"Group's selectedProtocol will change because static member "
                f"{new_member_id} with instance id {instance_id} joined with change "
                f"of protocol; client reason: {params.join_reason}",
            )
    elif state is GroupState.COMPLETING_REBALANCE:
        # The leader may be assigning to the old member id right now: start over.
        coordinator.prepare_rebalance(
            group,
            f"Updating metadata for static member {new_member_id} with instance id "
            f"{instance_id}; client reason: {params.join_reason}",
        )
    elif state is GroupState.PREPARING_REBALANCE:
        pass  # it is now parked like everyone else
    else:
        raise RuntimeError(
            f"Group {group.group_id} was not supposed to be in the state {state} when the "
            f"unknown static member {instance_id} rejoins."
        )
