"""The classic side of Kafka 4's online migration between classic and consumer groups.

The consumer group coordinator decides (``consumer/consumer_group_coordinator.py``); the
classic group of the same id — which, here, always stays in the manager as the holder of
the group's committed offsets — changes with it:

* :func:`hand_over_to_consumer_group` (upgrade, Kafka's ``convertToConsumerGroup``): its
  parked JoinGroups and SyncGroups are answered REBALANCE_IN_PROGRESS (the members rejoin,
  now into the consumer group), its members and their heartbeat expirations go, and the
  group ends Empty, written so (Kafka writes a tombstone of the group's metadata; here
  the Empty record keeps the offsets' holder, which a load brings back as Empty anyway).
* :func:`take_back_from_consumer_group` (downgrade, Kafka's ``convertToClassicGroup``):
  the consumer group's remaining (classic) members come back with their target
  assignments at generation = the group epoch, the group is written Stable with them,
  their heartbeats start, and a rebalance begins ("Downgrade group ... from consumer to
  classic.").

Functions over the group coordinator's membership machinery (the ``Membership``
Protocol of ``membership.py``), as ``group_join.py`` and ``group_sync.py`` are.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from kio.schema.errors import ErrorCode

import broker.group.group_sync as group_sync
from broker.group.consumer.group_conversion import ClassicMemberSpec
from broker.group.consumer_protocol import CONSUMER_PROTOCOL_TYPE
from broker.group.group_metadata import GroupMetadata
from broker.group.group_state import GroupState
from broker.group.keys import GroupJoinKey
from broker.group.member_metadata import MemberMetadata
from broker.group.membership import Membership
from broker.group.results import JoinGroupResult, SyncGroupResult

log = logging.getLogger("broker.group")

E = ErrorCode


def hand_over_to_consumer_group(coordinator: Membership, group: GroupMetadata) -> None:
    """The classic group's members now belong to a consumer group: empty it."""
    for member in group.all_member_metadata:
        group.maybe_invoke_join_callback(
            member, JoinGroupResult(member.member_id, E.rebalance_in_progress)
        )
        group.maybe_invoke_sync_callback(member, SyncGroupResult(E.rebalance_in_progress))
    gone = group.all_members + sorted(group.pending_members)
    for member_id in gone:
        group.remove(member_id)
    for member_id in gone:
        coordinator.remove_heartbeat_for_leaving_member(group, member_id)
    group_sync.remove_sync_expiration(coordinator, group)
    if group.is_in(GroupState.PREPARING_REBALANCE):
        # Its DelayedJoin completes now (no member left): Empty, written.
        coordinator.rebalance_purgatory.check_and_complete(GroupJoinKey(group.group_id))
    elif not group.is_in(GroupState.EMPTY, GroupState.DEAD):
        coordinator.prepare_rebalance(
            group, f"Upgrade group {group.group_id} from classic to consumer."
        )


def take_back_from_consumer_group(
    coordinator: Membership,
    group_id: str,
    generation_id: int,
    members: Sequence[ClassicMemberSpec],
) -> None:
    """The consumer group's classic members form the classic group again, rebalancing."""
    group = coordinator.group_manager.get_or_maybe_create_group(group_id, True)
    assert group is not None
    if not group.is_in(GroupState.EMPTY):
        log.warning("Group %s is %s: cannot take back its members.", group_id, group.state)
        return
    group.generation_id = generation_id
    for spec in members:
        group.add(
            MemberMetadata(
                member_id=spec.member_id,
                group_instance_id=spec.group_instance_id,
                client_id=spec.client_id,
                client_host=spec.client_host,
                rebalance_timeout_ms=spec.rebalance_timeout_ms,
                session_timeout_ms=spec.session_timeout_ms,
                protocol_type=CONSUMER_PROTOCOL_TYPE,
                supported_protocols=list(spec.supported_protocols),
                assignment=spec.assignment,
            )
        )
    group.protocol_name = group.select_protocol()
    # Kafka builds the group Stable; our state table gets there through the rebalance
    # states (no member is parked, so nothing is answered on the way).
    for state in (
        GroupState.PREPARING_REBALANCE,
        GroupState.COMPLETING_REBALANCE,
        GroupState.STABLE,
    ):
        group.transition_to(state)
    assignments = {m.member_id: m.assignment for m in group.all_member_metadata}

    def on_stored(error: ErrorCode) -> None:
        if error is not E.none:
            log.warning("Failed to write the downgraded group %s: %s", group_id, error.name)

    coordinator.group_manager.store_group(group, assignments, on_stored)
    for member in group.all_member_metadata:
        coordinator.complete_and_schedule_next_heartbeat_expiration(group, member)
    coordinator.prepare_rebalance(group, f"Downgrade group {group_id} from consumer to classic.")
    log.info("[GroupId %s] Converted the consumer group to a classic group.", group_id)
