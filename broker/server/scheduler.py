"""Housekeeping that runs every N milliseconds, on the broker's injected clock.

Kafka runs its housekeeping (isr-expiration, log retention, offset expiry) on a
``KafkaScheduler``. Here a ``PeriodicTask`` is a timer task on the broker's scheduler
timer (``PurgatorySet.scheduler_timer``, driven by its own ExpirationReaper): when it
runs, it does its job and puts itself back on the wheel. Nothing sleeps and nothing
reads a clock of its own, so a unit test drives housekeeping with ``ManualClock`` and
``SystemTimer.advance_clock()``. A failing run is logged and the job goes on, because
housekeeping must never take the broker down.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from purgatory import SystemTimer, TimerTask

log = logging.getLogger("broker.scheduler")  # the name its log lines have always carried


class PeriodicTask(TimerTask):
    """``job`` every ``period_ms`` between ``start()`` and ``stop()``."""

    __slots__ = ("_job", "_running", "_timer", "name", "period_ms")

    def __init__(
        self, timer: SystemTimer, name: str, period_ms: float, job: Callable[[], object]
    ) -> None:
        self.period_ms = max(int(period_ms), 1)
        super().__init__(self.period_ms)
        self._timer = timer
        self.name = name
        self._job = job
        self._running = False

    def start(self) -> None:
        self._running = True
        self.delay_ms = self.period_ms
        self._timer.add(self)

    def stop(self) -> None:
        self._running = False
        self.cancel()

    @property
    def running(self) -> bool:
        return self._running

    def run(self) -> None:
        if not self._running:
            return
        try:
            self._job()
        except Exception:
            log.exception("%s failed", self.name)
        if self._running:
            self.delay_ms = self.period_ms
            self._timer.add(self)

    def __repr__(self) -> str:
        return f"PeriodicTask({self.name!r}, every {self.period_ms} ms)"
