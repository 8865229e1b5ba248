"""DelayedJoin and InitialDelayedJoin: the JoinGroup phase of a rebalance, parked.

When a group starts rebalancing, every member's JoinGroup is parked until all known
members have rejoined (``try_complete``) or the rebalance timeout — the largest
``rebalance.timeout.ms`` (the consumer's ``max.poll.interval.ms``) of the members —
passes. Either way ``on_complete`` ends the phase: members that did not rejoin are
dropped and the next generation starts. The operation is keyed by
:class:`~broker.group.keys.GroupJoinKey` in the rebalance purgatory.

A JoinGroup answered when the phase ends by expiring (the rebalance timeout ran out,
or an InitialDelayedJoin's delay did) leaves the Rebalance purgatory *expired*; one
answered when every member has rejoined, *completed*.

InitialDelayedJoin is used when an *Empty* group starts its first rebalance. A fleet of
consumers starting together would otherwise rebalance once per arrival, so the join phase
never completes early: it waits ``group.initial.rebalance.delay.ms``, and each time that
delay runs out with new members having arrived meanwhile it waits another
``min(delay, remaining)``, never past the group's rebalance timeout.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from broker.group.keys import GroupJoinKey
from broker.group.response_callback import ResponseCallback, mark_expired
from purgatory import DelayedOperation, DelayedOperationPurgatory

if TYPE_CHECKING:
    from broker.group.group_metadata import GroupMetadata


class JoinPhase(Protocol):
    """What a DelayedJoin calls back (the group coordinator)."""

    def try_complete_join(
        self, group: GroupMetadata, force_complete: Callable[[], bool]
    ) -> bool: ...

    def on_complete_join(self, group: GroupMetadata) -> None: ...


class DelayedJoin(DelayedOperation):
    """The join phase of a rebalance of a non-empty group."""

    def __init__(
        self, coordinator: JoinPhase, group: GroupMetadata, rebalance_timeout_ms: int
    ) -> None:
        super().__init__(rebalance_timeout_ms)
        self._coordinator = coordinator
        self.group = group
        self._answered: list[ResponseCallback[Any]] = []

    def try_complete(self) -> bool:
        return self._coordinator.try_complete_join(self.group, self.force_complete)

    def on_complete(self) -> None:
        waiting = self.group.awaiting_callbacks()
        self._coordinator.on_complete_join(self.group)
        self._answered = [callback for callback in waiting if callback.answered]

    def on_expiration(self) -> None:
        # Everything else happens in on_complete, which expiry runs first.
        mark_expired(self._answered)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(group={self.group.group_id!r})"


class InitialDelayedJoin(DelayedJoin):
    """The first rebalance of an Empty group: wait for the rest of the fleet.

    ``delay_ms`` is this round's wait; ``remaining_ms`` is what is left of the
    rebalance timeout after it (Kafka's arithmetic, kept exactly so timings match).
    """

    def __init__(
        self,
        coordinator: JoinPhase,
        purgatory: DelayedOperationPurgatory[Any],
        group: GroupMetadata,
        configured_rebalance_delay_ms: int,
        delay_ms: int,
        remaining_ms: int,
    ) -> None:
        super().__init__(coordinator, group, delay_ms)
        self._rebalance_purgatory = purgatory
        self.configured_rebalance_delay_ms = configured_rebalance_delay_ms
        self.initial_delay_ms = delay_ms
        self.remaining_ms = remaining_ms

    def try_complete(self) -> bool:
        # Never early: the point is to give late starters time to arrive.
        return False

    def on_complete(self) -> None:
        if self.group.new_member_added and self.remaining_ms != 0:
            self.group.new_member_added = False
            delay = min(self.configured_rebalance_delay_ms, self.remaining_ms)
            remaining = max(self.remaining_ms - self.initial_delay_ms, 0)
            self._rebalance_purgatory.try_complete_else_watch(
                InitialDelayedJoin(
                    self._coordinator,
                    self._rebalance_purgatory,
                    self.group,
                    self.configured_rebalance_delay_ms,
                    delay,
                    remaining,
                ),
                [GroupJoinKey(self.group.group_id)],
            )
        else:
            super().on_complete()
