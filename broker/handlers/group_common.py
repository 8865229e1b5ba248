"""What the group APIs share: answering from a coordinator's callback, now or later.

The coordinator records where a request waits (it knows: the Rebalance purgatory for a
JoinGroup waiting for the group or a follower's SyncGroup waiting for the assignment,
the Produce purgatory for an append to ``__consumer_offsets``), so the handlers pass
their ``RequestContext`` into its calls and only turn the callback into a Future here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from broker.security.authorizer.authorization import AclOperation, ResourceType, authorize
from broker.server.context import RequestContext

T = TypeVar("T")


def answer_when_called(
    start: Callable[[Callable[[T], None]], None], build: Callable[[T], Any]
) -> Any:
    """Run a callback-style coordinator call: its response if it answered during the
    call, else a Future the callback completes (a failing ``build`` fails the Future,
    which the dispatcher answers with UNKNOWN_SERVER_ERROR)."""
    future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    def callback(result: T) -> None:
        if future.done():
            return
        try:
            future.set_result(build(result))
        except Exception as exc:
            future.set_exception(exc)

    start(callback)
    if future.done():
        return future.result()
    return future


def group_denied(
    ctx: RequestContext, group_id: str, operation: AclOperation = AclOperation.READ
) -> bool:
    """Whether an authorizer refuses ``operation`` (READ: the membership APIs) on the group:
    the handler then answers GROUP_AUTHORIZATION_FAILED, as ``KafkaApis``."""
    if ctx.services.security.authorizer is None:
        return False
    return not authorize(ctx, operation, ResourceType.GROUP, group_id)
