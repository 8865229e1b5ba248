"""Classic-protocol members inside a KIP-848 consumer group (Kafka 4's online migration):
JoinGroup, SyncGroup, Heartbeat and LeaveGroup of a consumer group, as Kafka's
``classicGroupJoinToConsumerGroup``, ``classicGroupSyncToConsumerGroup``,
``classicGroupHeartbeatToConsumerGroup`` and ``classicGroupLeaveToConsumerGroup``.

A classic member is a ``ConsumerGroupMember`` with ``ClassicMemberMetadata`` (its session
timeout and JoinGroup protocols). Its assignment is the server-side assignor's, as a
KIP-848 member's: the protocol it names ("range", "roundrobin", "cooperative-sticky") is
only echoed back, never run; JoinGroup answers with no leader and no member list, so every
classic member is a follower whose SyncGroup returns its current assignment encoded as a
ConsumerProtocolAssignment (in its subscription's version). Each JoinGroup is one
reconciliation step, from the owned partitions its subscription lists (none from an eager
client: it gave all up before rejoining). Its generation is its member epoch.

Heartbeat answers REBALANCE_IN_PROGRESS when the member must rejoin: the group epoch is
ahead of it, it has partitions to revoke, or partitions it waits for were released; the
join timeout (its rebalance timeout) fences it if it does not. After JoinGroup a sync
timeout fences a member that does not SyncGroup.

Where this differs from Kafka: a static classic member that replaces the last KIP-848
member (Kafka downgrades then) is not a downgrade trigger here; the downgrade happens when
the last KIP-848 member leaves or is fenced (``ConsumerGroupCoordinator``).

Functions over what they use of the consumer group coordinator (the
``ConsumerMembership`` Protocol below), as ``group_join.py`` is over ``Membership``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Protocol

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import TopicInfo
from broker.group.consumer.consumer_group import ConsumerGroup
from broker.group.consumer.consumer_group_config import ConsumerGroupConfig
from broker.group.consumer.consumer_group_member import (
    ClassicMemberMetadata,
    ConsumerGroupMember,
    MemberState,
)
from broker.group.consumer.consumer_group_records import ConsumerGroupView
from broker.group.consumer.current_assignment_builder import OwnedTopicPartitions
from broker.group.consumer.errors import ApiError
from broker.group.consumer.group_conversion import topic_partitions_by_name
from broker.group.consumer.heartbeat_validation import throw_if_group_is_full
from broker.group.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    Subscription,
    decode_subscription,
    encode_assignment,
    protocol_version,
)
from broker.group.join_params import JoinGroupParams
from broker.group.member_timeouts import MemberTimeouts
from broker.group.response_callback import ResponseCallback
from broker.group.results import (
    UNKNOWN_MEMBER_ID,
    JoinGroupResult,
    LeaveGroupResult,
    LeaveMemberResult,
    SyncGroupResult,
)
from broker.server.purgatories import ParkedRequest

log = logging.getLogger("broker.group.consumer")

E = ErrorCode


class ConsumerMembership(Protocol):
    """What the classic members of a consumer group use of the consumer group
    coordinator: its limits, timeouts and topics, and its member changes and writes.

    A Protocol, so this module need not import the coordinator that imports it (as
    ``group/membership.py`` is for the classic coordinator's join and sync phases);
    ``ConsumerGroupCoordinator`` is the one implementation.
    """

    config: ConsumerGroupConfig
    timeouts: MemberTimeouts

    @property
    def topics(self) -> Mapping[str, TopicInfo]: ...

    def new_member_id(self) -> str: ...

    def replace_static_member(
        self, group: ConsumerGroup, replaced: ConsumerGroupMember, member: ConsumerGroupMember
    ) -> None:
        """A static member came back under a new member id: the old one goes."""
        ...

    def update_member_and_reconcile(
        self,
        group: ConsumerGroup,
        member: ConsumerGroupMember,
        updated: ConsumerGroupMember,
        owned: OwnedTopicPartitions | None,
    ) -> ConsumerGroupMember:
        """The member ``updated`` (group epoch bumped on a subscription change), a new
        target assignment when the group epoch is ahead, one reconciliation step; the
        member as it is now in the group."""
        ...

    def refresh_subscription_metadata(self, group: ConsumerGroup) -> None: ...

    def write(
        self,
        group_id: str,
        before: ConsumerGroupView,
        on_done: Callable[[ErrorCode], None] | None = None,
        parked_request: ParkedRequest | None = None,
    ) -> None:
        """Write what changed in the group since ``before`` to ``__consumer_offsets``."""
        ...


# ================================================================== checks
def supports_classic_protocols(group: ConsumerGroup, protocol_type: str, names: set[str]) -> bool:
    """Kafka's ``ConsumerGroup.supportsClassicProtocols``."""
    if group.num_members == 0:
        return bool(protocol_type) and bool(names)
    if protocol_type != CONSUMER_PROTOCOL_TYPE:
        return False
    classic = [m.classic_member_metadata for m in group.members.values()]
    supported = [{n for n, _ in c.supported_protocols} for c in classic if c is not None]
    if not supported:
        return True
    return any(all(name in s for s in supported) for name in names)


def validate_member(
    group: ConsumerGroup, member_id: str, instance_id: str | None
) -> ConsumerGroupMember:
    """Kafka's ``validateConsumerGroupMember`` and ``throwIfMemberDoesNotUseClassicProtocol``."""
    if instance_id is None:
        member = group.get_member(member_id)
    else:
        member = validate_static(group, member_id, instance_id, group.static_member(instance_id))
    if not member.use_classic_protocol:
        raise ApiError(
            E.unknown_member_id, f"Member {member.member_id} does not use the classic protocol."
        )
    return member


def throw_if_generation_id_unmatched(member: ConsumerGroupMember, generation_id: int) -> None:
    if member.member_epoch != generation_id:
        raise ApiError(
            E.illegal_generation,
            f"The request generation id {generation_id} is not equal to the member epoch "
            f"{member.member_epoch} of member {member.member_id}.",
        )


def waiting_on_unreleased_partition(group: ConsumerGroup, member: ConsumerGroupMember) -> bool:
    """Kafka's ``waitingOnUnreleasedPartition``: a partition of its target that it does not
    have yet is still held by another member."""
    if member.state is not MemberState.UNRELEASED_PARTITIONS:
        return False
    for topic_id, partitions in group.target_assignment_of(member.member_id).items():
        assigned = member.assigned_partitions.get(topic_id, frozenset())
        for p in partitions:
            if p not in assigned and group.current_partition_epoch(topic_id, p) != -1:
                return True
    return False


def owned_partitions(coord: ConsumerMembership, subscription: Subscription) -> OwnedTopicPartitions:
    """The subscription's owned partitions by topic id (unknown topics dropped)."""
    topics = coord.topics
    return [
        (topics[name].topic_id, ps) for name, ps in subscription.owned_partitions if name in topics
    ]


# ================================================================ JoinGroup
def classic_group_join(
    coord: ConsumerMembership,
    group: ConsumerGroup,
    p: JoinGroupParams,
    callback: ResponseCallback[JoinGroupResult],
) -> None:
    """Kafka's ``classicGroupJoinToConsumerGroup``; answered once the change is written."""
    is_unknown = p.member_id == UNKNOWN_MEMBER_ID
    member_id = coord.new_member_id() if is_unknown else p.member_id
    try:
        member, replaced, subscription = _validate_join(coord, group, p, member_id)
    except ApiError as error:
        # MEMBER_ID_REQUIRED hands the new id out; other errors echo the request's.
        answer_id = member_id if error.error is E.member_id_required else p.member_id
        callback(JoinGroupResult(answer_id, error.error))
        return

    before = ConsumerGroupView.of(group)
    if replaced is not None:
        group.target_assignment[member_id] = group.target_assignment_of(replaced.member_id)
        coord.replace_static_member(group, replaced, member)
    updated = replace(
        member,
        instance_id=p.group_instance_id or member.instance_id,
        rack_id=subscription.rack_id or member.rack_id,
        rebalance_timeout_ms=(
            p.rebalance_timeout_ms if p.rebalance_timeout_ms != -1 else member.rebalance_timeout_ms
        ),
        subscribed_topic_names=tuple(sorted(set(subscription.topics))),
        client_id=p.client_id,
        client_host=p.client_host,
        classic_member_metadata=ClassicMemberMetadata(p.session_timeout_ms, tuple(p.protocols)),
    )
    updated = coord.update_member_and_reconcile(
        group, member, updated, owned_partitions(coord, subscription)
    )
    result = JoinGroupResult(
        member_id=member_id,
        error=E.none,
        generation_id=updated.member_epoch,
        protocol_type=CONSUMER_PROTOCOL_TYPE,
        protocol_name=p.protocols[0][0],
    )
    group_id = group.group_id

    def written(error: ErrorCode) -> None:
        if error is not E.none:
            callback(JoinGroupResult(member_id, error))
            return
        coord.timeouts.cancel_join_timeout(group_id, member_id)
        coord.timeouts.schedule_session_timeout(group_id, member_id, p.session_timeout_ms)
        coord.timeouts.schedule_sync_timeout(group_id, member_id, p.rebalance_timeout_ms)
        callback(result)

    coord.write(group_id, before, written, callback.parked_request)


def _validate_join(
    coord: ConsumerMembership, group: ConsumerGroup, p: JoinGroupParams, member_id: str
) -> tuple[ConsumerGroupMember, ConsumerGroupMember | None, Subscription]:
    """The JoinGroup's checks, in Kafka's order: the member, the static member it
    replaces, its subscription; ApiError (MEMBER_ID_REQUIRED among them) otherwise."""
    is_unknown = p.member_id == UNKNOWN_MEMBER_ID
    throw_if_group_is_full(group, member_id, coord.config.group_consumer_max_size)
    if not supports_classic_protocols(group, p.protocol_type, p.protocol_names):
        raise ApiError(
            E.inconsistent_group_protocol, f"Member {member_id}'s protocols are not supported."
        )
    if is_unknown and p.require_known_member_id and p.group_instance_id is None:
        log.info(
            "[GroupId %s] Dynamic member with unknown member id joins the consumer group. "
            "Created a new member id %s and requesting the member to rejoin with this id.",
            group.group_id,
            member_id,
        )
        raise ApiError(E.member_id_required, "")
    member, replaced = _classic_member(group, member_id, p.group_instance_id, is_unknown)
    subscription = decode_subscription(p.protocols[0][1]) if p.protocols else None
    if subscription is None:
        raise ApiError(
            E.unknown_server_error,
            "Malformed embedded consumer protocol in subscription deserialization.",
        )
    return member, replaced, subscription


def _classic_member(
    group: ConsumerGroup, member_id: str, instance_id: str | None, is_unknown: bool
) -> tuple[ConsumerGroupMember, ConsumerGroupMember | None]:
    """The member a JoinGroup speaks for, and a static member it replaces."""
    if instance_id is None:
        member = group.members.get(member_id)
        if member is None:
            # Kafka creates it whatever the id (the one MEMBER_ID_REQUIRED handed out).
            log.info(
                "[GroupId %s] Member %s joins the consumer group using the classic protocol.",
                group.group_id,
                member_id,
            )
            return ConsumerGroupMember(member_id=member_id), None
        return member, None
    existing = group.static_member(instance_id)
    if not is_unknown:
        # A known member id: it must hold the instance id (Kafka's createIfNotExists false).
        return validate_static(group, member_id, instance_id, existing), None
    if existing is None:
        log.info(
            "[GroupId %s] Static member %s with instance id %s joins the consumer group "
            "using the classic protocol.",
            group.group_id,
            member_id,
            instance_id,
        )
        return ConsumerGroupMember(member_id=member_id), None
    # A new member id takes the instance id over (whatever protocol its holder spoke).
    renewed = replace(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0)
    return replace(renewed, state=MemberState.STABLE), existing


def validate_static(
    group: ConsumerGroup, member_id: str, instance_id: str, found: ConsumerGroupMember | None
) -> ConsumerGroupMember:
    """UNKNOWN_MEMBER_ID for an instance id nobody holds, FENCED_INSTANCE_ID for one held
    by another member id."""
    if found is None:
        raise ApiError(
            E.unknown_member_id,
            f"Member with instance id {instance_id} is not a member of group {group.group_id}.",
        )
    if found.member_id != member_id:
        raise ApiError(
            E.fenced_instance_id,
            f"Static member {member_id} with instance id {instance_id} was fenced by "
            f"member {found.member_id}.",
        )
    return found


# ================================================================ SyncGroup
def classic_group_sync(
    coord: ConsumerMembership,
    group: ConsumerGroup,
    member_id: str,
    instance_id: str | None,
    generation_id: int,
    protocol_type: str | None,
    protocol_name: str | None,
) -> SyncGroupResult:
    """Kafka's ``classicGroupSyncToConsumerGroup``: the member's current assignment."""
    try:
        member = validate_member(group, member_id, instance_id)
        throw_if_generation_id_unmatched(member, generation_id)
        classic = member.classic_member_metadata
        assert classic is not None
        if protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE:
            raise ApiError(E.inconsistent_group_protocol, "protocol type mismatch")
        if protocol_name is not None and protocol_name != classic.protocol_name:
            raise ApiError(E.inconsistent_group_protocol, "protocol name mismatch")
        if (
            group.group_epoch > member.member_epoch
            and member.state is not MemberState.UNREVOKED_PARTITIONS
        ):
            coord.timeouts.schedule_join_timeout_if_absent(
                group.group_id, member.member_id, member.rebalance_timeout_ms
            )
            raise ApiError(E.rebalance_in_progress, "rejoin to catch up")
    except ApiError as error:
        return SyncGroupResult(error.error)
    coord.timeouts.cancel_sync_timeout(group.group_id, member.member_id)
    coord.timeouts.schedule_session_timeout(
        group.group_id, member.member_id, classic.session_timeout_ms
    )
    assignment = topic_partitions_by_name(member.assigned_partitions, coord.topics)
    version = protocol_version(classic.supported_protocols[0][1])
    return SyncGroupResult(
        E.none,
        encode_assignment(assignment, version),
        protocol_type=protocol_type,
        protocol_name=protocol_name,
    )


# ================================================================ Heartbeat
def classic_group_heartbeat(
    coord: ConsumerMembership,
    group: ConsumerGroup,
    member_id: str,
    instance_id: str | None,
    generation_id: int,
) -> ErrorCode:
    """Kafka's ``classicGroupHeartbeatToConsumerGroup``."""
    try:
        member = validate_member(group, member_id, instance_id)
        throw_if_generation_id_unmatched(member, generation_id)
    except ApiError as error:
        return error.error
    classic = member.classic_member_metadata
    assert classic is not None
    coord.timeouts.schedule_session_timeout(
        group.group_id, member.member_id, classic.session_timeout_ms
    )
    if (
        member.member_epoch < group.group_epoch
        or member.state is MemberState.UNREVOKED_PARTITIONS
        or (
            member.state is MemberState.UNRELEASED_PARTITIONS
            and not waiting_on_unreleased_partition(group, member)
        )
    ):
        coord.timeouts.schedule_join_timeout_if_absent(
            group.group_id, member.member_id, member.rebalance_timeout_ms
        )
        return E.rebalance_in_progress
    return E.none


# =============================================================== LeaveGroup
def classic_group_leave(
    coord: ConsumerMembership,
    group: ConsumerGroup,
    members: Sequence[tuple[str, str | None]],
    reason: str | None,
) -> LeaveGroupResult:
    """Kafka's ``classicGroupLeaveToConsumerGroup``: the members go, the epoch bumps."""
    before = ConsumerGroupView.of(group)
    results: list[LeaveMemberResult] = []
    left: list[ConsumerGroupMember] = []
    for member_id, instance_id in members:
        try:
            member = _leaving_member(group, member_id, instance_id)
        except ApiError as error:
            results.append(LeaveMemberResult(member_id, instance_id, error.error))
            continue
        log.info(
            "[GroupId %s] Member %s has left group through explicit `LeaveGroup` request; "
            "client reason: %s",
            group.group_id,
            member.member_id,
            reason or "not provided",
        )
        group.remove_member(member.member_id)
        coord.timeouts.cancel(group.group_id, member.member_id)
        results.append(LeaveMemberResult(member.member_id, instance_id, E.none))
        left.append(member)
    if left:
        coord.refresh_subscription_metadata(group)
        group.set_group_epoch(group.group_epoch + 1)
        coord.write(group.group_id, before)
    return LeaveGroupResult(E.none, results)


def _leaving_member(
    group: ConsumerGroup, member_id: str, instance_id: str | None
) -> ConsumerGroupMember:
    if instance_id is None:
        member = group.get_member(member_id)
    else:
        found = group.static_member(instance_id)
        if found is None:
            raise ApiError(E.unknown_member_id, f"Instance id {instance_id} is unknown.")
        if member_id != UNKNOWN_MEMBER_ID and found.member_id != member_id:
            raise ApiError(E.fenced_instance_id, f"Instance id {instance_id} is fenced.")
        member = found
    if not member.use_classic_protocol:
        raise ApiError(
            E.unknown_member_id, f"Member {member.member_id} does not use the classic protocol."
        )
    return member
