"""Loading a coordinator partition without stalling the broker (Kafka's
``CoordinatorLoader``, and the scheduler thread its loads run on).

When a broker becomes the leader of a ``__consumer_offsets`` or ``__transaction_state``
partition, its coordinator rebuilds that partition's state from the log. Kafka does it
on a scheduler thread (``group-metadata-manager-0``, ``transaction-log-manager-0``) and
answers COORDINATOR_LOAD_IN_PROGRESS for the partition's groups and transactional ids
meanwhile; every other partition, group and client is served as usual. Here:

* A load is a :class:`LoadJob`: a generator that does a bounded piece of work (one
  record batch, a few hundred records decoded, a few dozen groups built) between two
  ``yield``\\ s, yielding how many units it did, and installs its result in the last
  piece. The managers write the generators (``group_loader.py``,
  ``transaction_state_manager.py``); this module runs them.
* A :class:`LoadScheduler` runs jobs one after the other, in the order they came (one
  thread in Kafka), each in slices. The broker's is :class:`EventLoopLoadScheduler`:
  one slice per event-loop iteration (``loop.call_soon``), a slice ending once it has
  run ``max_slice_ms`` (2 ms) on its injected ``clock_s`` (real monotonic time when
  serving, virtual time in a simulation), so the requests of every other client, and of the
  other brokers of an in-process cluster, are served between two slices. Outside a
  running loop it runs the job at once. :class:`ImmediateLoadScheduler` (the default of
  the managers: unit tests on a manual clock, tools) runs a job to its end on the
  caller's stack; :class:`ManualLoadScheduler` lets a test run slices of N units when
  it wants.
* :func:`read_log_batches` reads a partition's batches from its log start up to the
  log end it had when the load began, ``load_buffer_size`` bytes a read (Kafka's
  ``offsets.load.buffer.size`` / ``transaction.state.log.load.buffer.size``).

Why slices on the loop and not a worker thread (as Kafka, and as our log cleaner): the
work is pure Python (parse, decode, build objects), so a thread would not be faster
under the GIL, and each time the loop wants the GIL back it may wait up to the
interpreter's switch interval (5 ms); the loop's own slices are as short as we make
them. Reading on the loop also needs no snapshot of the log that survives appends and
cleaner swaps from another thread: every read is by offset, between two slices
nothing can move what a slice sees. The cost is one loop iteration per slice.

What may change in the log between two slices: the leader's own appends (which the
managers refuse for a partition being loaded, except transaction markers: the group
manager applies those once loaded, see ``group_metadata_manager.py``), and a cleaner
pass swapping cleaned segments in. Reads are by offset, and a compacted log keeps
every offset's last record per key, so what a load reads after a swap is what it would
have read before, less records a later one replaced -- except a tombstone cleaned away
after ``delete.retention.ms`` while the load is between the record it deletes and the
tombstone, the bound Kafka documents for any reader of a compacted topic
(delete.retention.ms, 24 hours by default, against a load of seconds).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Generator, Iterator
from typing import Protocol

from broker import buggify, real_clock
from broker.buggify import COORDINATOR_LOAD_PAUSE
from broker.log.errors import OffsetOutOfRangeError
from broker.log.partition_log import PartitionLog
from protocol.record_batch import RecordBatchHeader, iter_batches

log = logging.getLogger("broker.coordinator_loader")  # the name its log lines have always carried

# A slice of the broker's load scheduler: the loop's lag a load adds is about this much.
DEFAULT_MAX_SLICE_MS = 2.0

# Units of work a job yields between two yields (what a ManualLoadScheduler counts).
LoadSteps = Generator[int, None, None]


class LoadJob:
    """One partition's load: ``steps`` yields the units of work it did since its last
    yield and ends once the partition is loaded (or the load given up)."""

    __slots__ = ("_running", "_steps", "cancelled", "done", "name", "slices", "units")

    def __init__(self, name: str, steps: LoadSteps) -> None:
        self.name = name
        self._steps = steps
        self._running = False
        self.cancelled = False
        self.done = False
        self.slices = 0  # slices run so far
        self.units = 0  # units of work done so far

    def cancel(self) -> None:
        """Give the load up (the broker stopped leading the partition): no more slices."""
        self.cancelled = True
        if not self._running and not self.done:
            self.done = True
            self._steps.close()

    def run_slice(
        self,
        max_units: int | None = None,
        deadline: float | None = None,
        clock_s: Callable[[], float] = real_clock.monotonic_s,
    ) -> bool:
        """Run until ``max_units`` units are done or ``clock_s()`` has passed ``deadline``
        (neither: to the end). True while there is more to do."""
        if self.done:
            return False
        self._running = True
        self.slices += 1
        units = 0
        try:
            while not self.cancelled:
                units += next(self._steps)
                if (max_units is not None and units >= max_units) or (
                    deadline is not None and clock_s() >= deadline
                ):
                    return True
            self._steps.close()
        except StopIteration:
            pass
        except Exception:
            log.exception("Error loading %s", self.name)
        finally:
            self._running = False
            self.units += units
        self.done = True
        return False

    def run_to_completion(self) -> None:
        while self.run_slice():
            pass

    def __repr__(self) -> str:
        state = "cancelled" if self.cancelled else "done" if self.done else "loading"
        return f"LoadJob({self.name!r}, {state}, {self.slices} slices, {self.units} units)"


class LoadScheduler(Protocol):
    """Runs load jobs (Kafka's coordinator scheduler thread)."""

    def schedule(self, job: LoadJob) -> None: ...


class ImmediateLoadScheduler:
    """Every job to its end at once, on the caller's stack."""

    def schedule(self, job: LoadJob) -> None:
        job.run_to_completion()


class EventLoopLoadScheduler:
    """Jobs in order, in slices of at most ``max_slice_ms``, one slice per iteration of
    the running event loop; at once when no loop runs."""

    def __init__(
        self,
        max_slice_ms: float = DEFAULT_MAX_SLICE_MS,
        clock_s: Callable[[], float] = real_clock.monotonic_s,
    ) -> None:
        self.max_slice_s = max_slice_ms / 1000
        # What a slice's length is measured on: the real monotonic clock when serving (a
        # slice bounds the loop's latency), the loop's virtual time in a simulation.
        self._clock_s = clock_s
        self._queue: deque[LoadJob] = deque()
        self._running_on: asyncio.AbstractEventLoop | None = None  # a slice is due there

    @property
    def pending(self) -> int:
        """Jobs not finished yet."""
        return sum(not job.done for job in self._queue)

    def schedule(self, job: LoadJob) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            job.run_to_completion()
            return
        self._queue.append(job)
        if self._running_on is not loop:
            self._running_on = loop
            loop.call_soon(self._run_slice, loop)

    def _run_slice(self, loop: asyncio.AbstractEventLoop) -> None:
        deadline = self._clock_s() + self.max_slice_s
        queue = self._queue
        # BUGGIFY: one unit, then a pause before the next slice
        paused = buggify.fires(COORDINATOR_LOAD_PAUSE)
        while queue:  # the next job goes on in this slice if time remains
            units = 1 if paused else None
            if not queue[0].run_slice(units, deadline=deadline, clock_s=self._clock_s):
                queue.popleft()
            if paused or self._clock_s() >= deadline:
                break
        if queue and paused:
            loop.call_later(buggify.delay_s(), self._run_slice, loop)
        elif queue:
            loop.call_soon(self._run_slice, loop)
        else:
            self._running_on = None


class ManualLoadScheduler:
    """For tests: jobs wait until the test runs them."""

    def __init__(self) -> None:
        self.jobs: deque[LoadJob] = deque()

    def schedule(self, job: LoadJob) -> None:
        self.jobs.append(job)

    def run_slice(self, max_units: int) -> bool:
        """A slice of ``max_units`` units of the first job; True while jobs remain."""
        while self.jobs and self.jobs[0].done:
            self.jobs.popleft()
        if self.jobs and not self.jobs[0].run_slice(max_units=max_units):
            self.jobs.popleft()
        return any(not job.done for job in self.jobs)

    def run_all(self) -> None:
        while self.jobs:
            self.jobs.popleft().run_to_completion()


def read_log_batches(
    partition_log: PartitionLog, load_buffer_size: int
) -> Iterator[tuple[RecordBatchHeader, bytes]]:
    """Every batch of ``partition_log`` (header, bytes) from its log start up to the
    log end it has now, read ``load_buffer_size`` bytes at a time (at least one batch)
    when the iterator gets there."""
    return _batches(
        partition_log,
        partition_log.log_start_offset,
        partition_log.log_end_offset,
        max(load_buffer_size, 1),
    )


def _batches(
    partition_log: PartitionLog, offset: int, end: int, load_buffer_size: int
) -> Iterator[tuple[RecordBatchHeader, bytes]]:
    while offset < end:
        try:
            chunk = partition_log.read(offset, load_buffer_size, max_offset=end)
        except OffsetOutOfRangeError:
            if partition_log.log_start_offset <= offset:
                raise
            offset = partition_log.log_start_offset  # DeleteRecords moved the start
            continue
        if not chunk:
            return
        for position, header in iter_batches(chunk, allow_partial_tail=True):
            offset = header.last_offset + 1
            yield header, chunk[position : position + header.size]
