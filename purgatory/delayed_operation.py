"""Kafka's ``DelayedOperation``: a request parked until it can complete or times out.

An operation completes exactly once, by whichever path gets there first: a
``try_complete`` that finds it satisfied (via some key's ``check_and_complete``), or
its timer expiring (``run``). Kafka guards this with an atomic flag and a lock; here
every method is a plain ``def`` on the event-loop thread, so no await can interleave
inside a state change and a boolean is enough.

Subclasses implement:

* ``try_complete()``: check whether the operation can complete now; if so call
  ``force_complete()`` and return its result, else return False.
* ``on_complete()``: do the work of completing (build and send the response). Runs
  exactly once, whether the operation completed or expired.
* ``on_expiration()``: extra work on expiry only (metrics); runs after ``on_complete``.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Hashable
from typing import Protocol

from purgatory.timer_task import TimerTask

__all__ = ["DelayedOperation", "OperationListener"]


class OperationListener(Protocol):
    """Told of every watched operation's life: for a capture or a trace, not for logic.

    Set one on a purgatory (``DelayedOperationPurgatory.listener``). Operations that
    complete on their first check are never watched and are not reported. Calls happen
    on the thread completing the operation, after ``on_complete``; a listener must not
    raise and should be quick.
    """

    def on_watch(self, operation: DelayedOperation, keys: tuple[Hashable, ...]) -> None: ...

    def on_complete(self, operation: DelayedOperation) -> None: ...

    def on_expire(self, operation: DelayedOperation) -> None: ...


class _ExpirationListener(Protocol):
    """What an operation tells its purgatory when it ends (expiry counter, listener)."""

    expired_count: int
    completed_count: int
    listener: OperationListener | None


class DelayedOperation(TimerTask):
    """Base class of every delayed operation (produce, fetch, join, heartbeat, ...)."""

    __slots__ = ("_completed", "_expired", "_purgatory", "watch_keys")

    def __init__(self, delay_ms: int) -> None:
        super().__init__(delay_ms)
        self._completed = False
        self._expired = False
        self._purgatory: _ExpirationListener | None = None
        self.watch_keys: tuple[Hashable, ...] = ()
        """The keys the purgatory watches this operation on (set when watched)."""

    @abstractmethod
    def try_complete(self) -> bool:
        """Complete now (via ``force_complete``) if satisfied; True if completed."""

    @abstractmethod
    def on_complete(self) -> None:
        """The completion work; called exactly once."""

    @abstractmethod
    def on_expiration(self) -> None:
        """Called after ``on_complete`` when the operation completed by timing out."""

    @property
    def is_completed(self) -> bool:
        return self._completed

    @property
    def is_expired(self) -> bool:
        """True from the start of ``on_complete`` when the timer completed it: so that
        ``on_complete``, which Kafka runs before ``on_expiration``, can already answer
        as an expired operation (and say so once, not "completed" then "expired")."""
        return self._expired

    def force_complete(self) -> bool:
        """Complete the operation if nobody has yet.

        True only for the one caller that completed it; that caller's call cancels the
        timer entry (so the timer forgets it at once) and runs ``on_complete``.
        """
        return self._finish(expired=False)

    def _finish(self, expired: bool) -> bool:
        if self._completed:
            return False
        self._completed = True
        self._expired = expired
        self.cancel()
        self.on_complete()
        purgatory = self._purgatory
        if purgatory is not None:
            if expired:
                purgatory.expired_count += 1
            else:
                purgatory.completed_count += 1
            listener = purgatory.listener  # None unless someone listens: one read
            if listener is not None:
                if expired:
                    listener.on_expire(self)
                else:
                    listener.on_complete(self)
        return True

    def safe_try_complete(self) -> bool:
        """``try_complete`` unless already completed (Kafka's locked variant)."""
        if self._completed:
            return False
        return self.try_complete()

    def run(self) -> None:
        """The expiry path, called by the timer."""
        if self._finish(expired=True):
            self.on_expiration()

    def debug_info(self) -> dict[str, object]:
        """A JSON-friendly description for the broker's ``/purgatory`` endpoint."""
        return {
            "type": type(self).__name__,
            "keys": [str(key) for key in self.watch_keys],
            "delay_ms": self.delay_ms,
            "deadline_ms": self.deadline_ms,
            "completed": self._completed,
        }

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(delay_ms={self.delay_ms}, "
            f"completed={self._completed}, keys={self.watch_keys!r})"
        )
