"""Kafka's ``ConsumerGroup.validateOffsetCommit`` / ``validateOffsetFetch``: a consumer
group's commits and fetches carry the member id and member epoch (OffsetCommit v9+,
OffsetFetch v9+). None means accepted; else Kafka's error (UNKNOWN_MEMBER_ID,
STALE_MEMBER_EPOCH; ILLEGAL_GENERATION for a classic member of the group, whose
OffsetCommit carries its generation, which is its member epoch).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.group.consumer.consumer_group import ConsumerGroup


def validate_offset_commit(
    group: ConsumerGroup, member_id: str, member_epoch: int
) -> ErrorCode | None:
    """Epoch -1 from an admin client or an ``assign()`` consumer is accepted while the
    group is empty."""
    if member_epoch < 0 and group.num_members == 0:
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
