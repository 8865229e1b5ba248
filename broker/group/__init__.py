"""Kafka's classic group coordinator, split at Kafka's seam, synchronous and clock-injected.

``GroupCoordinator`` (``group_coordinator.py``, with its JoinGroup and SyncGroup phases in
``group_join.py`` and ``group_sync.py``) runs membership and rebalances;
``GroupMetadataManager`` (``group_metadata_manager.py``) holds the groups and offsets and
writes them to ``__consumer_offsets``; ``group_admin.py`` describes, lists and deletes.
Handlers import from here.
"""

from broker.coordinator.partition_hash import partition_for
from broker.group.group_config import NEW_MEMBER_JOIN_TIMEOUT_MS, GroupConfig, OffsetConfig
from broker.group.group_coordinator import GroupCoordinator
from broker.group.group_log import (
    GROUP_METADATA_TOPIC_NAME,
    GroupLog,
    InMemoryGroupLog,
    decode_record,
    encode_record,
)
from broker.group.group_metadata import GroupMetadata
from broker.group.group_metadata_manager import GroupLoadListener, GroupMetadataManager
from broker.group.group_state import GroupState, IllegalStateTransition
from broker.group.join_params import JoinGroupParams
from broker.group.keys import GroupJoinKey, GroupSyncKey, MemberKey
from broker.group.member_metadata import MemberMetadata
from broker.group.offsets import OffsetAndMetadata
from broker.group.response_callback import ResponseCallback
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
    "GroupLoadListener",
    "GroupLog",
    "GroupMetadata",
    "GroupMetadataManager",
    "GroupOverview",
    "GroupState",
    "GroupSummary",
    "GroupSyncKey",
    "IllegalStateTransition",
    "InMemoryGroupLog",
    "JoinGroupMember",
    "JoinGroupParams",
    "JoinGroupResult",
    "LeaveGroupResult",
    "LeaveMemberResult",
    "MemberKey",
    "MemberMetadata",
    "MemberSummary",
    "OffsetAndMetadata",
    "OffsetConfig",
    "OffsetFetchPartition",
    "ResponseCallback",
    "SyncGroupResult",
    "TopicPartition",
    "decode_record",
    "encode_record",
    "partition_for",
]
