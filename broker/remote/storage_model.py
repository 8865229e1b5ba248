"""How long the remote tier takes, and how it fails: the model in front of the store.

Kafka's RemoteStorageManager calls block a thread for as long as the object store
takes. Here each call (``RemoteOperation``: fetch segment, fetch index, copy, delete) is
*submitted*: the model draws its duration -- a log-normal latency with the configured
p50 and p99 plus its bytes over the configured throughput, plus any ``slow`` fault --
and the call runs on the caller's timer when that time is up, its result (or its
exception) handed to a callback. The durations come from an injected ``random.Random``
(seeded in a simulation, so a seed gives the same waits) and the timer reads the
injected clock, so a unit test on ``ManualClock`` drives the tier by advancing it.
With p50 = p99 = 0 and no throughput limit (the default) a call runs at once: the real
time of the real file I/O is then the only cost.

Faults (the control endpoint's ``remote-slow`` / ``remote-down``, the simulation's
nemesis): ``slow_ms`` adds to every call; ``down`` holds every call -- nothing answers,
as an unreachable object store -- until the fault heals, when the held calls start
again; ``failing`` makes calls of the named kinds raise ``RemoteStorageException``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from broker.remote.remote_storage_manager import RemoteStorageException
from purgatory import SystemTimer, TimerTask

#: z of the 99th percentile of a standard normal: p99 = p50 * exp(2.326 sigma)
_Z99 = 2.3263478740408408


class RemoteOperation(StrEnum):
    FETCH_SEGMENT = "fetch-segment"
    FETCH_INDEX = "fetch-index"
    COPY = "copy"
    DELETE = "delete"


@dataclass(frozen=True, slots=True)
class LatencyModel:
    """One operation's time: a log-normal latency (median ``p50_ms``, 99th percentile
    ``p99_ms``) plus ``bytes / bytes_per_second`` (0: no throughput limit)."""

    p50_ms: float = 0.0
    p99_ms: float = 0.0
    bytes_per_second: int = 0

    def sample_ms(self, rng: random.Random, nbytes: int) -> int:
        latency = 0.0
        if self.p50_ms > 0:
            p99 = max(self.p99_ms, self.p50_ms)
            sigma = math.log(p99 / self.p50_ms) / _Z99
            latency = self.p50_ms * math.exp(sigma * rng.gauss(0.0, 1.0)) if sigma else self.p50_ms
        if self.bytes_per_second > 0:
            latency += nbytes * 1000.0 / self.bytes_per_second
        return round(latency)


@dataclass(slots=True)
class RemoteStorageFaults:
    """What is wrong with the tier now (all clear by default)."""

    slow_ms: int = 0
    down: bool = False
    failing: set[RemoteOperation] = field(default_factory=set)

    def as_json(self) -> dict[str, Any]:
        return {"slow_ms": self.slow_ms, "down": self.down, "failing": sorted(self.failing)}


class RemoteTask(TimerTask):
    """One submitted call: it runs ``call`` when due and hands the outcome to ``done``."""

    __slots__ = ("_call", "_done", "_model", "_timer", "cancelled", "nbytes", "operation")

    def __init__(
        self,
        model: RemoteStorageModel,
        timer: SystemTimer,
        operation: RemoteOperation,
        nbytes: int,
        call: Callable[[], Any],
        done: Callable[[Any, Exception | None], None],
    ) -> None:
        super().__init__(0)
        self._model = model
        self._timer = timer
        self.operation = operation
        self.nbytes = nbytes
        self._call = call
        self._done = done
        self.cancelled = False

    def abandon(self) -> None:
        """Kafka's ``task.cancel(false)``: a call not yet run never runs."""
        self.cancelled = True
        self.cancel()

    def run(self) -> None:
        if self.cancelled:
            return
        model = self._model
        if model.faults.down:  # the store does not answer: held until it heals
            model.held.append(self)
            return
        model.completed[self.operation] += 1
        if self.operation in model.faults.failing:
            self._done(None, RemoteStorageException(f"{self.operation} failed (injected)"))
            return
        try:
            result = self._call()
        except Exception as exc:  # the plugin's failure, as Kafka's reader catches it
            self._done(None, exc)
            return
        self._done(result, None)


class RemoteStorageModel:
    """The tier's timing and faults, shared by every broker (the store is one)."""

    def __init__(
        self,
        rng: random.Random,
        latency: dict[RemoteOperation, LatencyModel] | None = None,
    ) -> None:
        self.rng = rng
        self.latency: dict[RemoteOperation, LatencyModel] = dict(latency or {})
        self.faults = RemoteStorageFaults()
        self.held: list[RemoteTask] = []
        self.completed: dict[RemoteOperation, int] = dict.fromkeys(RemoteOperation, 0)

    def duration_ms(self, operation: RemoteOperation, nbytes: int) -> int:
        model = self.latency.get(operation, LatencyModel())
        return model.sample_ms(self.rng, nbytes) + self.faults.slow_ms

    def submit(
        self,
        timer: SystemTimer,
        operation: RemoteOperation,
        nbytes: int,
        call: Callable[[], Any],
        done: Callable[[Any, Exception | None], None],
    ) -> RemoteTask:
        """Run ``call`` on ``timer`` after the modelled time; ``done(result, error)``."""
        task = RemoteTask(self, timer, operation, nbytes, call, done)
        self._schedule(task)
        return task

    def _schedule(self, task: RemoteTask) -> None:
        task.delay_ms = self.duration_ms(task.operation, task.nbytes)
        task._timer.add(task)

    # -- faults ------------------------------------------------------------------------

    def set_slow(self, ms: int) -> None:
        self.faults.slow_ms = max(0, ms)

    def set_down(self, down: bool) -> None:
        self.faults.down = down
        if not down:
            self._release_held()

    def set_failing(self, operations: set[RemoteOperation]) -> None:
        self.faults.failing = set(operations)

    def clear_faults(self) -> None:
        self.faults = RemoteStorageFaults()
        self._release_held()

    def _release_held(self) -> None:
        held, self.held = self.held, []
        for task in held:
            if not task.cancelled:
                self._schedule(task)
