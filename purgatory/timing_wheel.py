"""Kafka's hierarchical timing wheel (kafka.utils.timer.TimingWheel), one thread.

A wheel of ``wheel_size`` buckets, each ``tick_ms`` wide, covers
``interval = tick_ms * wheel_size``. ``current_time`` is always a multiple of
``tick_ms``. An entry whose expiration is before ``current_time + tick_ms`` is expired
(``add`` returns False: the caller runs it). One within the interval goes into bucket
``(expiration // tick_ms) % wheel_size``, whose expiration becomes
``(expiration // tick_ms) * tick_ms``. One beyond goes to the overflow wheel, created on
demand with ``tick_ms = interval`` (same size, starting at this wheel's current time).

With tick 1 ms and size 20 the levels are 20 ms, 400 ms, 8 s, 160 s, ...: a 350 ms
task waits in the second level and a 450 ms one in the third; as time passes their
bucket expires and they are re-added ("cascade") into a finer level, until the finest
level finds them expired.

Only buckets are ordered, never entries: a bucket is pushed on the
:class:`BucketQueue` (Kafka's DelayQueue, here a heapq) when its expiration changes,
so the queue holds at most one item per bucket however many tasks are scheduled.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable

from purgatory.timer_task import TimerTaskEntry

__all__ = ["BucketQueue", "TaskCounter", "TimerTaskList", "TimingWheel"]


class TaskCounter:
    """How many entries sit in buckets, shared by every bucket of every level.

    The timer's ``size()`` reads it; buckets update it on add, remove and flush, so a
    cancel is visible in ``size()`` at once.
    """

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0


class TimerTaskList:
    """A bucket: the entries expiring in one tick of one wheel level.

    Entries are kept as keys of an insertion-ordered dict (O(1) add/unlink, C speed)
    rather than a hand-made doubly linked list, which is slower in CPython.
    ``expiration`` only changes through :meth:`set_expiration` (True when it changed,
    which is when the bucket must be queued again) and is reset to -1 by :meth:`flush`.
    """

    __slots__ = ("_counter", "_entries", "expiration")

    def __init__(self, task_counter: TaskCounter) -> None:
        self._counter = task_counter
        self._entries: dict[TimerTaskEntry, None] = {}
        self.expiration = -1

    def set_expiration(self, expiration_ms: int) -> bool:
        if self.expiration != expiration_ms:
            self.expiration = expiration_ms
            return True
        return False

    def add(self, entry: TimerTaskEntry) -> None:
        old = entry.list
        if old is self:
            return
        if old is not None:
            old.remove(entry)
        self._entries[entry] = None
        entry.list = self
        self._counter.value += 1

    def remove(self, entry: TimerTaskEntry) -> None:
        if entry.list is self:
            del self._entries[entry]
            entry.list = None
            self._counter.value -= 1

    def flush(self) -> list[TimerTaskEntry]:
        """Empty the bucket and return its entries (the caller re-adds each one)."""
        entries = self._entries
        self._entries = {}
        self.expiration = -1
        self._counter.value -= len(entries)
        for entry in entries:
            entry.list = None
        return list(entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"TimerTaskList(expiration={self.expiration}, size={len(self._entries)})"


class BucketQueue:
    """The buckets that hold entries, ordered by expiration: a heap of
    ``(expiration, seq, bucket)``.

    A bucket is offered only when its expiration changed, and its expiration only
    changes after it was polled (flushed), so it is in the heap at most once. The
    ``seq`` breaks ties between buckets of different levels expiring together.
    ``on_earlier_expiration`` is called when an offered bucket expires before every
    queued one: that is the moment a sleeping reaper must be woken early.
    """

    __slots__ = ("_seq", "heap", "on_earlier_expiration")

    def __init__(self) -> None:
        self.heap: list[tuple[int, int, TimerTaskList]] = []
        self._seq = itertools.count()
        self.on_earlier_expiration: Callable[[], None] | None = None

    def offer(self, bucket: TimerTaskList) -> None:
        expiration = bucket.expiration
        heap = self.heap
        earlier = not heap or expiration < heap[0][0]
        heapq.heappush(heap, (expiration, next(self._seq), bucket))
        if earlier:
            callback = self.on_earlier_expiration
            if callback is not None:
                callback()

    def __len__(self) -> int:
        return len(self.heap)


class TimingWheel:
    """One level of the hierarchy; the finest level is the one the timer talks to.

    The wheel never reads a clock: it moves only when told (``advance_clock``).
    """

    __slots__ = (
        "_buckets",
        "_overflow_wheel",
        "_queue",
        "_task_counter",
        "current_time",
        "interval",
        "start_ms",
        "tick_ms",
        "wheel_size",
    )

    def __init__(
        self,
        tick_ms: int,
        wheel_size: int,
        start_ms: int,
        queue: BucketQueue,
        task_counter: TaskCounter | None = None,
    ) -> None:
        if tick_ms < 1 or wheel_size < 2:
            raise ValueError("tick_ms must be >= 1 and wheel_size >= 2")
        self.tick_ms = tick_ms
        self.wheel_size = wheel_size
        self.start_ms = start_ms
        self.interval = tick_ms * wheel_size
        self.current_time = start_ms - (start_ms % tick_ms)
        self._queue = queue
        self._task_counter = task_counter if task_counter is not None else TaskCounter()
        self._buckets = [TimerTaskList(self._task_counter) for _ in range(wheel_size)]
        self._overflow_wheel: TimingWheel | None = None

    @property
    def overflow_wheel(self) -> TimingWheel | None:
        return self._overflow_wheel

    def _add_overflow_wheel(self) -> TimingWheel:
        wheel = self._overflow_wheel
        if wheel is None:
            wheel = TimingWheel(
                self.interval, self.wheel_size, self.current_time, self._queue, self._task_counter
            )
            self._overflow_wheel = wheel
        return wheel

    def add(self, entry: TimerTaskEntry) -> bool:
        """Place ``entry``; False when it is already expired or cancelled.

        An entry beyond this level's interval goes up the overflow wheels (made on
        demand) until one covers it: a loop rather than Kafka's recursion, since a
        2-second fetch climbs three levels on every add.
        """
        if entry.timer_task._timer_task_entry is not entry:
            return False
        expiration = entry.expiration_ms
        wheel = self
        while True:
            current_time = wheel.current_time
            tick_ms = wheel.tick_ms
            if expiration < current_time + tick_ms:
                return False
            if expiration < current_time + wheel.interval:
                virtual_id = expiration // tick_ms
                bucket = wheel._buckets[virtual_id % wheel.wheel_size]
                bucket.add(entry)
                # Kafka's rule: queue the bucket only when its expiration changes.
                if bucket.set_expiration(virtual_id * tick_ms):
                    wheel._queue.offer(bucket)
                return True
            overflow = wheel._overflow_wheel
            wheel = overflow if overflow is not None else wheel._add_overflow_wheel()

    def advance_clock(self, time_ms: int) -> None:
        """Move ``current_time`` forward to ``time_ms`` rounded down to a tick."""
        if time_ms >= self.current_time + self.tick_ms:
            self.current_time = time_ms - (time_ms % self.tick_ms)
            overflow = self._overflow_wheel
            if overflow is not None:
                overflow.advance_clock(self.current_time)

    def levels(self) -> list[TimingWheel]:
        """This wheel and its overflow wheels, finest first (for inspection and tests)."""
        out: list[TimingWheel] = []
        wheel: TimingWheel | None = self
        while wheel is not None:
            out.append(wheel)
            wheel = wheel._overflow_wheel
        return out

    def bucket_sizes(self) -> list[int]:
        """Tasks in each bucket of this level, by slot (for inspection: the console)."""
        return [len(bucket) for bucket in self._buckets]

    def bucket_for(self, entry: TimerTaskEntry) -> TimerTaskList | None:
        """The bucket of this level holding ``entry``, if any (for inspection)."""
        lst = entry.list
        for bucket in self._buckets:
            if bucket is lst:
                return bucket
        return None

    def __repr__(self) -> str:
        return (
            f"TimingWheel(tick_ms={self.tick_ms}, wheel_size={self.wheel_size}, "
            f"current_time={self.current_time})"
        )
