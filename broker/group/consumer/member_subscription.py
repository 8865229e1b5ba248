"""Finding (or creating) the member a ConsumerGroupHeartbeat speaks for (Kafka's
``getOrMaybeSubscribeDynamicConsumerGroupMember`` / ``...StaticConsumerGroupMember``) and
the checks of a static member's leave.

Static members (KIP-848's rules, as Kafka's): an instance id belongs to one member at a
time. A member that joins (epoch 0) with an instance id held by another member gets
UNRELEASED_INSTANCE_ID unless the holder left with epoch -2; then it takes the holder's
place and target assignment (the holder is returned as ``replaced``) and reconciles from
epoch 0. A heartbeat or leave under an instance id now held by another member id is
FENCED_INSTANCE_ID; an instance id the group does not know is UNKNOWN_MEMBER_ID. A
classic member's instance id (online migration) is taken over without waiting for a
leave, as Kafka's.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from kio.schema.errors import ErrorCode

from broker.group.consumer.consumer_group import ConsumerGroup
from broker.group.consumer.consumer_group_member import (
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroupMember,
    MemberState,
)
from broker.group.consumer.current_assignment_builder import OwnedTopicPartitions
from broker.group.consumer.errors import ApiError
from broker.group.consumer.heartbeat_params import ConsumerGroupHeartbeatParams
from broker.group.consumer.heartbeat_validation import throw_if_member_epoch_is_invalid

log = logging.getLogger("broker.group.consumer")

E = ErrorCode


def get_or_maybe_subscribe_dynamic_member(
    group: ConsumerGroup,
    member_id: str,
    member_epoch: int,
    owned: OwnedTopicPartitions | None,
    create: bool,
) -> ConsumerGroupMember:
    member = group.members.get(member_id)
    if member is None:
        if not create:
            group.get_member(member_id)  # raises UNKNOWN_MEMBER_ID
        log.info(
            "[GroupId %s] Member %s joins the consumer group using the consumer protocol.",
            group.group_id,
            member_id,
        )
        return ConsumerGroupMember(member_id=member_id)
    throw_if_member_epoch_is_invalid(member, member_epoch, owned)
    return member


def get_or_maybe_subscribe_static_member(
    group: ConsumerGroup,
    member_id: str,
    member_epoch: int,
    instance_id: str,
    owned: OwnedTopicPartitions | None,
    create: bool,
) -> tuple[ConsumerGroupMember, ConsumerGroupMember | None]:
    """The member and, when a static member comes back under a new member id, the one it
    replaces (its target assignment is moved to the new member id here)."""
    existing = group.static_member(instance_id)
    if create:
        if existing is None:
            return ConsumerGroupMember(member_id=member_id), None
        if existing.member_id == member_id:
            throw_if_member_epoch_is_invalid(existing, member_epoch, owned)
            return existing, None
        if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH and (
            # A classic member's instance id is taken over at once (online migration).
            not existing.use_classic_protocol
        ):
            log.info(
                "[GroupId %s] Static member %s with instance id %s cannot join the group "
                "because the instance id is owned by member %s.",
                group.group_id,
                member_id,
                instance_id,
                existing.member_id,
            )
            raise ApiError(
                E.unreleased_instance_id,
                f"Static member {member_id} with instance id {instance_id} cannot join the "
                f"group because the instance id is owned by {existing.member_id} member.",
            )
        # It left with -2 and comes back: it takes the old member's place and
        # assignment, and reconciles from epoch 0.
        renewed = replace(
            existing,
            member_id=member_id,
            member_epoch=0,
            previous_member_epoch=0,
            state=MemberState.STABLE,
        )
        group.target_assignment[member_id] = group.target_assignment_of(existing.member_id)
        return renewed, existing
    existing = static_member_of(group, member_id, instance_id)
    throw_if_member_epoch_is_invalid(existing, member_epoch, owned)
    return existing, None


def static_member_of(group: ConsumerGroup, member_id: str, instance_id: str) -> ConsumerGroupMember:
    """The static member holding ``instance_id``, which must be ``member_id``
    (UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID otherwise)."""
    existing = group.static_member(instance_id)
    if existing is None:
        raise ApiError(E.unknown_member_id, f"Instance id {instance_id} is unknown.")
    if existing.member_id != member_id:
        log.info(
            "[GroupId %s] Static member %s with instance id %s is fenced by existing member %s.",
            group.group_id,
            member_id,
            instance_id,
            existing.member_id,
        )
        raise ApiError(
            E.fenced_instance_id,
            f"Static member {member_id} with instance id {instance_id} was fenced by "
            f"member {existing.member_id}.",
        )
    return existing


def static_member_leaves_temporarily(group: ConsumerGroup, member: ConsumerGroupMember) -> None:
    """Epoch -2: the member stays, with its assignment, at epoch -2 until its session
    expires or a new member takes its instance id (nothing left to revoke)."""
    log.info(
        "[GroupId %s] Static Member %s with instance id %s temporarily left the consumer group.",
        group.group_id,
        member.member_id,
        member.instance_id,
    )
    group.update_member(
        replace(
            member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, partitions_pending_revocation={}
        )
    )


def updated_member(
    member: ConsumerGroupMember, p: ConsumerGroupHeartbeatParams
) -> ConsumerGroupMember:
    """The member with what the request carries (a field not sent keeps its value)."""
    return replace(
        member,
        instance_id=p.instance_id if p.instance_id is not None else member.instance_id,
        rack_id=p.rack_id if p.rack_id is not None else member.rack_id,
        rebalance_timeout_ms=(
            p.rebalance_timeout_ms if p.rebalance_timeout_ms != -1 else member.rebalance_timeout_ms
        ),
        server_assignor_name=(
            p.server_assignor if p.server_assignor is not None else member.server_assignor_name
        ),
        subscribed_topic_names=(
            tuple(sorted(set(p.subscribed_topic_names)))
            if p.subscribed_topic_names is not None
            else member.subscribed_topic_names
        ),
        subscribed_topic_regex=(
            (p.subscribed_topic_regex or None)  # "" clears it, as in Kafka 4
            if p.subscribed_topic_regex is not None
            else member.subscribed_topic_regex
        ),
        client_id=p.client_id,
        client_host=p.client_host,
        classic_member_metadata=None,  # it speaks the consumer protocol now
    )
