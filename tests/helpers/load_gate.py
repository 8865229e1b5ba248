"""A coordinator load as slow as a test wants: hold every load until the test opens the
gate, so clients meet a coordinator that is still loading for as long as the test needs
to see how they (and the broker's answers) behave.

``LoadGate.scheduler`` is a ``load_scheduler`` factory for ``MiniKafka`` (one scheduler
per coordinator per broker, all behind this one gate). While the gate is open a load runs
as the broker's own (``EventLoopLoadScheduler``: slices on the event loop); while it is
closed, loads wait, and opening the gate hands them on in the order they came.
"""

from __future__ import annotations

from broker.coordinator.coordinator_loader import EventLoopLoadScheduler, LoadJob, LoadScheduler


class LoadGate:
    def __init__(self) -> None:
        self.closed = False
        self.held: list[tuple[EventLoopLoadScheduler, LoadJob]] = []

    def scheduler(self) -> LoadScheduler:
        return _GatedScheduler(self, EventLoopLoadScheduler())

    def close(self) -> None:
        self.closed = True

    def open(self) -> None:
        self.closed = False
        held, self.held = self.held, []
        for scheduler, job in held:
            scheduler.schedule(job)

    def holding(self, name_prefix: str) -> bool:
        """A load of a partition whose name starts with ``name_prefix`` is held."""
        return any(job.name.startswith(name_prefix) and not job.done for _, job in self.held)


class _GatedScheduler:
    def __init__(self, gate: LoadGate, inner: EventLoopLoadScheduler) -> None:
        self._gate = gate
        self._inner = inner

    def schedule(self, job: LoadJob) -> None:
        if self._gate.closed:
            self._gate.held.append((self._inner, job))
        else:
            self._inner.schedule(job)
