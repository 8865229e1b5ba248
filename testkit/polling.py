"""The one "wait until a condition holds" loop of the tests and benches.

Real brokers settle in real time (a leader elected, a member joined, a segment deleted):
a test polls a condition a bounded number of times and fails, naming what it waited for,
when it never holds. A condition may be a plain function or a coroutine function (one
that asks the broker). The sleep between attempts is the only sleep a test needs: a test
that wants to show something did NOT happen waits for a later event that proves the
moment has passed, not for a fixed time.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable

Condition = Callable[[], bool] | Callable[[], Awaitable[bool]]


async def wait_until(
    condition: Condition, what: str, *, attempts: int = 200, step_s: float = 0.05
) -> None:
    """Poll ``condition`` up to ``attempts`` times, ``step_s`` apart; AssertionError if it
    never holds (about ``attempts * step_s`` seconds: 10 s by default)."""
    for _ in range(attempts):
        held = condition()
        if inspect.isawaitable(held):
            held = await held
        if held:
            return
        await asyncio.sleep(step_s)
    raise AssertionError(f"timed out waiting for {what}")
