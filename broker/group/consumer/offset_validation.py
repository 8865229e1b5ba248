"""Kafka's ``ConsumerGroup.validateOffsetCommit`` / ``validateOffsetFetch``: a consumer
group's commits and fetches carry the member id and member epoch (OffsetCommit v9+,
OffsetFetch v9+; TxnOffsetCommit v3+ carries them as member id and generation id). None
means accepted; else Kafka's error (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH;
ILLEGAL_GENERATION for a classic member of the group, whose commit carries its
generation, which is its member epoch).

Transactional commits (``is_transactional``, Kafka's flag of the same name): a
TxnOffsetCommit that names nobody (member id "", generation -1, no instance id: a
client older than v3, or a producer given bare group metadata) is accepted whatever the
group holds, as Kafka accepts it. The caller of a transactional commit turns
STALE_MEMBER_EPOCH into ILLEGAL_GENERATION (Kafka's ``OffsetMetadataManager`` does:
TxnOffsetCommit has no STALE_MEMBER_EPOCH), so a zombie whose epoch moved on learns
it is fenced in the classic words its producer understands.

As Kafka's, the group instance id plays no part for a consumer group: a static member
is known by its member id (a replaced static member's old id is UNKNOWN_MEMBER_ID).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.group.consumer.consumer_group import ConsumerGroup

UNKNOWN_GENERATION_ID = -1


def validate_offset_commit(
    group: ConsumerGroup,
    member_id: str,
    member_epoch: int,
    group_instance_id: str | None = None,
    is_transactional: bool = False,
) -> ErrorCode | None:
    """Epoch -1 from an admin client or an ``assign()`` consumer is accepted while the
    group is empty."""
    if member_epoch < 0 and group.num_members == 0:
        return None
    if (
        is_transactional
        and member_epoch == UNKNOWN_GENERATION_ID
        and member_id == ""
        and group_instance_id is None
    ):
        return None
    member = group.members.get(member_id)
    if member is None:
        return ErrorCode.unknown_member_id
    if member_epoch != member.member_epoch:
        if member.use_classic_protocol:
            return ErrorCode.illegal_generation
        return ErrorCode.stale_member_epoch
    return None


def validate_offset_fetch(
    group: ConsumerGroup | None, member_id: str | None, member_epoch: int
) -> ErrorCode | None:
    if group is None or (member_id is None and member_epoch < 0):
        return None
    member = group.members.get(member_id or "")
    if member is None:
        return ErrorCode.unknown_member_id
    if member_epoch != member.member_epoch:
        return ErrorCode.stale_member_epoch
    return None
