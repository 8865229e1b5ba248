"""The share partitions' persister: Kafka's ``Persister`` (``DefaultStatePersister`` over
``PersisterStateManager``), reading and writing share-partition state at the share
coordinator of each key.

Theory of operation. A share partition reads its state once, when it is first used on
its leader, and writes the batches that changed after each acknowledgement, release,
archive or lock expiry (``SharePartition`` says which). Each call goes to the
coordinator of its key — the leader of the ``__share_group_state`` partition that
FindCoordinator's SHARE key ``"group:topicId:partition"`` maps to — and is retried,
with a backoff on the broker's scheduler timer (100 ms doubling to 1 s, for at most
``MAX_RETRY_MS``), while the answer is COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR or
COORDINATOR_LOAD_IN_PROGRESS (or the coordinator cannot be reached): the coordinator
moves with its partition's leadership and a new one answers once it has loaded. Calls
for one key go one at a time, in order, so that a retried write is never overtaken by a
later one.

Two transports under one ``PersisterStateManager``:

- ``NetworkStatePersister`` (a broker of ``MiniKafka``): Kafka's — ReadShareGroupState
  (84 v0), ReadShareGroupStateSummary (87 v1) and WriteShareGroupState (85 v1) requests
  to the coordinator's broker over TCP on the inter-broker listener, one
  ``LeaderEndpoint`` connection and one sender task per destination broker, requests in
  the order they were made; InitializeShareGroupState (83 v0) and DeleteShareGroupState
  (86 v0) for AlterShareGroupOffsets and DeleteShareGroupOffsets;
- ``InProcessStatePersister`` (``build_standalone_broker``: unit tests on a manual
  clock, in-process benchmarks): the same calls on the coordinator object
  (``coordinator_of(broker_id)``), no socket.

Where this differs from Kafka: placement is read from the shared metadata (what
FindCoordinator answers) instead of asking FindCoordinator; one call per request (Kafka
batches the calls of one coordinator into one request).
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from kio.schema.errors import ErrorCode

from broker.share_coordinator.share_coordinator import UNINITIALIZED, ShareCoordinator
from broker.share_coordinator.share_state_records import (
    PersisterStateBatch,
    ShareGroupOffset,
    SharePartitionKey,
)
from purgatory import SystemTimer, TimerTask

log = logging.getLogger("broker.share")

E = ErrorCode
RETRIABLE = frozenset(
    {E.coordinator_not_available, E.not_coordinator, E.coordinator_load_in_progress}
)
FIRST_BACKOFF_MS = 100
MAX_BACKOFF_MS = 1000
MAX_RETRY_MS = 30000

ReadDone = Callable[[ErrorCode, ShareGroupOffset], None]
WriteDone = Callable[[ErrorCode], None]
Done = Callable[[ErrorCode], None]


class StatePersister(Protocol):
    """What a share partition's leader asks of the share coordinator."""

    def read_state(self, key: SharePartitionKey, leader_epoch: int, on_done: ReadDone) -> None: ...

    def read_state_summary(
        self, key: SharePartitionKey, leader_epoch: int, on_done: ReadDone
    ) -> None: ...

    def write_state(
        self,
        key: SharePartitionKey,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: tuple[PersisterStateBatch, ...],
        on_done: WriteDone,
    ) -> None: ...

    def initialize_state(
        self, key: SharePartitionKey, state_epoch: int, start_offset: int, on_done: WriteDone
    ) -> None: ...

    def delete_state(self, key: SharePartitionKey, on_done: WriteDone) -> None: ...


@dataclass(slots=True)
class _Call:
    """One read or write: ``attempt(broker_id, done)`` tries it once at that broker and
    answers the caller unless the error is retriable; ``fail`` answers a given-up one."""

    attempt: Callable[[int, Done], None]
    fail: Done
    waited_ms: int = 0
    backoff_ms: int = FIRST_BACKOFF_MS


