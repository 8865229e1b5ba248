"""Kafka's ``DelayedOperationPurgatory``: operations watched by key, timed by a timer.

An operation is watched on one or more keys (for example topic-partitions); whatever
changes a key's state calls ``check_and_complete(key)``, which tries to complete every
operation watching it. An operation not completed in time is expired by the timer.

Watch lists are plain lists (no demand that operation classes be hashable), taken out
of the map while their key is scanned, so an ``on_complete`` that watches or checks
again (re-entrancy on one thread) is safe. A ``check_and_complete`` of the key being
scanned, made from inside the scan (an ``on_complete`` that changed that key's state),
makes the running scan go over the key's list once more when it ends: it reaches the
operations the scan had already passed, as Kafka's nested scan of the same list does.

Purging follows Kafka. An operation completed through key A is removed from A's list
at once, but stays in the lists of its other keys (and an expired one in all its lists)
until either a ``check_and_complete`` on that key passes over it or a purge scans every
list. Kafka's trigger is ``estimatedTotalOperations - numDelayed > purgeInterval``,
where the estimate counts newly watched operations and is reset to ``numDelayed`` by
each purge: it counts operations, not watcher entries, so an operation on three keys
does not look like three. Kafka checks it on each reaper round; here it is checked every
``purge_interval`` newly watched operations, which bounds the scan cost to one pass per
``purge_interval`` watches. ``purge_completed()`` can also be called directly.

``num_delayed()`` is the timer's size, as in Kafka (each purgatory has its own timer):
give each purgatory its own :class:`~purgatory.system_timer.SystemTimer`.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Generic, Protocol, TypeVar

from purgatory.delayed_operation import DelayedOperation, OperationListener
from purgatory.timer_task import TimerTask

__all__ = ["DelayedOperationPurgatory", "OperationListener", "OperationTimer"]

Op = TypeVar("Op", bound=DelayedOperation)


class OperationTimer(Protocol):
    """What the purgatory needs from its timer (``SystemTimer`` is the real one)."""

    def add(self, task: TimerTask) -> None: ...

    def size(self) -> int: ...


class DelayedOperationPurgatory(Generic[Op]):
    """Watch operations by key until they complete or their timer expires them."""

    def __init__(
        self,
        name: str,
        timer: OperationTimer,
        purge_interval: int = 1000,
        listener: OperationListener | None = None,
    ) -> None:
        self.name = name
        self.timer = timer
        self.purge_interval = purge_interval
        # Plain lists: appending and rebuilding a list is the cheapest scan in CPython.
        # A completed operation leaves the list of the key it completed through at
        # once, and its other keys' lists at their next check or at the next purge.
        self._watchers_by_key: dict[Hashable, list[Op]] = {}
        self._estimated_total_operations = 0
        self._watched_since_purge_check = 0
        self.expired_count = 0
        """Operations that completed by expiring (Kafka's expiration meters)."""
        self.completed_count = 0
        """Watched operations completed before their deadline (the console's rate)."""
        self.purged_count = 0
        """Completed watcher entries removed by purges (for tests and metrics)."""
        self.listener = listener
        """Told when an operation is watched, completes or expires (capture); optional."""
        # Keys whose list a check_and_complete is scanning now, and those of them checked
        # again from inside that scan (the scan then goes over the list once more).
        self._scanning: set[Hashable] = set()
        self._rescan: set[Hashable] = set()

    # -- the request path -------------------------------------------------------------

    def try_complete_else_watch(self, operation: Op, keys: Iterable[Hashable]) -> bool:
        """Complete ``operation`` now, else watch it on ``keys`` and time it.

        Check, watch, check again, and only then add to the timer: an operation that
        became completable after the first check but before it was watched would
        otherwise miss the ``check_and_complete`` that made it so. Returns True if the
        operation was completed by this call.
        """
        if operation.safe_try_complete():
            return True
        watch_keys = tuple(keys)
        operation.watch_keys = watch_keys
        operation._purgatory = self
        if self.listener is not None:
            self.listener.on_watch(operation, watch_keys)
        if watch_keys:
            watchers_by_key = self._watchers_by_key
            for key in watch_keys:
                watchers = watchers_by_key.get(key)
                if watchers is None:
                    watchers_by_key[key] = [operation]
                else:
                    watchers.append(operation)
            self._estimated_total_operations += 1
            self._watched_since_purge_check += 1
            if self._watched_since_purge_check >= self.purge_interval:
                self._watched_since_purge_check = 0
                self._maybe_purge()
        if operation.safe_try_complete():
            return True
        if not operation._completed:
            self.timer.add(operation)
            if operation._completed:
                operation.cancel()
        return False

    def check_and_complete(self, key: Hashable) -> int:
        """Try to complete every operation watching ``key``; how many completed.

        Called from inside a scan of ``key`` (an operation's completion changed the
        key's state), it only asks that scan to go over the list again, and returns 0:
        the operations it completes are counted by the scan already running.
        """
        watchers_by_key = self._watchers_by_key
        # Take the list out while scanning: an operation completed here may watch new
        # operations on the same key (re-entrantly); they go to a fresh list, merged
        # back below, so nothing is lost.
        watchers = watchers_by_key.pop(key, None)
        scanning = self._scanning
        if scanning and key in scanning:
            # Nested in a scan of this key: leave the fresh list where the scan merges it.
            if watchers is not None:
                watchers_by_key[key] = watchers
            self._rescan.add(key)
            return 0
        if watchers is None:
            return 0
        completed = 0
        scanning.add(key)
        try:
            while True:
                completed_before = completed
                keep: list[Op] = []
                for operation in watchers:
                    if operation._completed:
                        continue
                    if operation.try_complete():
                        completed += 1
                    elif not operation._completed:
                        keep.append(operation)
                added = watchers_by_key.pop(key, None)
                if added is not None:
                    keep.extend(added)
                rescan = self._rescan
                if not rescan or key not in rescan:
                    break
                rescan.discard(key)
                if completed == completed_before:
                    break  # nothing completed, so no state change to look at again
                watchers = keep
        finally:
            scanning.discard(key)
            if self._rescan:
                self._rescan.discard(key)
        if keep:
            watchers_by_key[key] = keep
        return completed

    def cancel_for_key(self, key: Hashable) -> list[Op]:
        """Stop watching ``key``: cancel the timers of its operations, completing none.

        Returns the operations that were still pending (completed ones are dropped).
        They stay in their other keys' lists, as in Kafka, but will no longer expire.
        """
        watchers = self._watchers_by_key.pop(key, None)
        if watchers is None:
            return []
        cancelled: list[Op] = []
        seen: set[int] = set()
        for operation in watchers:
            if not operation._completed and id(operation) not in seen:
                seen.add(id(operation))
                operation.cancel()
                cancelled.append(operation)
        return cancelled

    # -- sizes and inspection ---------------------------------------------------------

    def watched(self) -> int:
        """Kafka's PurgatorySize: watcher entries across all keys (completed included
        until purged)."""
        return sum(len(watchers) for watchers in self._watchers_by_key.values())

    def num_delayed(self) -> int:
        """Kafka's NumDelayedOperations: operations waiting in the timer."""
        return self.timer.size()

    def watched_keys(self) -> list[Hashable]:
        return list(self._watchers_by_key)

    def delayed_operations(self) -> list[Op]:
        """The operations waiting now, each once, by deadline (for a debug endpoint).

        Each reports its keys (``watch_keys``) and ``deadline_ms``; see
        ``DelayedOperation.debug_info``.
        """
        seen: dict[int, Op] = {}
        for watchers in self._watchers_by_key.values():
            for operation in watchers:
                if not operation._completed:
                    seen[id(operation)] = operation
        ops = list(seen.values())
        ops.sort(key=lambda op: (op.deadline_ms is None, op.deadline_ms or 0))
        return ops

    # -- purging ------------------------------------------------------------------------

    def _maybe_purge(self) -> None:
        num_delayed = self.timer.size()
        if self._estimated_total_operations - num_delayed > self.purge_interval:
            self._estimated_total_operations = num_delayed
            self.purge_completed()

    def purge_completed(self) -> int:
        """Drop completed operations from every watch list, and empty keys; returns
        the number of watcher entries removed."""
        purged = 0
        watchers_by_key = self._watchers_by_key
        for key, watchers in list(watchers_by_key.items()):
            live = [operation for operation in watchers if not operation._completed]
            purged += len(watchers) - len(live)
            if live:
                watchers_by_key[key] = live
            else:
                del watchers_by_key[key]
        self.purged_count += purged
        return purged

    def __repr__(self) -> str:
        return (
            f"DelayedOperationPurgatory(name={self.name!r}, watched={self.watched()}, "
            f"delayed={self.num_delayed()})"
        )
