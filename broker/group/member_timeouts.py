"""A group member's timeouts, one home for the consumer, streams and share group
coordinators (Kafka 4's ``GroupMetadataManager`` has one timer path for its modern groups:
``groupSessionTimeoutKey`` / ``groupRebalanceTimeoutKey``, ``schedule*SessionTimeout``,
``schedule*RebalanceTimeout``, ``cancelTimers``).

* the **session timeout**: rescheduled on every heartbeat, at the group's session timeout
  (its GROUP config, else the broker's); when it fires the member is fenced ("the member
  session expired.");
* the **rebalance timeout**: scheduled when a member is asked to revoke what it owns
  (partitions, tasks), at the member's ``RebalanceTimeoutMs``, cancelled once it has; when
  it fires and the member is still at the epoch it had then, it is fenced;
* a classic member's (of a consumer group) **join timeout** (scheduled, if absent, when it
  is told to rejoin: REBALANCE_IN_PROGRESS) and **sync timeout** (after its JoinGroup), both
  at its rebalance timeout, cancelled by the JoinGroup / SyncGroup that follows (Kafka's
  ``scheduleConsumerGroupJoinTimeoutIfAbsent`` / ``...SyncTimeout``).

What fencing means (remove the member, bump the group epoch, write the records) is the
coordinator's: it is handed in as ``on_expired(group_id, member_id, epoch, reason)``, with
``epoch`` None when the fencing does not depend on the member's epoch.
``expired_member`` is the check every coordinator makes before it fences.

Where this differs from Kafka: each coordinator has its own ``CoordinatorTimer`` (Kafka's
runtime has one a ``__consumer_offsets`` partition), so the keys need not name the group
type.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, MutableMapping
from typing import Protocol, TypeVar

from broker.group.coordinator_timer import CoordinatorTimer
from purgatory import SystemTimer

log = logging.getLogger("broker.group")

OnExpired = Callable[[str, str, int | None, str], None]

SESSION_EXPIRED = "the member session expired."


def session_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("session-timeout", group_id, member_id)


def rebalance_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("rebalance-timeout", group_id, member_id)


def join_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("join-timeout", group_id, member_id)


def sync_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("sync-timeout", group_id, member_id)


class EpochMember(Protocol):
    """What a fencing reads of a member (a consumer, streams or share group's)."""

    @property
    def member_id(self) -> str: ...

    @property
    def member_epoch(self) -> int: ...


class TimedMember(EpochMember, Protocol):
    """A member that may owe revocations (a consumer or streams group's)."""

    @property
    def rebalance_timeout_ms(self) -> int: ...


E_co = TypeVar("E_co", bound=EpochMember, covariant=True)
M = TypeVar("M", bound=EpochMember)
T = TypeVar("T", bound=TimedMember)


class TimedGroup(Protocol[E_co]):
    """What the timeouts read of a group: its id and its members by id."""

    @property
    def group_id(self) -> str: ...

    @property
    def members(self) -> Mapping[str, E_co]: ...


class MemberTimeouts:
    """The members' timeouts of one coordinator's groups, on its ``CoordinatorTimer``."""

    def __init__(
        self,
        timer: SystemTimer,
        session_timeout_ms: Callable[[str], int],
        on_expired: OnExpired,
    ) -> None:
        self.timer = CoordinatorTimer(timer)
        self._session_timeout_ms = session_timeout_ms
        self._on_expired = on_expired

    # ------------------------------------------------------------- session
    def schedule_session_timeout(
        self, group_id: str, member_id: str, timeout_ms: int | None = None
    ) -> None:
        """(Re)start the member's session timeout: ``timeout_ms``, else the group's."""
        if timeout_ms is None:
            timeout_ms = self._session_timeout_ms(group_id)
        self.timer.schedule(
            session_key(group_id, member_id),
            timeout_ms,
            lambda: self._on_expired(group_id, member_id, None, SESSION_EXPIRED),
        )

    # ----------------------------------------------------------- rebalance
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

    def update_rebalance_timeout(self, group_id: str, member: TimedMember, revoking: bool) -> None:
        """After a reconciliation step changed the member: its rebalance timeout runs while
        it owes revocations (``revoking``), from its new epoch; otherwise there is none."""
        if revoking:
            self.schedule_rebalance_timeout(
                group_id, member.member_id, member.member_epoch, member.rebalance_timeout_ms
            )
        else:
            self.cancel_rebalance_timeout(group_id, member.member_id)

    # ------------------------------------------------ classic members' join / sync
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

    # --------------------------------------------------------- whole members
    def cancel(self, group_id: str, member_id: str) -> None:
        """Kafka's ``cancelTimers``: the member is gone (left, fenced, replaced)."""
        for key in (session_key, rebalance_key, join_key, sync_key):
            self.timer.cancel(key(group_id, member_id))

    def cancel_group(self, group: TimedGroup[EpochMember]) -> None:
        """Every member's timeouts: the group is dropped, unloaded or converted."""
        for member_id in list(group.members):
            self.cancel(group.group_id, member_id)

    def start_group(self, group: TimedGroup[T], revoking: Callable[[T], bool]) -> None:
        """Kafka's ``onLoaded``: every member's session timeout starts now, and the
        rebalance timeout of one that owes revocations."""
        for member_id, member in group.members.items():
            self.schedule_session_timeout(group.group_id, member_id)
            if revoking(member):
                self.schedule_rebalance_timeout(
                    group.group_id, member_id, member.member_epoch, member.rebalance_timeout_ms
                )


def expired_member(
    groups: Mapping[str, TimedGroup[M]],
    group_id: str,
    member_id: str,
    member_epoch: int | None,
    reason: str,
) -> M | None:
    """The member a timeout fences: None when it or its group is gone, or, for a
    rebalance timeout (``member_epoch`` set), when it has moved on from that epoch."""
    group = groups.get(group_id)
    member = group.members.get(member_id) if group is not None else None
    if member is None:
        return None
    if member_epoch is not None and member.member_epoch != member_epoch:
        return None
    log.info("[GroupId %s] Member %s fenced from the group because %s", group_id, member_id, reason)
    return member


G = TypeVar("G", bound=TimedGroup[EpochMember])


def drop_group(groups: MutableMapping[str, G], group_id: str, timeouts: MemberTimeouts) -> G | None:
    """Forget the group (dropped, unloaded, replaced by a load) and its members'
    timeouts; the group, or None when there was none."""
    group = groups.pop(group_id, None)
    if group is not None:
        timeouts.cancel_group(group)
    return group