class _Retry(TimerTask):
    __slots__ = ("_run",)

    def __init__(self, delay_ms: int, run: Callable[[], None]) -> None:
        super().__init__(delay_ms)
        self._run = run

    def run(self) -> None:
        self._run()


def _answering(on_done: Callable[[ErrorCode], None], done: Done) -> Done:
    def answered(error: ErrorCode) -> None:
        if error not in RETRIABLE:
            on_done(error)
        done(error)

    return answered


class PersisterStateManager(ABC):
    """Placement, one call at a time per key, retries; the transport is the subclass's
    (``_read``, ``_write``)."""

    def __init__(self, placement: ShareCoordinator, timer: SystemTimer) -> None:
        self._placement = placement
        self._timer = timer
        self._queues: dict[SharePartitionKey, deque[_Call]] = {}
        self._retries: set[_Retry] = set()
        self._running = True

    async def start(self) -> None:
        self._running = True

    async def stop(self) -> None:
        self._running = False
        for retry in self._retries:
            retry.cancel()
        self._retries.clear()
        self._queues.clear()

    def pending(self) -> int:
        return sum(len(q) for q in self._queues.values())

    # -- the transport -----------------------------------------------------------------

    @abstractmethod
    def _read(
        self,
        broker_id: int,
        key: SharePartitionKey,
        leader_epoch: int,
        summary: bool,
        answer: ReadDone,
    ) -> None: ...

    @abstractmethod
    def _write(
        self,
        broker_id: int,
        key: SharePartitionKey,
        state: tuple[int, int, int, tuple[PersisterStateBatch, ...]],
        answer: WriteDone,
    ) -> None: ...

    @abstractmethod
    def _initialize(
        self,
        broker_id: int,
        key: SharePartitionKey,
        state_epoch: int,
        start_offset: int,
        answer: WriteDone,
    ) -> None: ...

    @abstractmethod
    def _delete(self, broker_id: int, key: SharePartitionKey, answer: WriteDone) -> None: ...

    # -- the calls ---------------------------------------------------------------------

    def read_state(self, key: SharePartitionKey, leader_epoch: int, on_done: ReadDone) -> None:
        self._read_call(key, leader_epoch, False, on_done)

    def read_state_summary(
        self, key: SharePartitionKey, leader_epoch: int, on_done: ReadDone
    ) -> None:
        self._read_call(key, leader_epoch, True, on_done)

    def _read_call(
        self, key: SharePartitionKey, leader_epoch: int, summary: bool, on_done: ReadDone
    ) -> None:
        def attempt(broker_id: int, done: Done) -> None:
            def answer(error: ErrorCode, state: ShareGroupOffset) -> None:
                if error not in RETRIABLE:
                    on_done(error, state)
                done(error)

            self._read(broker_id, key, leader_epoch, summary, answer)

        self._submit(key, _Call(attempt, lambda error: on_done(error, UNINITIALIZED)))

    def write_state(
        self,
        key: SharePartitionKey,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: tuple[PersisterStateBatch, ...],
        on_done: WriteDone,
    ) -> None:
        state = (state_epoch, leader_epoch, start_offset, batches)

        def attempt(broker_id: int, done: Done) -> None:
            self._write(broker_id, key, state, _answering(on_done, done))

        self._submit(key, _Call(attempt, on_done))

    def initialize_state(
        self, key: SharePartitionKey, state_epoch: int, start_offset: int, on_done: WriteDone
    ) -> None:
        """InitializeShareGroupState: a new state at ``start_offset`` and ``state_epoch``
        (AlterShareGroupOffsets), queued behind the key's other calls."""

        def attempt(broker_id: int, done: Done) -> None:
            self._initialize(broker_id, key, state_epoch, start_offset, _answering(on_done, done))

        self._submit(key, _Call(attempt, on_done))

    def delete_state(self, key: SharePartitionKey, on_done: WriteDone) -> None:
        """DeleteShareGroupState: the key's state goes (DeleteShareGroupOffsets)."""

        def attempt(broker_id: int, done: Done) -> None:
            self._delete(broker_id, key, _answering(on_done, done))

        self._submit(key, _Call(attempt, on_done))

    # -- one call at a time per key ----------------------------------------------------

    def _submit(self, key: SharePartitionKey, call: _Call) -> None:
        if not self._running:
            call.fail(E.coordinator_not_available)
            return
        queue = self._queues.setdefault(key, deque())
        queue.append(call)
        if len(queue) == 1:
            self._try(key)

    def _try(self, key: SharePartitionKey) -> None:
        queue = self._queues.get(key)
        if not queue or not self._running:
            return
        call = queue[0]
        _error, endpoint = self._placement.coordinator_endpoint(key.coordinator_key)
        if endpoint is None:
            self._attempted(key, call, E.coordinator_not_available)
            return
        call.attempt(endpoint.broker_id, lambda error: self._attempted(key, call, error))

    def _attempted(self, key: SharePartitionKey, call: _Call, error: ErrorCode) -> None:
        queue = self._queues.get(key)
        if not queue or queue[0] is not call:
            return  # stopped meanwhile
        if error in RETRIABLE:
            if call.waited_ms < MAX_RETRY_MS and self._running:
                self._retry_later(key, call)
                return
            log.warning("Giving up a share state call for %s: %s", key, error.name)
            call.fail(error)
        queue.popleft()
        if queue:
            self._try(key)
        else:
            del self._queues[key]

    def _retry_later(self, key: SharePartitionKey, call: _Call) -> None:
        delay = call.backoff_ms
        call.waited_ms += delay
        call.backoff_ms = min(delay * 2, MAX_BACKOFF_MS)

        def run() -> None:
            self._retries.discard(retry)
            self._try(key)

        retry = _Retry(delay, run)
        self._retries.add(retry)
        self._timer.add(retry)


