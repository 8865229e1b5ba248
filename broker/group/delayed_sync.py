"""DelayedSync: the SyncGroup phase of a rebalance, bounded by the rebalance timeout.

After the join phase every member owes a SyncGroup. Kafka 3.x (KAFKA-13008's "pending
sync") parks a DelayedSync keyed by :class:`~broker.group.keys.GroupSyncKey`: it
completes as soon as all members have synced (or the group moved on), and on expiry the
members that never sent SyncGroup are removed and the group rebalances without them —
otherwise a leader that vanished after its JoinGroup would leave everyone parked in
SyncGroup until their own session timeouts. The SyncGroups its expiry answers leave the
Rebalance purgatory *expired*.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from broker.group.response_callback import mark_expired
from purgatory import DelayedOperation

if TYPE_CHECKING:
    from broker.group.group_metadata import GroupMetadata


class PendingSync(Protocol):
    """What a DelayedSync calls back (the group coordinator)."""

    def try_complete_pending_sync(
        self, group: GroupMetadata, generation_id: int, force_complete: Callable[[], bool]
    ) -> bool: ...

    def on_expire_pending_sync(self, group: GroupMetadata, generation_id: int) -> None: ...


class DelayedSync(DelayedOperation):
    """Wait for every member of ``generation_id`` to send SyncGroup."""

    def __init__(
        self,
        coordinator: PendingSync,
        group: GroupMetadata,
        generation_id: int,
        rebalance_timeout_ms: int,
    ) -> None:
        super().__init__(rebalance_timeout_ms)
        self._coordinator = coordinator
        self.group = group
        self.generation_id = generation_id

    def try_complete(self) -> bool:
        return self._coordinator.try_complete_pending_sync(
            self.group, self.generation_id, self.force_complete
        )

    def on_complete(self) -> None:
        pass

    def on_expiration(self) -> None:
        waiting = self.group.awaiting_callbacks()
        self._coordinator.on_expire_pending_sync(self.group, self.generation_id)
        mark_expired(waiting)

    def __repr__(self) -> str:
        return f"DelayedSync(group={self.group.group_id!r}, generation={self.generation_id})"
