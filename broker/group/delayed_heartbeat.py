"""DelayedHeartbeat: the session timeout of one member, parked in the heartbeat purgatory.

Every heartbeat (and anything else proving the member alive: an offset commit, a
completed join or sync) completes the member's current DelayedHeartbeat and schedules
the next one ``session.timeout.ms`` ahead. If one expires the member is declared dead,
removed, and the group rebalances. Members parked in JoinGroup/SyncGroup count as alive
(they cannot heartbeat while waiting). Keyed by :class:`~broker.group.keys.MemberKey`.

A *pending* DelayedHeartbeat watches a member id handed out with MEMBER_ID_REQUIRED:
it completes when that id joins, and on expiry the id is forgotten.

A member declared dead whose own JoinGroup or SyncGroup was still parked (a new member
waits at most the new-member timeout for its join phase) is answered by the expiry: that
request leaves the Rebalance purgatory *expired*. Other members' requests answered by the
rebalance it starts were waiting on the group, not on this member: they are *completed*.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from broker.group.response_callback import mark_expired
from purgatory import DelayedOperation

if TYPE_CHECKING:
    from broker.group.group_metadata import GroupMetadata


class MemberSessions(Protocol):
    """What a DelayedHeartbeat calls back (the group coordinator)."""

    def try_complete_heartbeat(
        self,
        group: GroupMetadata,
        member_id: str,
        is_pending: bool,
        force_complete: Callable[[], bool],
    ) -> bool: ...

    def on_expire_heartbeat(
        self, group: GroupMetadata, member_id: str, is_pending: bool
    ) -> None: ...


class DelayedHeartbeat(DelayedOperation):
    """Expect a sign of life from ``member_id`` within ``timeout_ms``."""

    def __init__(
        self,
        coordinator: MemberSessions,
        group: GroupMetadata,
        member_id: str,
        is_pending: bool,
        timeout_ms: int,
    ) -> None:
        super().__init__(timeout_ms)
        self._coordinator = coordinator
        self.group = group
        self.member_id = member_id
        self.is_pending = is_pending

    def try_complete(self) -> bool:
        return self._coordinator.try_complete_heartbeat(
            self.group, self.member_id, self.is_pending, self.force_complete
        )

    def on_complete(self) -> None:
        pass

    def on_expiration(self) -> None:
        group, member_id = self.group, self.member_id
        member = group.get(member_id) if group.has(member_id) else None
        waiting = (
            [
                c
                for c in (member.awaiting_join_callback, member.awaiting_sync_callback)
                if c is not None
            ]
            if member is not None
            else []
        )
        self._coordinator.on_expire_heartbeat(group, member_id, self.is_pending)
        mark_expired(waiting)

    def __repr__(self) -> str:
        kind = "pending " if self.is_pending else ""
        return f"DelayedHeartbeat({kind}{self.group.group_id!r}/{self.member_id!r})"
