"""The expiration reaper: the one asyncio part of purgatory/.

Kafka's ``ExpiredOperationReaper`` is a thread blocked in ``DelayQueue.poll``. Here it
is one task on the event loop that sleeps until the timer's next bucket expiration,
advances the timer, and repeats. It costs nothing while idle: with nothing scheduled it
waits on a future with no timer armed at all.

The sleep is a ``loop.call_later`` handle that completes a future. When the timer queues
a bucket earlier than every queued one (``SystemTimer.on_earlier_expiration``), the
reaper re-arms the handle in place, without waking its task; during its own
``advance_clock`` it ignores these calls, because it re-reads the next expiration
right after.
"""

from __future__ import annotations

import asyncio

from purgatory.system_timer import SystemTimer

__all__ = ["ExpirationReaper"]


class ExpirationReaper:
    """Drive ``timer`` from the running event loop until :meth:`stop`."""

    def __init__(self, timer: SystemTimer, name: str = "ExpirationReaper") -> None:
        self.timer = timer
        self.name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._deadline_ms: int | None = None
        self._advancing = False
        self.expired_total = 0
        """Tasks this reaper has run (for metrics)."""

    @property
    def next_tick_ms(self) -> int | None:
        """When the reaper wakes next to advance its timer (None: asleep until a task
        is added), on the timer's clock."""
        return self._deadline_ms

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        """Start reaping on the running loop (call from a coroutine)."""
        if self._task is not None:
            raise RuntimeError(f"{self.name} already started")
        loop = asyncio.get_running_loop()
        self._loop = loop
        self.timer.on_earlier_expiration = self._on_earlier_expiration
        self._task = loop.create_task(self._run(), name=self.name)

    async def stop(self) -> None:
        """Cancel the reaper task and wait for it; leaves nothing scheduled."""
        task = self._task
        if task is None:
            return
        self._task = None
        if self.timer.on_earlier_expiration == self._on_earlier_expiration:
            self.timer.on_earlier_expiration = None
        self._disarm()
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # stop() itself was cancelled: do not swallow that

    async def _run(self) -> None:
        assert self._loop is not None
        loop = self._loop
        timer = self.timer
        try:
            while True:
                self._advancing = True
                try:
                    self.expired_total += timer.advance_clock()
                finally:
                    self._advancing = False
                waiter: asyncio.Future[None] = loop.create_future()
                self._waiter = waiter
                self._arm()
                await waiter
                self._waiter = None
        finally:
            self._waiter = None
            self._disarm()

    def _arm(self) -> None:
        """(Re)arm the wake-up for the timer's next expiration."""
        self._disarm()
        next_ms = self.timer.next_expiration_ms()
        self._deadline_ms = next_ms
        if next_ms is None:
            return  # idle: wait until something earlier is scheduled
        delay_ms = next_ms - self.timer.clock.now_ms()
        if delay_ms <= 0:
            self._wake()
            return
        assert self._loop is not None
        self._handle = self._loop.call_later(delay_ms / 1000.0, self._wake)

    def _disarm(self) -> None:
        handle = self._handle
        if handle is not None:
            self._handle = None
            handle.cancel()

    def _wake(self) -> None:
        self._handle = None
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _on_earlier_expiration(self) -> None:
        if self._advancing:
            return
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        deadline = self._deadline_ms
        next_ms = self.timer.next_expiration_ms()
        if next_ms is not None and (deadline is None or next_ms < deadline):
            self._arm()

    def __repr__(self) -> str:
        return f"ExpirationReaper(name={self.name!r}, running={self.running})"
