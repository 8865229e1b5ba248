"""The replay's causal wait (`_wait_for_all`): every answer, or the timeout, on virtual time."""

from __future__ import annotations

import asyncio

from spark_jobs.replay_client import _wait_for_all
from virtual_time.loop import run_simulated


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _settle_at(loop: asyncio.AbstractEventLoop, future: asyncio.Future[None], at: float) -> None:
    loop.call_at(at, _settle, future)


def test_returns_when_the_last_answer_comes_whatever_the_order() -> None:
    async def scenario() -> float:
        loop = asyncio.get_running_loop()
        futures = [loop.create_future() for _ in range(4)]
        # Given in captured answer order, answered in another: the first comes last.
        for future, at in zip(futures, (3.0, 1.0, 2.0, 0.5), strict=True):
            _settle_at(loop, future, at)
        await _wait_for_all(futures, timeout_s=60.0)
        assert all(f.done() for f in futures)
        return loop.time()

    assert run_simulated(scenario(), seed=1) == 3.0


def test_the_timeout_ends_the_wait_and_cancels_nothing() -> None:
    async def scenario() -> tuple[float, list[bool]]:
        loop = asyncio.get_running_loop()
        futures = [loop.create_future() for _ in range(3)]
        _settle_at(loop, futures[2], 1.0)  # answered; the other two never are
        await _wait_for_all(futures, timeout_s=5.0)
        waited = loop.time()
        for future in futures:
            _settle(future)  # not cancelled: still settles
        return waited, [f.cancelled() for f in futures]

    waited, cancelled = run_simulated(scenario(), seed=1)
    assert waited == 5.0
    assert cancelled == [False, False, False]


def test_done_futures_cost_no_wait_and_leave_no_timer() -> None:
    async def scenario() -> tuple[float, int]:
        loop = asyncio.get_running_loop()
        futures = [loop.create_future() for _ in range(3)]
        for future in futures:
            future.set_result(None)
        await _wait_for_all(futures, timeout_s=60.0)
        await _wait_for_all([], timeout_s=60.0)
        live = [h for h in loop.pending_timers() if not h.cancelled()]  # type: ignore[attr-defined]
        return loop.time(), len(live)

    assert run_simulated(scenario(), seed=1) == (0.0, 0)
