"""The aborted-transaction index of one partition (Kafka's TransactionIndex).

Every transaction that ends with an ABORT marker gets an entry: the producer id, the
transaction's first offset, its last offset (the marker's) and the last stable offset
when the marker was written. A read_committed Fetch lists the aborted transactions that
overlap the range it returns (``collect_aborted_txns``), so the consumer can drop their
records; committed transactions need no entry.

Kafka keeps one ``<base>.txnindex`` file per segment, the entries of the markers written
while that segment was active, 34 bytes each::

    version int16 (0) | producerId int64 | firstOffset int64 | lastOffset int64 |
    lastStableOffset int64

A DiskLog's index writes the same files beside its segments (``directory`` and
``segment_bases`` given), appended as markers land and rewritten when entries go
(truncation, the log start moving past them). The entries are held in memory in marker
order, which is ``last_offset`` order; a MemoryLog's index is only that.

Where this differs from Kafka: the files are written, not read back. When a partition
opens, its producer state and this index are rebuilt together from the log's batches
(``Partition.rebuild_from_log``, one pass over the batch headers and the markers), the
way the leader-epoch cache is; ``reset`` first removes the old files, and the replay
writes them again. Kafka loads them, and rebuilds only the segments it recovers.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

TXN_INDEX_SUFFIX = ".txnindex"
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34
_VERSION = 0


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(
            _VERSION, self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset
        )

    @classmethod
    def decode(cls, data: bytes, position: int = 0) -> AbortedTxn:
        _version, producer_id, first, last, lso = _ENTRY.unpack_from(data, position)
        return cls(producer_id, first, last, lso)


def read_txn_index_file(path: Path) -> list[AbortedTxn]:
    """The entries of one ``.txnindex`` file (a torn last entry is ignored)."""
    data = path.read_bytes()
    positions = range(0, len(data) - ENTRY_SIZE + 1, ENTRY_SIZE)
    return [AbortedTxn.decode(data, pos) for pos in positions]


class TransactionIndex:
    def __init__(
        self,
        directory: Path | None = None,
        segment_bases: Callable[[], list[int]] | None = None,
    ) -> None:
        self._directory = directory
        self._segment_bases = segment_bases
        self._entries: list[AbortedTxn] = []
        self._last_offsets: list[int] = []  # parallel to _entries, for bisect
        self._files: dict[int, list[AbortedTxn]] = {}  # segment base -> its entries

    def __len__(self) -> int:
        return len(self._entries)

    def entries(self) -> list[AbortedTxn]:
        return list(self._entries)

    def append(self, txn: AbortedTxn) -> None:
        """A transaction aborted: its marker (``txn.last_offset``) is the newest entry."""
        if self._last_offsets and txn.last_offset <= self._last_offsets[-1]:
            raise ValueError(
                f"aborted transaction ending at {txn.last_offset} is not after the last "
                f"entry's {self._last_offsets[-1]}"
            )
        self._entries.append(txn)
        self._last_offsets.append(txn.last_offset)
        base = self._segment_base(txn.last_offset)
        if base is not None:
            self._files.setdefault(base, []).append(txn)
            with open(self._path(base), "ab") as f:
                f.write(txn.encode())

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [fetch_offset, upper_bound_offset): those
        ending at or after ``fetch_offset`` and starting before the bound."""
        start = bisect.bisect_left(self._last_offsets, fetch_offset)
        return [t for t in self._entries[start:] if t.first_offset < upper_bound_offset]

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or above ``offset`` (a truncated log)."""
        keep = bisect.bisect_left(self._last_offsets, offset)
        if keep < len(self._entries):
            self._replace(self._entries[:keep])

    def delete_before(self, log_start_offset: int) -> None:
        """Drop the entries whose marker lies below the log start (deleted segments)."""
        drop = bisect.bisect_left(self._last_offsets, log_start_offset)
        if drop:
            self._replace(self._entries[drop:])

    def reset(self) -> None:
        """Empty the index and remove its files (a rebuild follows)."""
        self._entries = []
        self._last_offsets = []
        self._files = {}
        if self._directory is not None and self._directory.is_dir():
            for path in self._directory.glob(f"*{TXN_INDEX_SUFFIX}"):
                path.unlink(missing_ok=True)

    # -- files ---------------------------------------------------------------------

    def _segment_base(self, offset: int) -> int | None:
        if self._directory is None or self._segment_bases is None:
            return None
        bases = self._segment_bases()
        i = bisect.bisect_right(bases, offset) - 1
        return bases[max(i, 0)] if bases else None

    def _path(self, base: int) -> Path:
        assert self._directory is not None
        return self._directory / f"{base:020d}{TXN_INDEX_SUFFIX}"

    def _replace(self, kept: list[AbortedTxn]) -> None:
        self._entries = kept
        self._last_offsets = [t.last_offset for t in kept]
        if self._directory is None:
            return
        kept_set = set(kept)
        for base, txns in list(self._files.items()):
            remaining = [t for t in txns if t in kept_set]
            if len(remaining) == len(txns):
                continue
            if remaining:
                self._files[base] = remaining
                self._path(base).write_bytes(b"".join(t.encode() for t in remaining))
            else:
                del self._files[base]
                self._path(base).unlink(missing_ok=True)
