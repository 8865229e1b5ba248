"""What the JoinGroup and SyncGroup phases (``group_join.py``, ``group_sync.py``) use of
the group coordinator: its purgatories, its manager, and its membership machinery.

A Protocol, so the phase modules need not import the coordinator that imports them;
``GroupCoordinator`` is the one implementation.
"""

from __future__ import annotations

from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from broker.group.delayed_sync import PendingSync
from broker.group.group_config import GroupConfig
from broker.group.group_metadata import GroupMetadata
from broker.group.group_metadata_manager import GroupMetadataManager
from broker.group.member_metadata import MemberMetadata
from purgatory import DelayedOperationPurgatory


class Membership(PendingSync, Protocol):
    config: GroupConfig
    heartbeat_purgatory: DelayedOperationPurgatory[Any]
    rebalance_purgatory: DelayedOperationPurgatory[Any]
    group_manager: GroupMetadataManager

    def validate_current_member(
        self, group: GroupMetadata, member_id: str, group_instance_id: str | None, operation: str
    ) -> ErrorCode | None:
        """Static members must use their current member id; anyone must be a member."""
        ...

    def maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None: ...

    def prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        """Enter PreparingRebalance and park the join phase."""
        ...

    def complete_and_schedule_next_heartbeat_expiration(
        self, group: GroupMetadata, member: MemberMetadata
    ) -> None: ...

    def complete_and_schedule_next_expiration(
        self, group: GroupMetadata, member: MemberMetadata, timeout_ms: int
    ) -> None:
        """Complete the member's current DelayedHeartbeat and start the next one."""
        ...

    def add_pending_member_expiration(
        self, group: GroupMetadata, member_id: str, timeout_ms: int
    ) -> None: ...

    def remove_heartbeat_for_leaving_member(self, group: GroupMetadata, member_id: str) -> None: ...
