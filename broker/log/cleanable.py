"""What a log shows the log cleaner: its cleanable units, a way to read them from a
worker thread, and writers for the cleaned result (Kafka's view of a log's segments
from its ``Cleaner``).

A *unit* is what the cleaner reads and replaces whole: a segment of a DiskLog (never the
active one), a batch of a MemoryLog (never one of its active "segment", see
memory_log.py). A ``CleanerSnapshot`` is taken on the event loop; its planning methods
(``units_below``, ``bytes_between``, ...) run there too, while ``read_batches``,
``tail_headers`` and the writers are safe in a worker thread: a MemoryLog snapshot reads
its own copy of the (immutable) batch objects, a DiskLog snapshot reads segment files
through file descriptors of its own, and writers write new files only. The log checks
its ``layout_version`` when the result is swapped in: a truncation, retention,
DeleteRecords, another cleaning or a close since the snapshot drops the result.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from broker.log.log_config import LogConfig
from broker.log.segment import LogSegment
from protocol.record_batch import RecordBatchHeader, iter_batches, parse_batch_header

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
_INT32_MAX = 2**31 - 1
_READ_CHUNK = 1 << 20
_WRITE_CHUNK = 1 << 20
_FREE_CHUNK = 4096

Batches = Iterator[tuple[RecordBatchHeader, bytes]]


@dataclass(frozen=True, slots=True)
class CleanerCheckpoint:
    """A log's cleaning state (Kafka's cleaner-offset-checkpoint, plus the latest
    delete horizon of the tombstones the last cleaning kept)."""

    first_dirty_offset: int = 0
    delete_horizon_ms: int = -1  # -1: no cleaned tombstone waits for its horizon


class CleanerSourceChangedError(Exception):
    """A segment file the snapshot names is gone or shorter: the log changed."""


class CleanedWriter(Protocol):
    """Where the cleaned batches of one group of units go."""

    def append(self, batch: bytes, header: RecordBatchHeader) -> None: ...

    def finish(self) -> None:
        """Make the result durable (a worker thread may call it)."""
        ...

    def abort(self) -> None:
        """Forget the result (its files go)."""
        ...


class CleanerSnapshot(Protocol):
    layout_version: int

    @property
    def unit_count(self) -> int: ...

    def unit_end_offset(self, index: int) -> int:
        """Every offset of unit ``index`` is below this."""
        ...

    def units_below(self, offset: int) -> int:
        """How many leading units lie wholly below ``offset``."""
        ...

    def first_unit_ending_after(self, offset: int) -> int:
        """Index of the first unit holding an offset >= ``offset``."""
        ...

    def bytes_between(self, start: int, end: int) -> int: ...

    def first_recent_unit(self, start: int, end: int, threshold_ms: int) -> int:
        """First index in [start, end) whose largest timestamp is above
        ``threshold_ms`` (min.compaction.lag.ms), else ``end``."""
        ...

    def freeze(self) -> None:
        """Copy what the worker reads; called on the loop before handing it over."""
        ...

    def release(self) -> None:
        """Drop the copies (a worker thread may call it: freeing many batches takes
        time the loop should not spend)."""
        ...

    def read_batches(self, start: int, end: int) -> Batches: ...

    def tail_headers(self) -> Iterator[RecordBatchHeader]:
        """Headers of every batch after the units, up to the log end at the snapshot."""
        ...

    def group_units(self, end: int) -> list[tuple[int, int]]:
        """Units [0, end) in groups, each cleaned into one new unit."""
        ...

    def new_writer(self, group: tuple[int, int]) -> CleanedWriter: ...


# -- MemoryLog ------------------------------------------------------------------------


class MemorySnapshot:
    """Batches [0, count) of a MemoryLog (its inactive part); one group."""

    def __init__(
        self,
        layout_version: int,
        batches: list[bytes],
        bases: list[int],
        lasts: list[int],
        sizes: list[int],
        max_ts: list[int],
        count: int,
    ) -> None:
        self.layout_version = layout_version
        self._batches = batches  # the log's own lists: planning reads them on the loop
        self._bases = bases
        self._lasts = lasts
        self._sizes = sizes
        self._max_ts = max_ts
        self._count = count
        # set by the log once the lists above are no longer its own (a swap)
        self.retired = False
        self._frozen: list[bytes] = []
        self._tail: list[bytes] = []

    @property
    def unit_count(self) -> int:
        return self._count

    def unit_end_offset(self, index: int) -> int:
        return self._lasts[index] + 1

    def units_below(self, offset: int) -> int:
        return min(bisect.bisect_left(self._lasts, offset, 0, self._count), self._count)

    def first_unit_ending_after(self, offset: int) -> int:
        return bisect.bisect_left(self._lasts, offset, 0, self._count)

    def bytes_between(self, start: int, end: int) -> int:
        return sum(self._sizes[start:end]) if end > start else 0

    def first_recent_unit(self, start: int, end: int, threshold_ms: int) -> int:
        max_ts = self._max_ts
        for i in range(start, end):
            if max_ts[i] > threshold_ms:
                return i
        return end

    def freeze(self) -> None:
        self._frozen = self._batches[: self._count]
        self._tail = self._batches[self._count :]

    def release(self) -> None:
        """Free the copies, and the lists a swap retired, a slice at a time: freeing
        100,000 batches in one call would hold the GIL for tens of milliseconds."""
        lists: list[list[bytes] | list[int]] = [self._frozen, self._tail]
        if self.retired:
            lists += [self._batches, self._bases, self._lasts, self._sizes, self._max_ts]
        for lst in lists:
            while lst:
                del lst[-_FREE_CHUNK:]
        self._frozen, self._tail, self._batches = [], [], []
        self._bases, self._lasts, self._sizes, self._max_ts = [], [], [], []

    def read_batches(self, start: int, end: int) -> Batches:
        for batch in self._frozen[start:end]:
            yield parse_batch_header(batch), batch

    def tail_headers(self) -> Iterator[RecordBatchHeader]:
        for batch in self._tail:
            yield parse_batch_header(batch)

    def group_units(self, end: int) -> list[tuple[int, int]]:
        return [(0, end)] if end > 0 else []

    def new_writer(self, group: tuple[int, int]) -> MemoryWriter:
        return MemoryWriter()


class MemoryWriter:
    def __init__(self) -> None:
        self.batches: list[bytes] = []
        self.headers: list[RecordBatchHeader] = []

    def append(self, batch: bytes, header: RecordBatchHeader) -> None:
        self.batches.append(batch)
        self.headers.append(header)

    def finish(self) -> None:
        """Nothing to make durable."""

    def abort(self) -> None:
        self.batches.clear()
        self.headers.clear()


# -- DiskLog --------------------------------------------------------------------------


def read_segment_batches(path: Path, size: int) -> Batches:
    """The batches of the first ``size`` bytes of a segment file, through a file
    descriptor of its own, in big reads."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError as exc:
        raise CleanerSourceChangedError(f"{path} is gone") from exc
    try:
        if os.fstat(fd).st_size < size:
            raise CleanerSourceChangedError(f"{path} is shorter than {size} bytes")
        pos = 0
        while pos < size:
            buf = os.pread(fd, min(_READ_CHUNK, size - pos), pos)
            consumed = 0
            for rel, header in iter_batches(buf, allow_partial_tail=True):
                yield header, buf[rel : rel + header.size]
                consumed = rel + header.size
            if consumed == 0:  # one batch larger than the chunk
                header = parse_batch_header(buf)
                data = os.pread(fd, header.size, pos)
                if len(data) < header.size or header.size <= 0:
                    raise CleanerSourceChangedError(f"{path}: batch at {pos} is cut short")
                yield header, data
                consumed = header.size
            pos += consumed
    finally:
        os.close(fd)


