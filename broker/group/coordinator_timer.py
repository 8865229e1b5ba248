"""Kafka's ``CoordinatorTimer``: keyed timeouts of the group coordinators (consumer, streams,
share groups; ``member_timeouts.py`` keys them by group and member).

``schedule(key, delay_ms, operation)`` puts a timer task on the broker's scheduler timer
(a ``SystemTimer`` on the injected clock, run by its ExpirationReaper) and replaces any
task scheduled under the same key, as Kafka's ``timer.schedule(key, ...)`` does; a
member's heartbeat reschedules its session timeout that way, at O(1) (the old entry is
unlinked from its bucket at once). ``cancel(key)`` drops it.

Where this differs from Kafka: Kafka runs the operation as a write event of the
coordinator runtime (and retries it when the write fails); here it runs on the reaper's
turn of the event loop, synchronously, and a failing operation is logged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable

from purgatory import SystemTimer, TimerTask

log = logging.getLogger("broker.group")


class _TimeoutTask(TimerTask):
    __slots__ = ("_key", "_operation", "_owner")

    def __init__(
        self, owner: CoordinatorTimer, key: Hashable, delay_ms: int, operation: Callable[[], None]
    ) -> None:
        super().__init__(delay_ms)
        self._owner = owner
        self._key = key
        self._operation = operation

    def run(self) -> None:
        if self._owner._tasks.get(self._key) is not self:
            return
        del self._owner._tasks[self._key]
        try:
            self._operation()
        except Exception:
            log.exception("Timeout %r failed", self._key)


class CoordinatorTimer:
    """Keyed, replaceable timeouts on one ``SystemTimer``."""

    def __init__(self, timer: SystemTimer) -> None:
        self._timer = timer
        self._tasks: dict[Hashable, _TimeoutTask] = {}

    def schedule(self, key: Hashable, delay_ms: int, operation: Callable[[], None]) -> None:
        self.cancel(key)
        task = _TimeoutTask(self, key, max(int(delay_ms), 0), operation)
        self._tasks[key] = task
        self._timer.add(task)

    def cancel(self, key: Hashable) -> None:
        task = self._tasks.pop(key, None)
        if task is not None:
            task.cancel()

    def is_scheduled(self, key: Hashable) -> bool:
        return key in self._tasks

    def __len__(self) -> int:
        return len(self._tasks)
