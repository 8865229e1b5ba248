"""The simulated event loop: virtual time, seeded ties, FIFO call_soon, stalls, no threads."""

from __future__ import annotations

import asyncio
import time

import pytest

import virtual_time.loop as loop_module
from virtual_time.loop import (
    SimulatedEventLoop,
    SimulationLivelock,
    SimulationStalled,
    run_simulated,
)


def test_an_hour_of_sleep_costs_no_wall_time() -> None:
    async def sleeper() -> float:
        loop = asyncio.get_running_loop()
        for _ in range(60):
            await asyncio.sleep(60)
        return loop.time()

    started = time.perf_counter()
    assert run_simulated(sleeper(), seed=1) == pytest.approx(3600.0)
    assert time.perf_counter() - started < 5  # generous: the point is that it does not sleep


def test_timers_due_at_one_instant_run_in_an_order_the_seed_decides() -> None:
    def order(seed: int) -> list[int]:
        async def race() -> list[int]:
            loop = asyncio.get_running_loop()
            seen: list[int] = []
            for i in range(8):
                loop.call_at(loop.time() + 1.0, seen.append, i)
            await asyncio.sleep(2)
            return seen

        result: list[int] = run_simulated(race(), seed=seed)
        return result

    assert order(7) == order(7)
    assert sorted(order(7)) == list(range(8))
    assert len({tuple(order(seed)) for seed in range(6)}) > 1


def test_call_soon_keeps_asyncio_first_in_first_out_promise() -> None:
    async def fifo() -> list[int]:
        loop = asyncio.get_running_loop()
        seen: list[int] = []
        for i in range(20):
            loop.call_soon(seen.append, i)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        return seen

    assert run_simulated(fifo(), seed=3) == list(range(20))


def test_timers_at_different_instants_keep_their_order() -> None:
    async def staggered() -> list[float]:
        loop = asyncio.get_running_loop()
        seen: list[float] = []
        for delay in (0.3, 0.1, 0.2, 0.0001):
            loop.call_later(delay, seen.append, delay)
        await asyncio.sleep(1)
        return seen

    assert run_simulated(staggered(), seed=11) == [0.0001, 0.1, 0.2, 0.3]


def test_waiting_for_what_can_never_happen_is_reported_not_hung() -> None:
    async def forever() -> None:
        await asyncio.get_running_loop().create_future()

    with pytest.raises(SimulationStalled, match="nothing runnable"):
        run_simulated(forever(), seed=1)


@pytest.fixture
def quick_livelock(monkeypatch: pytest.MonkeyPatch) -> None:
    """2 000 iterations within 50 ms of virtual time make a livelock (a million in 2 s)."""
    monkeypatch.setattr(loop_module, "LIVELOCK_ITERATIONS", 2_000)
    monkeypatch.setattr(loop_module, "LIVELOCK_WINDOW_S", 0.05)


@pytest.mark.usefixtures("quick_livelock")
def test_a_callback_that_reschedules_itself_at_once_is_a_livelock_not_a_hang() -> None:
    async def spin() -> None:
        loop = asyncio.get_running_loop()

        def again() -> None:
            loop.call_soon(again)

        await asyncio.sleep(5.0)
        loop.call_soon(again)
        await asyncio.sleep(10.0)

    with pytest.raises(SimulationLivelock) as caught:
        run_simulated(spin(), seed=1)
    assert caught.value.virtual_s == pytest.approx(5.0)
    assert any("again" in line for line in caught.value.spinning)


@pytest.mark.usefixtures("quick_livelock")
def test_a_deadline_polled_at_the_least_step_is_a_livelock_too() -> None:
    async def crawl() -> None:  # the clock moves by MIN_STEP_S an iteration, for ever
        while True:
            await asyncio.sleep(1e-9)

    with pytest.raises(SimulationLivelock) as caught:
        run_simulated(crawl(), seed=1)
    assert caught.value.virtual_s < 0.01


def test_a_run_past_its_deadline_is_stuck_though_its_clock_moves() -> None:
    async def waits_for_ever() -> None:  # a heartbeat every second, for nothing
        while True:
            await asyncio.sleep(1.0)

    with pytest.raises(SimulationLivelock, match=r"passed its deadline.*waits_for_ever") as caught:
        run_simulated(waits_for_ever(), seed=1, deadline_s=100.0)
    assert 100.0 < caught.value.virtual_s < 104.0
    assert run_simulated(asyncio.sleep(99.0), seed=1, deadline_s=100.0) is None