class InProcessStatePersister(PersisterStateManager):
    """The calls on the coordinator object of the key's broker (module docstring)."""

    def __init__(
        self,
        placement: ShareCoordinator,
        coordinator_of: Callable[[int], ShareCoordinator | None],
        timer: SystemTimer,
    ) -> None:
        super().__init__(placement, timer)
        self._coordinator_of = coordinator_of

    def _read(
        self,
        broker_id: int,
        key: SharePartitionKey,
        leader_epoch: int,
        summary: bool,
        answer: ReadDone,
    ) -> None:
        coordinator = self._coordinator_of(broker_id)
        if coordinator is None:
            answer(E.coordinator_not_available, UNINITIALIZED)
            return
        read = coordinator.read_state_summary if summary else coordinator.read_state
        error, _message, state = read(key, leader_epoch)
        answer(error, state)

    def _write(
        self,
        broker_id: int,
        key: SharePartitionKey,
        state: tuple[int, int, int, tuple[PersisterStateBatch, ...]],
        answer: WriteDone,
    ) -> None:
        coordinator = self._coordinator_of(broker_id)
        if coordinator is None:
            answer(E.coordinator_not_available)
            return
        coordinator.write_state(key, *state, lambda error, _message: answer(error))

    def _initialize(
        self,
        broker_id: int,
        key: SharePartitionKey,
        state_epoch: int,
        start_offset: int,
        answer: WriteDone,
    ) -> None:
        coordinator = self._coordinator_of(broker_id)
        if coordinator is None:
            answer(E.coordinator_not_available)
            return
        coordinator.initialize_state(
            key, state_epoch, start_offset, lambda error, _message: answer(error)
        )

    def _delete(self, broker_id: int, key: SharePartitionKey, answer: WriteDone) -> None:
        coordinator = self._coordinator_of(broker_id)
        if coordinator is None:
            answer(E.coordinator_not_available)
            return
        coordinator.delete_state(key, lambda error, _message: answer(error))
