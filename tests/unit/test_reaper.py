"""ExpirationReaper on a real event loop (LoopClock over loop.time), short delays.

These assert order and completeness, never wall-clock thresholds.
"""

from __future__ import annotations

import asyncio

from purgatory.clock import LoopClock
from purgatory.reaper import ExpirationReaper
from purgatory.system_timer import SystemTimer
from purgatory.timer_task import TimerTask
from testkit.polling import wait_until


class Signal(TimerTask):
    def __init__(self, delay_ms: int, label: str, fired: list[str], done: asyncio.Event) -> None:
        super().__init__(delay_ms)
        self.label = label
        self.fired = fired
        self.done = done

    def run(self) -> None:
        self.fired.append(self.label)
        self.done.set()


async def test_reaper_expires_short_delays_in_order() -> None:
    loop = asyncio.get_running_loop()
    timer = SystemTimer(LoopClock(loop.time))
    reaper = ExpirationReaper(timer)
    reaper.start()
    fired: list[str] = []
    last = asyncio.Event()
    delays = [45, 5, 30, 15, 50, 25]
    for delay in delays:
        timer.add(Signal(delay, str(delay), fired, last if delay == 50 else asyncio.Event()))
    await asyncio.wait_for(last.wait(), timeout=5)
    await reaper.stop()
    assert fired == [str(d) for d in sorted(delays)]
    assert timer.size() == 0


async def test_earlier_task_wakes_a_sleeping_reaper() -> None:
    loop = asyncio.get_running_loop()
    timer = SystemTimer(LoopClock(loop.time))
    reaper = ExpirationReaper(timer)
    reaper.start()
    fired: list[str] = []
    late_done, early_done = asyncio.Event(), asyncio.Event()
    timer.add(Signal(1000, "late", fired, late_done))
    await wait_until(
        lambda: reaper._waiter is not None, "the reaper asleep until the late deadline", step_s=0
    )
    timer.add(Signal(10, "early", fired, early_done))
    await asyncio.wait_for(early_done.wait(), timeout=5)
    assert fired == ["early"]  # fired while the late one still waits
    assert timer.size() == 1
    await reaper.stop()


async def test_idle_reaper_wakes_when_work_arrives() -> None:
    loop = asyncio.get_running_loop()
    timer = SystemTimer(LoopClock(loop.time))
    reaper = ExpirationReaper(timer)
    reaper.start()
    await asyncio.sleep(0)  # reaper parks with nothing scheduled
    fired: list[str] = []
    done = asyncio.Event()
    timer.add(Signal(5, "x", fired, done))
    await asyncio.wait_for(done.wait(), timeout=5)
    assert fired == ["x"]
    await reaper.stop()


async def test_stop_leaves_no_task_behind() -> None:
    loop = asyncio.get_running_loop()
    timer = SystemTimer(LoopClock(loop.time))
    before = asyncio.all_tasks()
    reaper = ExpirationReaper(timer, name="reaper-under-test")
    reaper.start()
    timer.add(Signal(10_000, "never", [], asyncio.Event()))
    await asyncio.sleep(0)
    assert any(t.get_name() == "reaper-under-test" for t in asyncio.all_tasks())
    await reaper.stop()
    assert asyncio.all_tasks() == before
    assert not reaper.running and timer.on_earlier_expiration is None
    await reaper.stop()  # idempotent
