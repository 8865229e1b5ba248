"""What the coordinator hands back to the request handlers.

Small, plain dataclasses of error codes (kio's ``ErrorCode``) and values, shaped like
the Kafka responses they become, so a handler is a field-by-field copy into kio's
response class. The coordinator never builds protocol messages itself: that keeps it
usable for every API version and testable without the protocol package.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

from kio.schema.errors import ErrorCode

NO_GENERATION = -1
NO_LEADER = ""
UNKNOWN_MEMBER_ID = ""
NO_PROTOCOL = ""
NO_PROTOCOL_TYPE = ""


class TopicPartition(NamedTuple):
    """A (topic, partition) pair; equal to, and hashed like, the plain tuple."""

    topic: str
    partition: int


@dataclass(frozen=True)
class JoinGroupMember:
    """One member in the leader's JoinGroup response: what the assignor gets to see."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True)
class JoinGroupResult:
    """JoinGroup response data. ``members`` is non-empty only in the leader's response."""

    member_id: str
    error: ErrorCode
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = NO_LEADER
    skip_assignment: bool = False
    members: list[JoinGroupMember] = field(default_factory=list)


@dataclass(frozen=True)
class SyncGroupResult:
    """SyncGroup response data: this member's assignment (opaque bytes) or an error."""

    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


JoinCallback = Callable[[JoinGroupResult], None]
SyncCallback = Callable[[SyncGroupResult], None]
# OffsetCommit's answer: an error per partition.
CommitCallback = Callable[[dict[TopicPartition, ErrorCode]], None]


@dataclass(frozen=True)
class LeaveMemberResult:
    """Per-member outcome of a LeaveGroup (v3+ carries several members)."""

    member_id: str
    group_instance_id: str | None
    error: ErrorCode


class LeaveGroupResult(NamedTuple):
    """``(top-level error, per-member results)``; unpacks like a tuple."""

    error: ErrorCode
    members: list[LeaveMemberResult]


@dataclass(frozen=True)
class MemberSummary:
    """A member as DescribeGroups shows it. Metadata and assignment only when Stable."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupSummary:
    """DescribeGroups data for one group."""

    group_id: str
    error: ErrorCode
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberSummary] = field(default_factory=list)


@dataclass(frozen=True)
class GroupOverview:
    """ListGroups data for one group."""

    group_id: str
    protocol_type: str
    state: str


@dataclass(frozen=True)
class OffsetFetchPartition:
    """OffsetFetch data for one partition; offset -1 when nothing is committed."""

    offset: int
    leader_epoch: int
    metadata: str
    error: ErrorCode
