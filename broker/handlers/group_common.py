"""What the group APIs share: finding this broker's coordinator and parking answers."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from broker.context import RequestContext
from broker.group.coordinator import GroupCoordinator
from broker.purgatories import PurgatoryName, PurgatoryOutcome

T = TypeVar("T")


def coordinator_of(ctx: RequestContext) -> GroupCoordinator:
    return ctx.services.group_coordinator.coordinator


def answer_when_called(
    ctx: RequestContext,
    purgatory: PurgatoryName,
    start: Callable[[Callable[[T], None]], None],
    build: Callable[[T], Any],
) -> Any:
    """Run a callback-style coordinator call; park the request if it does not answer now.

    The coordinator calls back exactly once: at once (the common case for a rejoin of a
    known group) or later, when a DelayedJoin or DelayedSync completes.
    """
    future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    def callback(result: T) -> None:
        if not future.done():
            future.set_result(build(result))

    start(callback)
    if future.done():
        return future.result()
    ctx.parked_in(purgatory)
    future.add_done_callback(lambda _f: ctx.purgatory_done(PurgatoryOutcome.COMPLETED))
    return future
