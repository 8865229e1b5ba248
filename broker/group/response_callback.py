"""A parked JoinGroup/SyncGroup's answer, and where the request waits for it.

The component that parks an operation records where it parked. For the group APIs that
is the coordinator: only it knows whether a JoinGroup waits for the rest of the group
(a DelayedJoin in the Rebalance purgatory), whether a SyncGroup waits for its leader's
assignment (bounded by the group's DelayedSync, in the Rebalance purgatory too) or,
for the leader, for its group-metadata append to reach the offsets topic's in-sync
replicas (a DelayedProduce in the Produce purgatory). So the handler passes its request
(a :class:`~broker.server.purgatories.ParkedRequest`) into the coordinator call, and the
coordinator wraps it with the response callback into a :class:`ResponseCallback`:

* ``park(purgatory)``: the coordinator returns without an answer; the request waits in
  ``purgatory``. Nothing is recorded for a request answered during the call.
* As a ``ParkedRequest`` itself, it is what an append to ``__consumer_offsets`` hands
  the replica manager, which records the Produce purgatory and the DelayedProduce's
  outcome on it.
* Calling it answers the request; a parked request leaves its purgatory *completed*.
* :func:`mark_expired`: a delayed operation bounding a request's wait that answers it by
  expiring marks it *expired*: a DelayedJoin or InitialDelayedJoin the JoinGroups of its
  join phase, a DelayedSync the SyncGroups waiting for the assignment, a member's
  DelayedHeartbeat that member's own parked JoinGroup or SyncGroup. It runs after the
  answer, which is fine: the response is only written later, on the event loop.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

from broker.server.purgatories import ParkedRequest, PurgatoryName, PurgatoryOutcome

T = TypeVar("T")


class ResponseCallback(Generic[T]):
    """Answers one request exactly once, and tells it where it waited."""

    __slots__ = ("_respond", "answered", "purgatory", "request")

    def __init__(self, respond: Callable[[T], None], request: ParkedRequest | None = None) -> None:
        self._respond = respond
        self.request = request
        self.purgatory: PurgatoryName | None = None
        self.answered = False

    def __call__(self, result: T) -> None:
        if self.answered:
            return
        self.answered = True
        if self.purgatory is not None:
            self.purgatory_done(PurgatoryOutcome.COMPLETED)
        self._respond(result)

    def park(self, purgatory: PurgatoryName) -> None:
        """The coordinator returned without an answer: the request waits in ``purgatory``
        (unless something already parked it elsewhere, e.g. an append in Produce)."""
        if not self.answered and self.purgatory is None:
            self.parked_in(purgatory)

    @property
    def parked_request(self) -> ParkedRequest | None:
        """What to hand an append that may park this request (None: no request to tell)."""
        return self if self.request is not None else None

    # -- ParkedRequest -----------------------------------------------------------------

    @property
    def connection_id(self) -> str:
        return self.request.connection_id if self.request is not None else ""

    @property
    def correlation_id(self) -> int:
        return self.request.correlation_id if self.request is not None else -1

    def parked_in(self, purgatory: PurgatoryName) -> None:
        self.purgatory = purgatory
        if self.request is not None:
            self.request.parked_in(purgatory)

    def purgatory_done(self, outcome: PurgatoryOutcome) -> None:
        if self.request is not None:
            self.request.purgatory_done(outcome)

    def __repr__(self) -> str:
        return f"ResponseCallback(purgatory={self.purgatory}, answered={self.answered})"


def mark_expired(callbacks: Iterable[ResponseCallback[Any]]) -> None:
    """The requests among ``callbacks`` that an expiring group operation answered out of
    the Rebalance purgatory leave it expired."""
    for callback in callbacks:
        if callback.answered and callback.purgatory is PurgatoryName.REBALANCE:
            callback.purgatory_done(PurgatoryOutcome.EXPIRED)
