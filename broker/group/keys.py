"""Purgatory keys of the group coordinator (Kafka's GroupJoinKey, GroupSyncKey, MemberKey).

Distinct types keep a group's join watch, its sync watch and its members' heartbeat
watches apart even when they share one purgatory (DelayedSync shares the rebalance
purgatory in Kafka). ``str()`` gives Kafka's key label for the ``/purgatory`` page.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GroupJoinKey:
    """Watch key of a group's DelayedJoin / InitialDelayedJoin."""

    group_id: str

    def __str__(self) -> str:
        return f"join-{self.group_id}"


@dataclass(frozen=True)
class GroupSyncKey:
    """Watch key of a group's DelayedSync."""

    group_id: str

    def __str__(self) -> str:
        return f"sync-{self.group_id}"


@dataclass(frozen=True)
class MemberKey:
    """Watch key of one member's DelayedHeartbeat."""

    group_id: str
    member_id: str

    def __str__(self) -> str:
        return f"{self.group_id}-{self.member_id}"
