"""What a segment's two indexes share: fixed-size entries, in memory and appended to a file.

Kafka memory-maps preallocated index files. We keep each index's entries in two
parallel arrays (loaded once; an index is small, one entry per index.interval.bytes of
log) and append every entry to its file with one write, so the file on disk always holds
exactly the entries written. Truncation cuts the arrays and the file alike.
"""

from __future__ import annotations

import os
import struct
from array import array
from pathlib import Path
from typing import ClassVar


class IndexCorruptError(ValueError):
    """The index file does not hold valid entries; the segment rebuilds it."""


class IndexFile:
    """Base of ``OffsetIndex`` and ``TimeIndex``: file handling of the entries."""

    ENTRY: ClassVar[struct.Struct]

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._fd: int | None = None

    def _columns(self) -> tuple[array[int], array[int]]:
        """The two arrays of the entries, in file order."""
        raise NotImplementedError

    def _read_entries(self) -> list[tuple[int, ...]]:
        data = self.path.read_bytes()
        if len(data) % self.ENTRY.size:
            raise IndexCorruptError(
                f"{self.path}: size {len(data)} is not a multiple of {self.ENTRY.size}"
            )
        return list(self.ENTRY.iter_unpack(data))

    def _write_entry(self, *fields: int) -> None:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.write(self._fd, self.ENTRY.pack(*fields))

    def _truncate_entries(self, keep: int) -> None:
        columns = self._columns()
        if keep >= len(columns[0]):
            return
        for column in columns:
            del column[keep:]
        self.close()
        os.truncate(self.path, keep * self.ENTRY.size)

    def reset(self) -> None:
        """Empty the index (before a rebuild)."""
        self.close()
        for column in self._columns():
            del column[:]
        self.path.write_bytes(b"")

    def flush(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
