"""The remote reads' thread pool (Kafka's RemoteLogManager ``remoteStorageReaderThreadPool``).

Kafka runs every remote read -- a consumer's fetch below the local log start, a timestamp
search in the tier -- on a pool of ``remote.log.reader.threads`` threads (10; dynamic)
with a queue of at most ``remote.log.reader.max.pending.tasks`` (100): a read waits in
the queue while every thread is busy, and a read that finds the queue full is refused
(``RejectedExecutionException``: the partition answers UNKNOWN_SERVER_ERROR). A thread is
busy for as long as the store takes, a store that does not answer holds it.

Here a "thread" is a slot: a read holds one from its start until its last call to the
storage model ends (``release``), then the oldest queued read starts. Abandoning a read
(``DelayedRemoteFetch``/``DelayedRemoteListOffsets`` expiring: Kafka's ``cancel(false)``)
keeps a queued read in the queue, where it counts, until a slot takes it and drops it
unrun; a running read keeps its slot until the store answers, but answers nobody.

The gauges are Kafka's: ``RemoteLogReaderTaskQueueSize`` (``queue_size``) and
``RemoteLogReaderAvgIdlePercent`` (``idle_percent``, of the slots now).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

#: ``job(read, release)`` begins ``read`` on a slot; it calls ``release`` once, when done.
ReadJob = Callable[["PooledRead", Callable[[], None]], None]


class RejectedExecutionError(Exception):
    """Kafka's RejectedExecutionException: the reader queue is full."""


@dataclass(slots=True)
class PooledRead:
    """A submitted read: queued, running, or done; ``abandon`` is Kafka's cancel(false)."""

    job: ReadJob
    cancelled: bool = False

    def abandon(self) -> None:
        self.cancelled = True


class RemoteLogReaderPool:
    """At most ``threads()`` reads at once, ``max_pending`` more in the queue."""

    def __init__(self, threads: Callable[[], int], max_pending: int) -> None:
        self._threads = threads
        self.max_pending = max_pending
        self.running = 0
        self._queue: deque[PooledRead] = deque()
        self.rejected = 0

    @property
    def queue_size(self) -> int:
        return len(self._queue)

    @property
    def idle_percent(self) -> float:
        threads = max(self._threads(), 1)
        return max(0.0, 1.0 - self.running / threads)

    def submit(self, job: ReadJob) -> PooledRead:
        """Start ``job`` on a free slot, else queue it; RejectedExecutionError when full."""
        read = PooledRead(job)
        if self.running < self._threads():
            self._start(read)
        elif len(self._queue) >= self.max_pending:
            self.rejected += 1
            raise RejectedExecutionError(
                f"remote log reader queue full ({len(self._queue)} pending)"
            )
        else:
            self._queue.append(read)
        return read

    def _start(self, read: PooledRead) -> None:
        self.running += 1
        released = False

        def release() -> None:
            nonlocal released
            if released:
                return
            released = True
            self.running -= 1
            self._start_queued()

        read.job(read, release)

    def _start_queued(self) -> None:
        while self._queue and self.running < self._threads():
            read = self._queue.popleft()
            if not read.cancelled:  # a cancelled read is dropped unrun
                self._start(read)
