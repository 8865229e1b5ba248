"""DelayedHeartbeat: the session timeout of one member, parked in the heartbeat purgatory.

Every heartbeat (and anything else proving the member alive: an offset commit, a
completed join or sync) completes the member's current DelayedHeartbeat and schedules
the next one ``session.timeout.ms`` ahead. If one expires the member is declared dead,
removed, and the group rebalances. Members parked in JoinGroup/SyncGroup count as alive
(they cannot heartbeat while waiting). Keyed by :class:`~broker.group.keys.MemberKey`.

A *pending* DelayedHeartbeat watches a member id handed out with MEMBER_ID_REQUIRED:
it completes when that id joins, and on expiry the id is forgotten.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from purgatory import DelayedOperation

if TYPE_CHECKING:
    from broker.group.coordinator import GroupCoordinator
    from broker.group.group_metadata import GroupMetadata


class DelayedHeartbeat(DelayedOperation):
    """Expect a sign of life from ``member_id`` within ``timeout_ms``."""

    def __init__(
        self,
        coordinator: GroupCoordinator,
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
        self._coordinator.on_expire_heartbeat(self.group, self.member_id, self.is_pending)

    def __repr__(self) -> str:
        kind = "pending " if self.is_pending else ""
        return f"DelayedHeartbeat({kind}{self.group.group_id!r}/{self.member_id!r})"
