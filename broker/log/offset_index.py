"""A segment's sparse offset index (`.index`): relative offset -> file position.

Kafka's format: 8-byte entries, relative offset int32 (offset - segment base offset)
and position int32, big-endian, one entry about every index.interval.bytes of log.
As in Kafka, an entry's offset is the *last* offset of the batch that starts at the
position, and a lookup gives the greatest entry at or below the target, from where
the segment is scanned forward. File handling: ``index_file.py``.
"""

from __future__ import annotations

import bisect
import struct
from array import array
from pathlib import Path

from broker.log.index_file import IndexCorruptError, IndexFile

__all__ = ["IndexCorruptError", "OffsetIndex"]


class OffsetIndex(IndexFile):
    ENTRY = struct.Struct(">ii")

    def __init__(self, path: Path, base_offset: int) -> None:
        super().__init__(path, base_offset)
        self._offsets = array("q")  # absolute offsets, increasing
        self._positions = array("q")

    def _columns(self) -> tuple[array[int], array[int]]:
        return self._offsets, self._positions

    @classmethod
    def load(cls, path: Path, base_offset: int) -> OffsetIndex:
        """Read an existing index; IndexCorruptError if its entries are not valid."""
        index = cls(path, base_offset)
        last_rel = last_pos = -1
        for rel, pos in index._read_entries():
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
        self._write_entry(offset - self.base_offset, position)

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries whose offset is >= `offset` (the batches they name are gone)."""
        self._truncate_entries(bisect.bisect_left(self._offsets, offset))

    def truncate_to_position(self, position: int) -> None:
        """Drop entries pointing at or past `position`."""
        self._truncate_entries(bisect.bisect_left(self._positions, position))
