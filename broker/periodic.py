"""A housekeeping job that runs every N milliseconds on the event loop.

Kafka runs its housekeeping on a scheduler thread (isr-expiration, log retention,
offset expiry). Here each job is an asyncio task owned by the component that starts it;
a failing run is logged and the job goes on, because housekeeping must never take the
broker down.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

log = logging.getLogger("broker.periodic")


class PeriodicTask:
    def __init__(self, name: str, interval_ms: float, job: Callable[[], object]) -> None:
        self.name = name
        self.interval_s = max(interval_ms, 1.0) / 1000
        self._job = job
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)

    async def stop(self) -> None:
        if self._task is None:
            return
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                self._job()
            except Exception:
                log.exception("%s failed", self.name)
