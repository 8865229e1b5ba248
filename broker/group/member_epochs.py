"""The member checks every modern group's heartbeat makes (consumer, streams and share
groups): the member must exist (UNKNOWN_MEMBER_ID) and be at the epoch the coordinator
knows (FENCED_MEMBER_EPOCH). Kafka 4 words them alike for each group type in
``GroupMetadataManager`` (``throwIfMemberEpochIsInvalid``,
``throwIfStreamsGroupMemberEpochIsInvalid``) and in its groups' ``getOrMaybeCreateMember``
/ ``getMemberOrThrow``.
"""

from __future__ import annotations

from collections.abc import Callable

from kio.schema.errors import ErrorCode

from broker.group.consumer.errors import ApiError


def unknown_member(group_id: str, member_id: str) -> ApiError:
    """UNKNOWN_MEMBER_ID: the group has no member ``member_id``."""
    return ApiError(
        ErrorCode.unknown_member_id, f"Member {member_id} is not a member of group {group_id}."
    )


def throw_if_member_epoch_is_invalid(
    group_type: str,
    received: int,
    member_epoch: int,
    previous_member_epoch: int,
    owns_subset: Callable[[], bool],
) -> None:
    """FENCED_MEMBER_EPOCH for an epoch ahead of the member's, or behind it unless it is
    the previous epoch and the member owns a subset of its assignment (``owns_subset``:
    the response that bumped the epoch may have been lost). ``group_type`` names the
    group in the message ("consumer", "streams")."""
    if received > member_epoch:
        raise ApiError(
            ErrorCode.fenced_member_epoch,
            f"The {group_type} group member has a greater member epoch ({received}) than the "
            f"one known by the group coordinator ({member_epoch}). The member must abandon "
            "all its partitions and rejoin.",
        )
    if received < member_epoch and (received != previous_member_epoch or not owns_subset()):
        raise ApiError(
            ErrorCode.fenced_member_epoch,
            f"The {group_type} group member has a smaller member epoch ({received}) than the "
            f"one known by the group coordinator ({member_epoch}). The member must abandon "
            "all its partitions and rejoin.",
        )
