"""A partition log held in memory: a list of batches plus a bisectable index.

Used when the broker has no data directory (tests, simulations). Each stored batch is
one immutable bytes object; parallel lists hold each batch's base and last offset,
size and max timestamp, so a read is a bisect plus a join of whole batches. There are
no segments: retention and DeleteRecords work batch by batch, which is finer than
Kafka's segment granularity but keeps the same rules (see retention.py).

The log cleaner needs Kafka's *active segment*, which it never cleans. A MemoryLog keeps
a virtual one: the batches from `active_segment_base_offset` on, "rolled" by the rule
DiskLog rolls by (a batch that would take the active part past segment.bytes starts a
new one). A truncation below it, or a retention that removes it, moves it to the new
log end or start. The cleaner cleans batch by batch below it (cleanable.py), and the
cleaned batches replace the originals in place: offsets are kept, gaps are fine.

The memory is a simulated disk too: the log keeps Kafka's *recovery point*, the offset
below which it is flushed — moved to the log end by `flush` (the log flusher, for
``flush.ms``), by an append that leaves ``flush.messages`` unflushed, and to the new active
segment's base when the virtual segment rolls (Kafka flushes a segment it rolls past). A
simulated power loss (`lose_unflushed`) drops what lies above it, as a machine that died
before the page cache reached the disk; a process that dies (kill -9) loses nothing.
"""

from __future__ import annotations

import bisect
import itertools

from broker.log.cleanable import CleanedWriter, CleanerCheckpoint, MemorySnapshot, MemoryWriter
from broker.log.errors import OffsetOutOfRangeError
from broker.log.log_config import LogConfig
from broker.log.partition_log import AppendInfo, prepare_follower_append, prepare_leader_append
from broker.log.retention import deletable_prefix
from broker.log.timestamps import first_record_at_or_after, record_with_timestamp
from protocol.record_batch import RecordBatchHeader


