"""A consumer group member's two timeouts on the coordinator's ``CoordinatorTimer``
(Kafka's ``scheduleConsumerGroupSessionTimeout`` / ``...RebalanceTimeout``).

* the **session timeout**: rescheduled on every heartbeat; when it fires the member is
  fenced ("the member session expired.");
* a classic member's **join timeout** (scheduled, if absent, when it is told to rejoin:
  REBALANCE_IN_PROGRESS) and **sync timeout** (after its JoinGroup), both at its
  rebalance timeout, cancelled by the JoinGroup / SyncGroup that follows (Kafka's
  ``scheduleConsumerGroupJoinTimeoutIfAbsent`` / ``...SyncTimeout``);
* the **rebalance timeout**: scheduled when a member is asked to revoke partitions, at
  the member's ``RebalanceTimeoutMs``; when it fires and the member is still at the epoch
  it had then, it is fenced.

What fencing means (remove the member, bump the group epoch, write the records) is the
coordinator's: it is handed in as ``on_expired(group_id, member_id, epoch, reason)``,
with ``epoch`` None for a session timeout.
"""

from __future__ import annotations

from collections.abc import Callable

from broker.group.consumer.coordinator_timer import CoordinatorTimer

OnExpired = Callable[[str, str, int | None, str], None]


def session_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("session-timeout", group_id, member_id)


def rebalance_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("rebalance-timeout", group_id, member_id)


def join_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("join-timeout", group_id, member_id)


def sync_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("sync-timeout", group_id, member_id)


class ConsumerGroupTimeouts:
    """Session and rebalance timeouts of consumer group members."""

    def __init__(self, timer: CoordinatorTimer, on_expired: OnExpired) -> None:
        self.timer = timer
        self._on_expired = on_expired

    def schedule_session_timeout(self, group_id: str, member_id: str, timeout_ms: int) -> None:
        self.timer.schedule(
            session_key(group_id, member_id),
            timeout_ms,
            lambda: self._on_expired(group_id, member_id, None, "the member session expired."),
        )

    def schedule_rebalance_timeout(
        self, group_id: str, member_id: str, member_epoch: int, rebalance_timeout_ms: int
    ) -> None:
        reason = (
            f"it failed to transition from epoch {member_epoch} within {rebalance_timeout_ms}ms."
        )
        self.timer.schedule(
            rebalance_key(group_id, member_id),
            rebalance_timeout_ms,
            lambda: self._on_expired(group_id, member_id, member_epoch, reason),
        )

    def cancel_rebalance_timeout(self, group_id: str, member_id: str) -> None:
        self.timer.cancel(rebalance_key(group_id, member_id))

    def schedule_join_timeout_if_absent(
        self, group_id: str, member_id: str, rebalance_timeout_ms: int
    ) -> None:
        key = join_key(group_id, member_id)
        if self.timer.is_scheduled(key):
            return
        reason = "the classic member failed to join within the rebalance timeout."
        self.timer.schedule(
            key, rebalance_timeout_ms, lambda: self._on_expired(group_id, member_id, None, reason)
        )

    def cancel_join_timeout(self, group_id: str, member_id: str) -> None:
        self.timer.cancel(join_key(group_id, member_id))

    def schedule_sync_timeout(
        self, group_id: str, member_id: str, rebalance_timeout_ms: int
    ) -> None:
        reason = "the member failed to sync within timeout."
        self.timer.schedule(
            sync_key(group_id, member_id),
            rebalance_timeout_ms,
            lambda: self._on_expired(group_id, member_id, None, reason),
        )

    def cancel_sync_timeout(self, group_id: str, member_id: str) -> None:
        self.timer.cancel(sync_key(group_id, member_id))

    def cancel(self, group_id: str, member_id: str) -> None:
        for key in (session_key, rebalance_key, join_key, sync_key):
            self.timer.cancel(key(group_id, member_id))
