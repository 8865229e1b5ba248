"""The unit of work the timer schedules, and the node that holds it in a bucket.

Kafka splits a scheduled task in two: the ``TimerTask`` (what to run, and after how
long) and the ``TimerTaskEntry`` (where it sits in the wheel, and until when). A task
has at most one live entry; giving it a new entry (re-adding it to the timer) unlinks
the old one, and an entry whose task has moved on is "cancelled". That is what makes
cancel O(1) and re-adding a task safe: nothing ever searches a bucket.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Protocol

__all__ = ["Bucket", "TimerTask", "TimerTaskEntry"]


class Bucket(Protocol):
    """What an entry uses of the bucket it sits in: unlinking itself.

    A Protocol so this module need not import the wheel that imports it;
    ``timing_wheel.TimerTaskList`` is the one implementation.
    """

    def remove(self, entry: TimerTaskEntry) -> None: ...


class TimerTask(ABC):
    """A task to run once ``delay_ms`` after it is added to a timer.

    ``run`` is called on the timer's (single) thread after the wheel has finished
    advancing. ``cancel`` removes the task from the timer at once; it is idempotent and
    cheap, so completion paths can call it unconditionally.
    """

    __slots__ = ("_timer_task_entry", "delay_ms")

    def __init__(self, delay_ms: int) -> None:
        self.delay_ms = int(delay_ms)
        self._timer_task_entry: TimerTaskEntry | None = None

    @abstractmethod
    def run(self) -> None:
        """Called when the task expires (never when it was cancelled first)."""

    def cancel(self) -> None:
        entry = self._timer_task_entry
        if entry is not None:
            self._timer_task_entry = None
            lst = entry.list
            if lst is not None:
                lst.remove(entry)

    @property
    def deadline_ms(self) -> int | None:
        """The timer-clock time this task expires at, while it is scheduled; else None."""
        entry = self._timer_task_entry
        return None if entry is None else entry.expiration_ms

    def _set_timer_task_entry(self, entry: TimerTaskEntry) -> None:
        # A task lives in one place only: moving it unlinks the previous entry.
        old = self._timer_task_entry
        if old is not None and old is not entry:
            lst = old.list
            if lst is not None:
                lst.remove(old)
        self._timer_task_entry = entry


class TimerTaskEntry:
    """A task's place in a bucket: the task, its absolute expiration, its bucket.

    Entries are keys of their bucket's insertion-ordered dict (identity hash), which
    gives O(1) add and unlink without hand-written list surgery in Python.
    """

    __slots__ = ("expiration_ms", "list", "timer_task")

    def __init__(self, timer_task: TimerTask, expiration_ms: int) -> None:
        self.timer_task = timer_task
        self.expiration_ms = expiration_ms
        self.list: Bucket | None = None
        timer_task._set_timer_task_entry(self)

    @property
    def cancelled(self) -> bool:
        """True once the task was cancelled or re-added elsewhere."""
        return self.timer_task._timer_task_entry is not self

    def remove(self) -> None:
        lst = self.list
        if lst is not None:
            lst.remove(self)

    def __repr__(self) -> str:
        return f"TimerTaskEntry({self.timer_task!r}, expiration_ms={self.expiration_ms})"