class MemoryLog:
    def __init__(self, config: LogConfig | None = None, *, start_offset: int = 0) -> None:
        self.config = config or LogConfig()
        self._log_start_offset = start_offset
        self._log_end_offset = start_offset
        self._size = 0
        self._batches: list[bytes] = []
        self._base: list[int] = []
        self._last: list[int] = []
        self._sizes: list[int] = []
        self._max_ts: list[int] = []
        # running maximum of _max_ts: nondecreasing, so timestamp lookups bisect it
        # (Kafka's time index keeps the same kind of running maximum)
        self._running_max_ts: list[int] = []
        # the virtual active segment (see the module docstring) and its bytes
        self._active_base = start_offset
        self._active_bytes = 0
        # bumped whenever batches below the log end are removed or replaced
        self._layout_version = 0
        self.cleaner_checkpoint = CleanerCheckpoint(start_offset)
        self._recovery_point = start_offset

    # -- properties ------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def size_bytes(self) -> int:
        return self._size

    @property
    def active_segment_base_offset(self) -> int:
        return self._active_base

    @property
    def layout_version(self) -> int:
        return self._layout_version

    @property
    def recovery_point(self) -> int:
        """Kafka's recoveryPoint: everything below it is flushed (survives a power loss)."""
        return self._recovery_point

    # -- appends ----------------------------------------------------------------------

    def append_as_leader(
        self,
        records: bytes,
        *,
        log_append_time_ms: int | None = None,
        leader_epoch: int = 0,
        validated: list[RecordBatchHeader] | None = None,
    ) -> AppendInfo:
        data, info = prepare_leader_append(
            records,
            config=self.config,
            log_end_offset=self._log_end_offset,
            log_append_time_ms=log_append_time_ms,
            leader_epoch=leader_epoch,
            validated=validated,
        )
        self._store(bytes(data), info.batches)
        info.log_start_offset = self._log_start_offset
        return info

    def append_as_follower(self, records: bytes) -> AppendInfo:
        info = prepare_follower_append(records, log_end_offset=self._log_end_offset)
        if info.batches:
            self._store(bytes(records), info.batches)
        info.log_start_offset = self._log_start_offset
        return info

    def _store(self, data: bytes, headers: list[RecordBatchHeader]) -> None:
        """Keep ``data``'s batches (``headers`` describe them, in order) one by one."""
        view = memoryview(data)
        single = len(headers) == 1
        pos = 0
        for header in headers:
            size = header.size
            self._batches.append(data if single else bytes(view[pos : pos + size]))
            pos += size
            self._base.append(header.base_offset)
            self._last.append(header.last_offset)
            self._sizes.append(size)
            self._max_ts.append(header.max_timestamp)
            prev = self._running_max_ts[-1] if self._running_max_ts else header.max_timestamp
            self._running_max_ts.append(max(prev, header.max_timestamp))
            self._size += size
            if self._active_bytes > 0 and self._active_bytes + size > self.config.segment_bytes:
                self._active_base = header.base_offset  # roll the virtual segment
                self._active_bytes = 0
                # Kafka flushes the segment it rolls past
                self._recovery_point = max(self._recovery_point, header.base_offset)
            self._active_bytes += size
            self._log_end_offset = header.last_offset + 1
        if self._log_end_offset - self._recovery_point >= self.config.flush_messages:
            self.flush()

    # -- reads ------------------------------------------------------------------------

    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one_batch: bool = True,
    ) -> bytes:
        self._check_range(fetch_offset)
        first = bisect.bisect_left(self._last, fetch_offset)
        n = len(self._batches)
        if first >= n:
            return b""
        limit = n if max_offset is None else bisect.bisect_left(self._base, max_offset, first)
        if limit <= first:
            return b""
        end = first
        total = 0
        while end < limit and total + self._sizes[end] <= max_bytes:
            total += self._sizes[end]
            end += 1
        if end == first:
            if not min_one_batch:
                return b""
            end = first + 1
        if end == first + 1:
            return self._batches[first]
        return b"".join(self._batches[first:end])

    def _check_range(self, offset: int) -> None:
        if offset < self._log_start_offset or offset > self._log_end_offset:
            raise OffsetOutOfRangeError(offset, self._log_start_offset, self._log_end_offset)

    def offset_for_timestamp(self, ts_ms: int) -> tuple[int, int] | None:
        """Earliest (offset, timestamp) of a record with timestamp >= ts_ms, at record
        granularity, ignoring records below the log start offset."""
        i = bisect.bisect_left(self._running_max_ts, ts_ms)
        for j in range(i, len(self._batches)):
            if self._max_ts[j] < ts_ms or self._last[j] < self._log_start_offset:
                continue
            found = first_record_at_or_after(self._batches[j], ts_ms, self._log_start_offset)
            if found is not None:
                return found
        return None

    def max_timestamp(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with the largest timestamp."""
        best = -1
        best_ts = -1
        for j, ts in enumerate(self._max_ts):
            if ts > best_ts and self._last[j] >= self._log_start_offset:
                best, best_ts = j, ts
        if best < 0:
            return None
        return record_with_timestamp(self._batches[best], best_ts, self._log_start_offset)

    # -- deletion ---------------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Drop everything at and above `offset` (a follower diverged from its leader).

        A batch is removed whole: if `offset` falls inside one, the log end becomes
        that batch's base offset.
        """
        if offset >= self._log_end_offset:
            return
        if offset < self._log_start_offset:
            self.truncate_fully_and_start_at(offset)
            return
        keep = bisect.bisect_left(self._last, offset)
        new_end = self._base[keep] if keep < len(self._base) else offset
        self._drop_tail(keep)
        self._log_end_offset = min(new_end, offset)
        self._log_start_offset = min(self._log_start_offset, self._log_end_offset)
        self._recovery_point = min(self._recovery_point, self._log_end_offset)
        self._layout_changed()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Empty the log and restart it at `offset` (a follower fell below its leader's
        log start)."""
        self._drop_tail(0)
        self._log_start_offset = self._log_end_offset = self._recovery_point = offset
        self._layout_changed()

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start to `offset` and drop batches wholly below."""
        if offset > self._log_end_offset:
            raise OffsetOutOfRangeError(offset, self._log_start_offset, self._log_end_offset)
        if offset <= self._log_start_offset:
            return self._log_start_offset
        self._log_start_offset = offset
        self._drop_head(bisect.bisect_left(self._last, offset))
        self._layout_changed()
        return self._log_start_offset

    def apply_retention(self, now_ms: int, *, high_watermark: int | None = None) -> int:
        """retention.ms / retention.bytes, batch by batch; returns bytes deleted."""
        count = deletable_prefix(
            base_offsets=self._base,
            sizes=self._sizes,
            largest_timestamps=self._max_ts,
            log_end_offset=self._log_end_offset,
            log_start_offset=self._log_start_offset,
            high_watermark=high_watermark,
            config=self.config,
            now_ms=now_ms,
        )
        if count == 0:
            return 0
        before = self._size
        new_start = self._base[count] if count < len(self._base) else self._log_end_offset
        self._drop_head(count)
        self._log_start_offset = max(self._log_start_offset, new_start)
        self._layout_changed()
        return before - self._size

    def _drop_head(self, count: int) -> None:
        if count <= 0:
            return
        self._size -= sum(self._sizes[:count])
        for lst in (self._batches, self._base, self._last, self._sizes, self._max_ts):
            del lst[:count]
        self._running_max_ts = list(itertools.accumulate(self._max_ts, max))

    def _drop_tail(self, keep: int) -> None:
        self._size -= sum(self._sizes[keep:])
        for lst in (
            self._batches,
            self._base,
            self._last,
            self._sizes,
            self._max_ts,
            self._running_max_ts,
        ):
            del lst[keep:]

    def _layout_changed(self) -> None:
        """After batches went: keep the virtual active segment and the cleaner's
        checkpoint within the log."""
        self._layout_version += 1
        self._active_base = min(
            max(self._active_base, self._log_start_offset), self._log_end_offset
        )
        self._active_bytes = sum(self._sizes[bisect.bisect_left(self._base, self._active_base) :])
        checkpoint = self.cleaner_checkpoint
        if checkpoint.first_dirty_offset > self._log_end_offset:
            self.cleaner_checkpoint = CleanerCheckpoint(
                self._log_end_offset, checkpoint.delete_horizon_ms
            )

    # -- the log cleaner (log_cleaner.py) --------------------------------------------

    def cleaner_snapshot(self) -> MemorySnapshot:
        """The batches below the virtual active segment, for the cleaner."""
        count = bisect.bisect_left(self._base, self._active_base)
        return MemorySnapshot(
            self._layout_version,
            self._batches,
            self._base,
            self._last,
            self._sizes,
            self._max_ts,
            count,
        )

    def replace_cleaned(
        self,
        snapshot: object,
        groups: list[tuple[tuple[int, int], CleanedWriter]],
        checkpoint: CleanerCheckpoint | None,
    ) -> bool:
        """Swap cleaned batches in for units [start, end) of each group; False (and
        nothing changes) if the log changed since ``snapshot``. The old lists stay
        with the snapshot, so that its ``release()`` frees them (off the loop)."""
        if (
            not isinstance(snapshot, MemorySnapshot)
            or snapshot.layout_version != self._layout_version
        ):
            return False
        for (start, end), writer in sorted(groups, key=lambda g: g[0], reverse=True):
            assert isinstance(writer, MemoryWriter)
            headers = writer.headers
            self._size += sum(h.size for h in headers) - sum(self._sizes[start:end])
            self._batches = [*self._batches[:start], *writer.batches, *self._batches[end:]]
            self._base = self._splice(self._base, start, end, [h.base_offset for h in headers])
            self._last = self._splice(self._last, start, end, [h.last_offset for h in headers])
            self._sizes = self._splice(self._sizes, start, end, [h.size for h in headers])
            self._max_ts = self._splice(
                self._max_ts, start, end, [h.max_timestamp for h in headers]
            )
        self._running_max_ts = list(itertools.accumulate(self._max_ts, max))
        self._layout_version += 1
        snapshot.layout_version = self._layout_version
        snapshot.retired = bool(groups)
        if checkpoint is not None:
            self.cleaner_checkpoint = checkpoint
        return True

    @staticmethod
    def _splice(old: list[int], start: int, end: int, new: list[int]) -> list[int]:
        return [*old[:start], *new, *old[end:]]

    def flush(self) -> None:
        """Everything appended so far is on the (simulated) disk."""
        self._recovery_point = self._log_end_offset

    def lose_unflushed(self) -> int:
        """A power loss: what was not flushed is gone (the log ends at its recovery point,
        never below its start); returns the offsets lost. Simulation only."""
        end = self._log_end_offset
        self.truncate_to(max(self._recovery_point, self._log_start_offset))
        return end - self._log_end_offset

    def close(self) -> None:
        """Nothing to release; the data stays readable until the object goes."""
