"""A timer task that records when it ran, for the timer and wheel tests."""

from __future__ import annotations

from purgatory import ManualClock, TimerTask


class RecordingTask(TimerTask):
    """Records the clock value each time it runs."""

    __slots__ = ("clock", "fired_at", "label")

    def __init__(self, delay_ms: int, clock: ManualClock, label: object = None) -> None:
        super().__init__(delay_ms)
        self.clock = clock
        self.label = label
        self.fired_at: list[int] = []

    def run(self) -> None:
        self.fired_at.append(self.clock.now_ms())