@pytest.mark.usefixtures("quick_livelock")
def test_chains_of_callbacks_that_end_are_no_livelock() -> None:
    async def chains() -> None:
        for _ in range(100):  # 1 000 iterations at one instant each time, then time moves
            for _ in range(1_000):
                await asyncio.sleep(0)
            await asyncio.sleep(0.1)

    run_simulated(chains(), seed=1)


def test_work_sent_to_a_thread_runs_inline_in_virtual_time() -> None:
    async def in_thread() -> tuple[int, float]:
        loop = asyncio.get_running_loop()
        total = await asyncio.to_thread(sum, [1, 2])
        return total, loop.time()

    assert run_simulated(in_thread(), seed=1) == (3, 0.0)

    async def failing() -> None:
        await asyncio.get_running_loop().run_in_executor(None, int, "x")

    with pytest.raises(ValueError):
        run_simulated(failing(), seed=1)


def test_the_process_clocks_follow_the_loop_while_it_runs_and_come_back_after() -> None:
    async def read_clocks() -> tuple[float, float]:
        await asyncio.sleep(5)
        return time.monotonic(), time.time()

    monotonic, wall = run_simulated(read_clocks(), seed=1)
    assert monotonic == pytest.approx(5.0)
    assert wall == pytest.approx(1_767_225_605.0)
    assert time.time() > 1_767_225_605.0 + 3600  # the real clock is back (later than 2026)


def test_the_loop_starts_where_it_is_told() -> None:
    loop = SimulatedEventLoop(seed=1, start_s=100.0)
    try:
        assert loop.time() == 100.0
    finally:
        loop.close()


def _tie_order(seed: int) -> list[int]:
    """Twelve timers at three instants, one of them cancelled, among twelve cancelled
    timeouts that stay in the heap (as `asyncio.timeout`'s do until their time)."""

    async def race() -> list[int]:
        loop = asyncio.get_running_loop()
        seen: list[int] = []
        handles = [
            loop.call_at(loop.time() + 1.0 + (i % 3) * 0.5, seen.append, i) for i in range(12)
        ]
        for i in range(12):
            loop.call_later(0.5 + i * 0.25, seen.append, 100 + i).cancel()
        handles[4].cancel()
        await asyncio.sleep(3)
        return seen

    result: list[int] = run_simulated(race(), seed=seed)
    return result


def test_a_seed_orders_ties_as_it_always_has() -> None:
    # A seed's order is part of every recorded digest: a change to the loop (its heap, its
    # handles, the draws) that moves it changes every simulation's digest. These orders
    # were recorded when issue 33's second pass drew ties in the timers' creation order (a
    # heap of (when, seq, handle)), which moved them once; a change that moves them must say so.
    assert _tie_order(7) == [9, 3, 0, 6, 10, 7, 1, 5, 11, 8, 2]
    assert _tie_order(8) == [6, 0, 9, 3, 1, 7, 10, 2, 11, 8, 5]


def test_a_tie_is_drawn_in_creation_order_whatever_the_heap_holds() -> None:
    # The point of the (when, seq) heap: timers cancelled and gone from the heap early
    # (its compaction) do not move the order of the ties that stay.
    def order(extra_cancelled: int) -> list[int]:
        async def race() -> list[int]:
            loop = asyncio.get_running_loop()
            seen: list[int] = []
            for i in range(8):
                loop.call_at(loop.time() + 1.0, seen.append, i)
            for i in range(extra_cancelled):
                loop.call_later(0.5 + i * 1e-3, seen.append, 100 + i).cancel()
            await asyncio.sleep(2)
            return seen

        result: list[int] = run_simulated(race(), seed=3)
        return result

    assert order(0) == order(5) == order(300)  # 300: the heap compacts (> 100, > half)
    assert sorted(order(0)) == list(range(8))


def test_a_failing_callback_is_reported_as_asyncio_reports_it_and_the_run_goes_on() -> None:
    reported: list[dict[str, object]] = []

    def fail() -> None:
        raise ValueError("boom")

    async def scenario() -> float:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _loop, context: reported.append(context))
        loop.call_soon(fail)
        loop.call_later(1.0, fail)
        await asyncio.sleep(2)
        return loop.time()

    assert run_simulated(scenario(), seed=1) == pytest.approx(2.0)
    assert len(reported) == 2
    for context in reported:
        assert str(context["message"]).startswith("Exception in callback ")
        assert "fail" in str(context["message"])
        assert isinstance(context["exception"], ValueError)
        assert isinstance(context["handle"], asyncio.Handle)
