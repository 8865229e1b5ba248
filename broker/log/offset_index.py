"""A segment's sparse offset index (`.index`): relative offset -> file position.

Kafka's format: 8-byte entries, relative offset int32 (offset - segment base offset)
and position int32, big-endian, one entry about every index.interval.bytes of log.
As in Kafka, an entry's offset is the *last* offset of the batch that starts at the
position, and a lookup gives the greatest entry at or below the target, from where
the segment is scanned forward.

Kafka memory-maps a preallocated file; we keep the entries in arrays (loaded once;
the index is small: one entry per 4 KiB of log) and append each entry to the file
with a write, so the file on disk is always exactly the entries written.
"""

from __future__ import annotations

import bisect
import os
import struct
from array import array
from pathlib import Path

ENTRY = struct.Struct(">ii")


class IndexCorruptError(ValueError):
    """The index file does not hold valid entries; the segment rebuilds it."""


class OffsetIndex:
    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._offsets = array("q")  # absolute offsets, increasing
        self._positions = array("q")
        self._fd: int | None = None

    @classmethod
    def load(cls, path: Path, base_offset: int) -> OffsetIndex:
        """Read an existing index; IndexCorruptError if its entries are not valid."""
        index = cls(path, base_offset)
        data = path.read_bytes()
        if len(data) % ENTRY.size:
            raise IndexCorruptError(f"{path}: size {len(data)} is not a multiple of 8")
        last_rel = last_pos = -1
        for rel, pos in ENTRY.iter_unpack(data):
            if rel <= last_rel or pos <= last_pos or rel < 0:
                raise IndexCorruptError(f"{path}: entries are not increasing")
            index._offsets.append(base_offset + rel)
            index._positions.append(pos)
            last_rel, last_pos = rel, pos
        return index

    def __len__(self) -> int:
        return len(self._offsets)

    def last_entry(self) -> tuple[int, int] | None:
        """(offset, position) of the newest entry."""
        if not self._offsets:
            return None
        return self._offsets[-1], self._positions[-1]

    def lookup(self, offset: int) -> int:
        """Position from which a scan for `offset` starts (0 if no entry is at or below)."""
        i = bisect.bisect_right(self._offsets, offset)
        return self._positions[i - 1] if i else 0

    def append(self, offset: int, position: int) -> None:
        if self._offsets and offset <= self._offsets[-1]:
            return
        self._offsets.append(offset)
        self._positions.append(position)
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.write(self._fd, ENTRY.pack(offset - self.base_offset, position))

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries whose offset is >= `offset` (the batches they name are gone)."""
        keep = bisect.bisect_left(self._offsets, offset)
        self._truncate_entries(keep)

    def truncate_to_position(self, position: int) -> None:
        """Drop entries pointing at or past `position`."""
        keep = bisect.bisect_left(self._positions, position)
        self._truncate_entries(keep)

    def _truncate_entries(self, keep: int) -> None:
        if keep >= len(self._offsets):
            return
        del self._offsets[keep:]
        del self._positions[keep:]
        self.close()
        os.truncate(self.path, keep * ENTRY.size)

    def reset(self) -> None:
        """Empty the index (before a rebuild)."""
        self.close()
        self._offsets = array("q")
        self._positions = array("q")
        self.path.write_bytes(b"")

    def flush(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
