"""The checks of a ConsumerGroupHeartbeat before it changes anything (Kafka's
``throwIfConsumerGroupHeartbeatRequestIsInvalid`` and ``throwIfMemberEpochIsInvalid``).

Every check raises ``ApiError`` with Kafka's error code and message; the coordinator runs
them all before it touches a group, so a refused heartbeat leaves the group as it was.
"""

from __future__ import annotations

from collections.abc import Collection

from kio.schema.errors import ErrorCode

from broker.group.consumer.consumer_group import ConsumerGroup
from broker.group.consumer.consumer_group_member import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    Assignment,
    ConsumerGroupMember,
)
from broker.group.consumer.current_assignment_builder import OwnedTopicPartitions
from broker.group.consumer.errors import ApiError
from broker.group.consumer.heartbeat_params import ConsumerGroupHeartbeatParams
from broker.group.member_epochs import (
    throw_if_member_epoch_is_invalid as throw_if_epoch_is_invalid,
)

E = ErrorCode


def _invalid(message: str) -> ApiError:
    return ApiError(E.invalid_request, message)


def throw_if_request_is_invalid(
    p: ConsumerGroupHeartbeatParams, assignors: Collection[str]
) -> None:
    """The request's own fields, as Kafka checks them (INVALID_REQUEST,
    UNSUPPORTED_ASSIGNOR). The regex itself is checked when it is compiled
    (``RegexResolver.compile``: INVALID_REGULAR_EXPRESSION)."""
    if not p.group_id:
        raise _invalid("GroupId can't be empty.")
    if p.instance_id == "":
        raise _invalid("InstanceId can't be empty.")
    if p.rack_id == "":
        raise _invalid("RackId can't be empty.")
    if p.api_version >= 1 and not p.member_id:
        raise _invalid("MemberId can't be empty.")
    epoch = p.member_epoch
    if epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH:
        if not p.member_id:
            raise _invalid("MemberId can't be empty.")
    elif epoch == JOIN_GROUP_MEMBER_EPOCH:
        if p.rebalance_timeout_ms == -1:
            raise _invalid("RebalanceTimeoutMs must be provided in first request.")
        if p.owned_topic_partitions is None or len(p.owned_topic_partitions) > 0:
            raise _invalid("TopicPartitions must be empty when (re-)joining.")
        # An empty list of names or an empty regex joins with no topics (Kafka 4).
        if p.subscribed_topic_names is None and p.subscribed_topic_regex is None:
            raise _invalid(
                "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when "
                "(re-)joining."
            )
    elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if not p.member_id:
            raise _invalid("MemberId can't be empty.")
        if p.instance_id is None:
            raise _invalid("InstanceId can't be null.")
    else:
        raise _invalid("MemberEpoch is invalid.")
    if p.server_assignor is not None and p.server_assignor not in assignors:
        raise ApiError(
            E.unsupported_assignor,
            f"ServerAssignor {p.server_assignor} is not supported. Supported assignors: "
            f"{', '.join(assignors)}.",
        )


def throw_if_group_is_full(group: ConsumerGroup, member_id: str, max_size: int) -> None:
    """GROUP_MAX_SIZE_REACHED for a new member of a group at ``group.consumer.max.size``."""
    if group.num_members >= max_size and (not member_id or not group.has_member(member_id)):
        raise ApiError(
            E.group_max_size_reached,
            f"The consumer group has reached its maximum capacity of {max_size} members.",
        )


def throw_if_member_epoch_is_invalid(
    member: ConsumerGroupMember, received: int, owned: OwnedTopicPartitions | None
) -> None:
    """FENCED_MEMBER_EPOCH for an epoch ahead of the member's, or behind it unless it is
    the previous epoch with a subset of the assignment (``member_epochs.py``)."""
    throw_if_epoch_is_invalid(
        "consumer",
        received,
        member.member_epoch,
        member.previous_member_epoch,
        lambda: is_subset(owned, member.assigned_partitions),
    )


def is_subset(owned: OwnedTopicPartitions | None, target: Assignment) -> bool:
    """Kafka's ``isSubset``: the member owns only partitions of ``target``."""
    if owned is None:
        return False
    for topic_id, partitions in owned:
        assigned = target.get(topic_id)
        if assigned is None or any(p not in assigned for p in partitions):
            return False
    return True
