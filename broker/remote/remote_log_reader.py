"""Reading the remote tier: a consumer's fetch and a timestamp search, off the request path.

Kafka's RemoteLogReader runs on the ``remote.log.reader.threads`` pool: it finds the
segment that holds the fetch offset (the metadata manager), reads it (the storage
manager), and cuts from it whole batches from the one holding the offset, up to the
fetch's max bytes (KIP-74: at least one batch when ``min_one_message``). Here the read is
submitted to the storage model and its result handed back on the broker's timer.

A read_committed read also returns the aborted transactions that overlap the records it
returns (Kafka's collectAbortedTransactions): the transaction indexes of this segment and
of the remote segments after it, until an entry's last stable offset reaches past the
records (the search is complete: no later marker can belong to a transaction they
overlap); an incomplete search goes on in the local log's index (the remote log manager's
part, on the broker's side).

Every read runs on a slot of the reader pool (``remote_log_reader_pool.py``: Kafka's
``remote.log.reader.threads`` and its queue) and first needs the segment's indexes, from
the broker's ``RemoteIndexCache`` or, on a miss, a FETCH_INDEX call to the store; then the
segment is read from the position the offset index gives (one entry per batch here).

Where we differ: a timestamp search reads its segment whole (Kafka's looks the position
up in the time index first).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from broker.log.timestamps import first_record_at_or_after
from broker.log.transaction_index import ENTRY_SIZE as TXN_ENTRY_SIZE
from broker.log.transaction_index import AbortedTxn
from broker.remote.remote_index_cache import RemoteIndexCache, RemoteIndexEntry
from broker.remote.remote_log_metadata_manager import RemoteLogMetadataManager
from broker.remote.remote_log_reader_pool import (
    PooledRead,
    ReadJob,
    RejectedExecutionError,
    RemoteLogReaderPool,
)
from broker.remote.remote_log_segment_metadata import RemoteLogSegmentMetadata, TopicPartition
from broker.remote.remote_storage_manager import (
    IndexType,
    RemoteResourceNotFoundException,
    RemoteStorageManager,
)
from broker.remote.storage_model import RemoteOperation, RemoteStorageModel
from protocol.record_batch import iter_batches
from purgatory import SystemTimer

#: An offset index entry (segment_companions.offset_index): relative offset, position.
_OFFSET_ENTRY = struct.Struct(">ii")


@dataclass(frozen=True, slots=True)
class RemoteStorageFetchInfo:
    """Kafka's RemoteStorageFetchInfo: what a consumer's remote read asks."""

    fetch_max_bytes: int
    min_one_message: bool
    tp: TopicPartition
    fetch_offset: int
    #: Kafka's fetchIsolation: a read_committed consumer's read (aborted transactions too).
    read_committed: bool = False


@dataclass(slots=True)
class RemoteLogReadResult:
    """Kafka's RemoteLogReadResult, filled in when the read is done."""

    done: bool = False
    records: bytes = b""
    error: ErrorCode = ErrorCode.none
    #: read_committed only: the aborted transactions over [fetch_offset, upper_bound),
    #: and whether the tier's indexes alone settled them (else the local index too).
    aborted_transactions: list[AbortedTxn] | None = None
    txn_search_complete: bool = False
    fetch_offset: int = 0
    upper_bound: int = 0


def cut_batches(segment: bytes, offset: int, max_bytes: int, min_one: bool) -> bytes:
    """Whole batches from the one holding ``offset``, at most ``max_bytes`` (but one)."""
    start = end = -1
    for position, header in iter_batches(segment, allow_partial_tail=True):
        if header.last_offset < offset:
            continue
        if start < 0:
            start = position
            end = position + header.size
            if header.size > max_bytes and not min_one:
                return b""
            continue
        if position + header.size - start > max_bytes:
            break
        end = position + header.size
    return segment[start:end] if start >= 0 else b""


