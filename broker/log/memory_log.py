"""A partition log held in memory: a list of batches plus a bisectable index.

Used when the broker has no data directory (tests, simulations). Each stored batch is
one immutable bytes object; parallel lists hold each batch's base and last offset,
size and max timestamp, so a read is a bisect plus a join of whole batches. There are
no segments: retention and DeleteRecords work batch by batch, which is finer than
Kafka's segment granularity but keeps the same rules (see retention.py).
"""

from __future__ import annotations

import bisect
import itertools

from broker.log.errors import OffsetOutOfRangeError
from broker.log.log_config import LogConfig
from broker.log.partition_log import AppendInfo, prepare_follower_append, prepare_leader_append
from broker.log.retention import deletable_prefix
from broker.log.timestamps import first_record_at_or_after, record_with_timestamp
from protocol.record_batch import iter_batches


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

    # -- appends ----------------------------------------------------------------------

    def append_as_leader(
        self, records: bytes, *, log_append_time_ms: int | None = None, leader_epoch: int = 0
    ) -> AppendInfo:
        data, info = prepare_leader_append(
            records,
            config=self.config,
            log_end_offset=self._log_end_offset,
            log_append_time_ms=log_append_time_ms,
            leader_epoch=leader_epoch,
        )
        self._store(bytes(data))
        info.log_start_offset = self._log_start_offset
        return info

    def append_as_follower(self, records: bytes) -> AppendInfo:
        info = prepare_follower_append(records, log_end_offset=self._log_end_offset)
        if info.batches:
            self._store(bytes(records))
        info.log_start_offset = self._log_start_offset
        return info

    def _store(self, data: bytes) -> None:
        view = memoryview(data)
        single = True
        for pos, header in iter_batches(view):
            size = header.size
            single = single and pos == 0 and size == len(data)
            self._batches.append(data if single else bytes(view[pos : pos + size]))
            self._base.append(header.base_offset)
            self._last.append(header.last_offset)
            self._sizes.append(size)
            self._max_ts.append(header.max_timestamp)
            prev = self._running_max_ts[-1] if self._running_max_ts else header.max_timestamp
            self._running_max_ts.append(max(prev, header.max_timestamp))
            self._size += size
            self._log_end_offset = header.last_offset + 1

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

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Empty the log and restart it at `offset` (a follower fell below its leader's
        log start)."""
        self._drop_tail(0)
        self._log_start_offset = self._log_end_offset = offset

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start to `offset` and drop batches wholly below."""
        if offset > self._log_end_offset:
            raise OffsetOutOfRangeError(offset, self._log_start_offset, self._log_end_offset)
        if offset <= self._log_start_offset:
            return self._log_start_offset
        self._log_start_offset = offset
        self._drop_head(bisect.bisect_left(self._last, offset))
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

    def flush(self) -> None:
        """Nothing to flush in memory."""

    def close(self) -> None:
        """Nothing to release; the data stays readable until the object goes."""