@dataclass(frozen=True, slots=True)
class _SegmentView:
    segment: LogSegment
    base_offset: int
    end_offset: int
    size: int
    max_timestamp: int
    path: Path


class DiskSnapshot:
    """The inactive segments of a DiskLog; groups of them are cleaned into one."""

    def __init__(
        self,
        layout_version: int,
        directory: Path,
        config: LogConfig,
        segments: Sequence[LogSegment],
    ) -> None:
        self.layout_version = layout_version
        self.directory = directory
        self.config = config
        views = []
        for i, seg in enumerate(segments[:-1]):
            views.append(
                _SegmentView(
                    seg,
                    seg.base_offset,
                    segments[i + 1].base_offset,
                    seg.size,
                    seg.max_timestamp,
                    seg.log_path,
                )
            )
        self.views = views
        active = segments[-1]
        self._tail = [(active.log_path, active.size)]
        self._ends = [v.end_offset for v in views]

    @property
    def unit_count(self) -> int:
        return len(self.views)

    def unit_end_offset(self, index: int) -> int:
        return self._ends[index]

    def units_below(self, offset: int) -> int:
        return bisect.bisect_right(self._ends, offset)

    def first_unit_ending_after(self, offset: int) -> int:
        return bisect.bisect_right(self._ends, offset)

    def bytes_between(self, start: int, end: int) -> int:
        return sum(v.size for v in self.views[start:end])

    def first_recent_unit(self, start: int, end: int, threshold_ms: int) -> int:
        for i in range(start, end):
            largest = self.views[i].max_timestamp
            if largest < 0:  # no timestamps: the file's age (Kafka's fallback)
                largest = self.views[i].segment.largest_timestamp
            if largest > threshold_ms:
                return i
        return end

    def freeze(self) -> None:
        """Segment files below the active one do not change: nothing to copy."""

    def release(self) -> None:
        """Nothing was copied."""

    def read_batches(self, start: int, end: int) -> Batches:
        for view in self.views[start:end]:
            yield from read_segment_batches(view.path, view.size)

    def tail_headers(self) -> Iterator[RecordBatchHeader]:
        for path, size in self._tail:
            for header, _ in read_segment_batches(path, size):
                yield header

    def group_units(self, end: int) -> list[tuple[int, int]]:
        """Kafka's groupSegmentsBySize: consecutive segments whose sizes add up to at
        most segment.bytes and whose offsets fit one segment's 32-bit relative offsets."""
        groups: list[tuple[int, int]] = []
        i = 0
        while i < end:
            j = i + 1
            total = self.views[i].size
            while (
                j < end
                and total + self.views[j].size <= self.config.segment_bytes
                and self.views[j].end_offset - 1 - self.views[i].base_offset <= _INT32_MAX
            ):
                total += self.views[j].size
                j += 1
            groups.append((i, j))
            i = j
        return groups

    def new_writer(self, group: tuple[int, int]) -> SegmentWriter:
        base = self.views[group[0]].base_offset
        # Kafka keeps the last segment's modification time (retention's fallback age)
        mtime_ns = os.stat(self.views[group[1] - 1].path).st_mtime_ns
        segment = LogSegment.create(self.directory, base, self.config, CLEANED_SUFFIX)
        return SegmentWriter(segment, mtime_ns)


class SegmentWriter:
    """A cleaned segment being written as `<base>.log.cleaned` (with its indexes)."""

    def __init__(self, segment: LogSegment, mtime_ns: int | None = None) -> None:
        self.segment = segment
        self._mtime_ns = mtime_ns
        self._pending = bytearray()
        self._headers: list[RecordBatchHeader] = []

    def append(self, batch: bytes, header: RecordBatchHeader) -> None:
        self._pending += batch
        self._headers.append(header)
        if len(self._pending) >= _WRITE_CHUNK:
            self._flush_pending()

    def _flush_pending(self) -> None:
        if self._headers:
            self.segment.append(self._pending, self._headers)
            self._pending = bytearray()
            self._headers = []

    def finish(self) -> None:
        self._flush_pending()
        self.segment.flush()
        self.segment.on_become_inactive()
        if self._mtime_ns is not None:
            os.utime(self.segment.log_path, ns=(self._mtime_ns, self._mtime_ns))

    def abort(self) -> None:
        self._pending = bytearray()
        self._headers = []
        self.segment.delete()
