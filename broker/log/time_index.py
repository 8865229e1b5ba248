"""A segment's sparse time index (`.timeindex`): timestamp -> offset.

Kafka's format: 12-byte entries, timestamp int64 and relative offset int32. Entries are
added beside offset-index entries, only when the segment's running maximum timestamp
has grown, so timestamps increase along the file. An entry (T, O) says: the largest
timestamp up to offset O is T, and O's batch is where T first appeared. Hence every
batch before O's holds only timestamps below T, and a search for the first timestamp
>= ts may start at the batch of the last entry with T <= ts. File handling:
``index_file.py``.
"""

from __future__ import annotations

import bisect
import struct
from array import array
from pathlib import Path

from broker.log.index_file import IndexCorruptError, IndexFile


class TimeIndex(IndexFile):
    ENTRY = struct.Struct(">qi")

    def __init__(self, path: Path, base_offset: int) -> None:
        super().__init__(path, base_offset)
        self._timestamps = array("q")
        self._offsets = array("q")

    def _columns(self) -> tuple[array[int], array[int]]:
        return self._timestamps, self._offsets

    @classmethod
    def load(cls, path: Path, base_offset: int) -> TimeIndex:
        index = cls(path, base_offset)
        last_ts = last_rel = -(2**63)
        for ts, rel in index._read_entries():
            if ts <= last_ts or rel < last_rel or rel < 0:
                raise IndexCorruptError(f"{path}: entries are not increasing")
            index._timestamps.append(ts)
            index._offsets.append(base_offset + rel)
            last_ts, last_rel = ts, rel
        return index

    def __len__(self) -> int:
        return len(self._timestamps)

    def last_entry(self) -> tuple[int, int] | None:
        """(timestamp, offset) of the newest entry."""
        if not self._timestamps:
            return None
        return self._timestamps[-1], self._offsets[-1]

    def lookup(self, ts_ms: int) -> int | None:
        """Offset of the last entry whose timestamp is <= ts_ms: a scan for the first
        record with timestamp >= ts_ms may start at that offset's batch. None: scan
        from the segment's start."""
        i = bisect.bisect_right(self._timestamps, ts_ms)
        return self._offsets[i - 1] if i else None

    def maybe_append(self, ts_ms: int, offset: int) -> None:
        """Add (ts, offset) if ts is a new maximum."""
        if self._timestamps and ts_ms <= self._timestamps[-1]:
            return
        if self._offsets and offset < self._offsets[-1]:
            return
        self._timestamps.append(ts_ms)
        self._offsets.append(offset)
        self._write_entry(ts_ms, offset - self.base_offset)

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries whose offset is >= `offset`."""
        self._truncate_entries(bisect.bisect_left(self._offsets, offset))
