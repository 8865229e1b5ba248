"""The timer facade over the timing wheel (Kafka's ``SystemTimer``), for one thread.

Kafka's SystemTimer polls its DelayQueue from a reaper thread and hands expired tasks to
an executor. Here nothing runs in the background: whoever drives the timer (the
:class:`~purgatory.reaper.ExpirationReaper`, or a test) calls :meth:`advance_clock`,
which moves the wheel to the clock's "now" and then runs what expired. Expired tasks are
collected first and run only after the wheel has finished advancing, so a task that
schedules another task always sees a consistent wheel.
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Callable

from purgatory.clock import Clock
from purgatory.timer_task import TimerTask, TimerTaskEntry
from purgatory.timing_wheel import BucketQueue, TaskCounter, TimingWheel

__all__ = ["SystemTimer"]

log = logging.getLogger(__name__)


class SystemTimer:
    """Schedule :class:`TimerTask` s on a hierarchical timing wheel.

    ``add`` and ``cancel`` are O(1). ``size()`` counts scheduled tasks (a cancelled one
    leaves at once). ``next_expiration_ms()`` is the earliest non-empty bucket's
    expiration: the time the driver should next call ``advance_clock``.
    """

    __slots__ = ("_queue", "_task_counter", "clock", "name", "timing_wheel")

    def __init__(
        self, clock: Clock, tick_ms: int = 1, wheel_size: int = 20, name: str = "timer"
    ) -> None:
        self.clock = clock
        self.name = name
        self._queue = BucketQueue()
        self._task_counter = TaskCounter()
        self.timing_wheel = TimingWheel(
            tick_ms, wheel_size, clock.now_ms(), self._queue, self._task_counter
        )

    @property
    def on_earlier_expiration(self) -> Callable[[], None] | None:
        """Called (synchronously, from ``add``) when a bucket expiring before every
        queued bucket is queued; the reaper installs it to re-arm its sleep."""
        return self._queue.on_earlier_expiration

    @on_earlier_expiration.setter
    def on_earlier_expiration(self, callback: Callable[[], None] | None) -> None:
        self._queue.on_earlier_expiration = callback

    def add(self, task: TimerTask) -> None:
        """Schedule ``task`` to run ``task.delay_ms`` from now.

        A task already scheduled is moved (its old entry is unlinked). A task that is
        already due (``delay_ms <= 0``, or expired for the wheel) runs at once, here.
        """
        delay_ms = task.delay_ms
        if delay_ms <= 0:
            task.cancel()
            _run_task(task)
            return
        entry = TimerTaskEntry(task, delay_ms + self.clock.now_ms())
        if not self.timing_wheel.add(entry) and task._timer_task_entry is entry:
            task._timer_task_entry = None
            _run_task(task)

    def advance_clock(self) -> int:
        """Advance the wheel to ``clock.now_ms()``, then run every expired task.

        Returns how many tasks ran.
        """
        now = self.clock.now_ms()
        heap = self._queue.heap
        wheel = self.timing_wheel
        if not heap or heap[0][0] > now:
            wheel.advance_clock(now)
            return 0
        expired: list[TimerTaskEntry] = []
        heappop = heapq.heappop
        while heap and heap[0][0] <= now:
            expiration, _, bucket = heappop(heap)
            if bucket.expiration != expiration:
                continue  # stale: defensive, a bucket is queued once per expiration
            wheel.advance_clock(expiration)
            for entry in bucket.flush():
                # Re-adding cascades into a finer level, or reports "expired".
                if not wheel.add(entry) and entry.timer_task._timer_task_entry is entry:
                    expired.append(entry)
        wheel.advance_clock(now)
        ran = 0
        for entry in expired:
            task = entry.timer_task
            # An earlier task in this batch may have cancelled or moved this one.
            if task._timer_task_entry is entry:
                task._timer_task_entry = None
                _run_task(task)
                ran += 1
        return ran

    def size(self) -> int:
        return self._task_counter.value

    def next_expiration_ms(self) -> int | None:
        """Expiration of the earliest bucket that still holds a task, or None.

        Buckets emptied by cancels are dropped from the queue here (their expiration is
        reset so that a later add queues them again), so an idle reaper is not woken
        for nothing. This is safe because the wheel does not move past a bucket before
        it is flushed, and an empty bucket has nothing to flush.
        """
        heap = self._queue.heap
        while heap:
            expiration, _, bucket = heap[0]
            if bucket.expiration == expiration and len(bucket):
                return expiration
            heapq.heappop(heap)
            if bucket.expiration == expiration:
                bucket.expiration = -1
        return None

    def peek_next_expiration_ms(self) -> int | None:
        """``next_expiration_ms`` without dropping emptied buckets from the queue: for
        an observer (the console), which must change nothing the reaper sees."""
        live = [exp for exp, _, bucket in self._queue.heap if bucket.expiration == exp and bucket]
        return min(live, default=None)

    def __repr__(self) -> str:
        return f"SystemTimer(name={self.name!r}, size={self.size()})"


def _run_task(task: TimerTask) -> None:
    # Kafka runs expired tasks on an executor, where one failing task cannot stop the
    # others; here a failure is logged and the remaining tasks still run.
    try:
        task.run()
    except Exception:
        log.exception("timer task %r failed", task)
