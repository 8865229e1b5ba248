"""Remote segments' indexes, cached by the broker that reads them (Kafka's RemoteIndexCache).

A remote read needs the segment's offset index (where in the segment its fetch offset
starts), and a read_committed one its transaction index. Kafka keeps the indexes it
fetched from the remote tier in a cache of at most
``remote.log.index.file.cache.total.size.bytes`` (1 GiB) on the broker's disk, evicting
the least recently used; a miss costs a ``fetchIndex`` call to the store before the
segment is read, in the same reader thread. Here the entries are kept in memory with the
same bound (their bytes), and a miss is a FETCH_INDEX call to the storage model: with a
slow store, a cold or too small cache adds the index's wait to every remote read. A
deleted remote segment's entry goes with it (Kafka's ``remove``).

``hits``, ``misses`` and ``evictions`` count what the cache did; ``size_bytes`` is what
it holds.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RemoteIndexEntry:
    """One segment's indexes, as the store holds them."""

    offset_index: bytes
    transaction_index: bytes

    @property
    def size(self) -> int:
        return len(self.offset_index) + len(self.transaction_index)


class RemoteIndexCache:
    """Least recently used first out, within ``max_bytes``."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[str, RemoteIndexEntry] = OrderedDict()
        self.size_bytes = 0
        self.hits = 0
        self.misses = 0
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, segment_id: str) -> RemoteIndexEntry | None:
        entry = self._entries.get(segment_id)
        if entry is None:
            self.misses += 1
            return None
        self.hits += 1
        self._entries.move_to_end(segment_id)
        return entry

    def put(self, segment_id: str, entry: RemoteIndexEntry) -> None:
        self.remove(segment_id)
        if entry.size > self.max_bytes:  # never fits: used once, not kept
            return
        self._entries[segment_id] = entry
        self.size_bytes += entry.size
        while self.size_bytes > self.max_bytes:
            _, evicted = self._entries.popitem(last=False)
            self.size_bytes -= evicted.size
            self.evictions += 1

    def remove(self, segment_id: str) -> None:
        entry = self._entries.pop(segment_id, None)
        if entry is not None:
            self.size_bytes -= entry.size
