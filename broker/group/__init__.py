"""The group coordinator core: Kafka's classic group protocol, synchronous and
clock-injected (see ``coordinator.py``). Handlers import from here."""

from broker.group.coordinator import GroupCoordinator
from broker.group.group_config import NEW_MEMBER_JOIN_TIMEOUT_MS, GroupConfig
from broker.group.group_log import (
    GROUP_METADATA_TOPIC_NAME,
    GroupLog,
    InMemoryGroupLog,
    decode_record,
    encode_record,
)
from broker.group.group_metadata import GroupMetadata
from broker.group.group_state import GroupState, IllegalStateTransition
from broker.group.keys import GroupJoinKey, GroupSyncKey, MemberKey
from broker.group.member_metadata import MemberMetadata
from broker.group.offsets import OffsetAndMetadata
from broker.group.partition_hash import partition_for
from broker.group.results import (
    GroupOverview,
    GroupSummary,
    JoinGroupMember,
    JoinGroupResult,
    LeaveGroupResult,
    LeaveMemberResult,
    MemberSummary,
    OffsetFetchPartition,
    SyncGroupResult,
    TopicPartition,
)

__all__ = [
    "GROUP_METADATA_TOPIC_NAME",
    "NEW_MEMBER_JOIN_TIMEOUT_MS",
    "GroupConfig",
    "GroupCoordinator",
    "GroupJoinKey",
    "GroupLog",
    "GroupMetadata",
    "GroupOverview",
    "GroupState",
    "GroupSummary",
    "GroupSyncKey",
    "IllegalStateTransition",
    "InMemoryGroupLog",
    "JoinGroupMember",
    "JoinGroupResult",
    "LeaveGroupResult",
    "LeaveMemberResult",
    "MemberKey",
    "MemberMetadata",
    "MemberSummary",
    "OffsetAndMetadata",
    "OffsetFetchPartition",
    "SyncGroupResult",
    "TopicPartition",
    "decode_record",
    "encode_record",
    "partition_for",
]
