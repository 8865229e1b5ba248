"""A segment's sparse time index (`.timeindex`): timestamp -> offset.

Kafka's format: 12-byte entries, timestamp int64 and relative offset int32. Entries are
added beside offset-index entries, only when the segment's running maximum timestamp
has grown, so timestamps increase along the file. An entry (T, O) says: the largest
timestamp up to offset O is T, and O's batch is where T first appeared. Hence every
batch before O's holds only timestamps below T, and a search for the first timestamp
>= ts may start at the batch of the last entry with T <= ts.

As with the offset index, the entries live in arrays and are appended to the file.
"""

from __future__ import annotations

import bisect
import os
import struct
from array import array
from pathlib import Path

from broker.log.offset_index import IndexCorruptError

ENTRY = struct.Struct(">qi")


class TimeIndex:
    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._timestamps = array("q")
        self._offsets = array("q")
        self._fd: int | None = None

    @classmethod
    def load(cls, path: Path, base_offset: int) -> TimeIndex:
        index = cls(path, base_offset)
        data = path.read_bytes()
        if len(data) % ENTRY.size:
            raise IndexCorruptError(f"{path}: size {len(data)} is not a multiple of 12")
        last_ts = last_rel = -(2**63)
        for ts, rel in ENTRY.iter_unpack(data):
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
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.write(self._fd, ENTRY.pack(ts_ms, offset - self.base_offset))

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries whose offset is >= `offset`."""
        keep = bisect.bisect_left(self._offsets, offset)
        if keep >= len(self._offsets):
            return
        del self._timestamps[keep:]
        del self._offsets[keep:]
        self.close()
        os.truncate(self.path, keep * ENTRY.size)

    def reset(self) -> None:
        self.close()
        self._timestamps = array("q")
        self._offsets = array("q")
        self.path.write_bytes(b"")

    def flush(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