class RemoteLogReader:
    """Reads for fetches and timestamp searches, on the reader pool, through the model."""

    def __init__(
        self,
        metadata: RemoteLogMetadataManager,
        storage: RemoteStorageManager,
        model: RemoteStorageModel,
        timer: SystemTimer,
        on_bytes_read: Callable[[int], None],
        pool: RemoteLogReaderPool,
        index_cache: RemoteIndexCache,
    ) -> None:
        self.metadata = metadata
        self.storage = storage
        self.model = model
        self.timer = timer
        self._on_bytes_read = on_bytes_read
        self.pool = pool
        self.index_cache = index_cache

    def async_read(
        self, info: RemoteStorageFetchInfo, callback: Callable[[RemoteLogReadResult], None]
    ) -> PooledRead | None:
        """Kafka's asyncRead: the records at ``info.fetch_offset``, later, to ``callback``:
        on a reader slot, the segment's indexes (from the cache, else the store), then the
        records from the position its offset index gives."""
        segment = self.metadata.remote_log_segment_metadata(info.tp, info.fetch_offset)
        if segment is None:  # retention removed it meanwhile: Kafka's OffsetOutOfRange
            callback(RemoteLogReadResult(True, b"", ErrorCode.offset_out_of_range))
            return None

        def job(read: PooledRead, release: Callable[[], None]) -> None:
            def finish(result: RemoteLogReadResult | None, error: Exception | None) -> None:
                release()
                if read.cancelled:  # abandoned: the slot was held, nobody is answered
                    return
                if error is not None or result is None:
                    # Kafka's reader: any failure is the partition's error (a RemoteStorage-
                    # Exception is no ApiException: UNKNOWN_SERVER_ERROR to the client)
                    callback(RemoteLogReadResult(True, b"", ErrorCode.unknown_server_error))
                    return
                self._on_bytes_read(len(result.records))
                callback(result)

            def with_indexes(entry: RemoteIndexEntry | None, error: Exception | None) -> None:
                if entry is None:
                    finish(None, error)
                    return
                self.model.submit(
                    self.timer,
                    RemoteOperation.FETCH_SEGMENT,
                    segment.segment_size_in_bytes,
                    lambda: self._read(segment, entry, info),
                    finish,
                )

            self._index_entry(segment, with_indexes)

        return self._submit(job, callback)

    def _submit(
        self, job: ReadJob, callback: Callable[[RemoteLogReadResult], None]
    ) -> PooledRead | None:
        try:
            return self.pool.submit(job)
        except RejectedExecutionError:  # Kafka: the partition's error
            callback(RemoteLogReadResult(True, b"", ErrorCode.unknown_server_error))
            return None

    def _index_entry(
        self,
        segment: RemoteLogSegmentMetadata,
        then: Callable[[RemoteIndexEntry | None, Exception | None], None],
    ) -> None:
        """The segment's indexes: the cache's, else a FETCH_INDEX call (then cached)."""
        entry = self.index_cache.get(segment.segment_id.id)
        if entry is not None:
            then(entry, None)
            return

        def fetch() -> RemoteIndexEntry:
            offsets = self.storage.fetch_index(segment, IndexType.OFFSET)
            return RemoteIndexEntry(offsets, self._transaction_index(segment))

        def fetched(entry: RemoteIndexEntry | None, error: Exception | None) -> None:
            if entry is not None and error is None:
                self.index_cache.put(segment.segment_id.id, entry)
            then(entry, error)

        self.model.submit(self.timer, RemoteOperation.FETCH_INDEX, 0, fetch, fetched)

    def _transaction_index(self, segment: RemoteLogSegmentMetadata) -> bytes:
        try:
            return self.storage.fetch_index(segment, IndexType.TRANSACTION)
        except RemoteResourceNotFoundException:  # copied before the index was
            return b""

    def _read(
        self,
        segment: RemoteLogSegmentMetadata,
        entry: RemoteIndexEntry,
        info: RemoteStorageFetchInfo,
    ) -> RemoteLogReadResult:
        position = lookup_position(entry.offset_index, segment.start_offset, info.fetch_offset)
        data = self.storage.fetch_log_segment(segment, position)
        records = cut_batches(data, info.fetch_offset, info.fetch_max_bytes, info.min_one_message)
        result = RemoteLogReadResult(True, records, fetch_offset=info.fetch_offset)
        if info.read_committed:
            result.upper_bound = info.fetch_offset
            for _, header in iter_batches(records, allow_partial_tail=True):
                result.upper_bound = header.next_offset
            self._collect_aborted(segment, entry, result)
        return result

    def _collect_aborted(
        self, first: RemoteLogSegmentMetadata, entry: RemoteIndexEntry, result: RemoteLogReadResult
    ) -> None:
        """The tier's part of Kafka's collectAbortedTransactions, into ``result``: the
        read segment's index, then the next segments' (from the cache, else the store, in
        this call: the reader thread's time, not modelled apart)."""
        found: list[AbortedTxn] = []
        start, upper = result.fetch_offset, result.upper_bound
        for segment in self.metadata.copied_segments(first.segment_id.tp):
            if segment.start_offset < first.start_offset:
                continue
            index = entry.transaction_index if segment is first else self._txn_bytes(segment)
            for txn in decode_aborted_txns(index):
                if txn.last_offset >= start and txn.first_offset < upper:
                    found.append(txn)
                if txn.last_stable_offset >= upper:
                    result.txn_search_complete = True
            if result.txn_search_complete:
                break
        result.aborted_transactions = found

    def _txn_bytes(self, segment: RemoteLogSegmentMetadata) -> bytes:
        cached = self.index_cache.get(segment.segment_id.id)
        if cached is not None:
            return cached.transaction_index
        entry = RemoteIndexEntry(
            self.storage.fetch_index(segment, IndexType.OFFSET), self._transaction_index(segment)
        )
        self.index_cache.put(segment.segment_id.id, entry)
        return entry.transaction_index

    def async_find_offset_by_timestamp(
        self,
        tp: TopicPartition,
        timestamp: int,
        start_offset: int,
        callback: Callable[[tuple[int, int] | None, ErrorCode], None],
    ) -> PooledRead | None:
        """Kafka's findOffsetByTimestamp in the remote tier, on a reader slot: (offset,
        timestamp) of the first record at or after ``timestamp`` at or above
        ``start_offset``, else None."""
        candidates = [
            m
            for m in self.metadata.copied_segments(tp)
            if m.max_timestamp_ms >= timestamp and m.end_offset >= start_offset
        ]
        if not candidates:
            callback(None, ErrorCode.none)
            return None
        segment: RemoteLogSegmentMetadata = candidates[0]

        def search() -> tuple[int, int] | None:
            data = self.storage.fetch_log_segment(segment, 0)
            for position, header in iter_batches(data, allow_partial_tail=True):
                if header.max_timestamp < timestamp or header.last_offset < start_offset:
                    continue
                found = first_record_at_or_after(
                    data[position : position + header.size], timestamp, start_offset
                )
                if found is not None:
                    return found
            return None

        def job(read: PooledRead, release: Callable[[], None]) -> None:
            def done(found: tuple[int, int] | None, error: Exception | None) -> None:
                release()
                if read.cancelled:
                    return
                callback(found if error is None else None, _error_code(error))

            self.model.submit(
                self.timer,
                RemoteOperation.FETCH_SEGMENT,
                segment.segment_size_in_bytes,
                search,
                done,
            )

        try:
            return self.pool.submit(job)
        except RejectedExecutionError:
            callback(None, ErrorCode.unknown_server_error)
            return None


def _error_code(error: Exception | None) -> ErrorCode:
    return ErrorCode.none if error is None else ErrorCode.unknown_server_error


def lookup_position(offset_index: bytes, base_offset: int, offset: int) -> int:
    """The position of the last index entry at or below ``offset`` (Kafka's
    OffsetIndex.lookup): where the batch holding ``offset`` starts, or an earlier one."""
    position = 0
    for relative, at in _OFFSET_ENTRY.iter_unpack(offset_index[: len(offset_index) // 8 * 8]):
        if base_offset + relative > offset:
            break
        position = at
    return position


def decode_aborted_txns(index: bytes) -> list[AbortedTxn]:
    positions = range(0, len(index) - TXN_ENTRY_SIZE + 1, TXN_ENTRY_SIZE)
    return [AbortedTxn.decode(index, position) for position in positions]
