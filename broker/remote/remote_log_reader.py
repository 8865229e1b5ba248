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

Where we differ: the whole segment is fetched and cut in memory (Kafka reads from the
position its offset index gives).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from broker.log.timestamps import first_record_at_or_after
from broker.log.transaction_index import ENTRY_SIZE as TXN_ENTRY_SIZE
from broker.log.transaction_index import AbortedTxn
from broker.remote.remote_log_metadata_manager import RemoteLogMetadataManager
from broker.remote.remote_log_segment_metadata import RemoteLogSegmentMetadata, TopicPartition
from broker.remote.remote_storage_manager import (
    IndexType,
    RemoteResourceNotFoundException,
    RemoteStorageManager,
)
from broker.remote.storage_model import RemoteOperation, RemoteStorageModel, RemoteTask
from protocol.record_batch import iter_batches
from purgatory import SystemTimer


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
    """Reads for fetches and timestamp searches, through the storage model."""

    def __init__(
        self,
        metadata: RemoteLogMetadataManager,
        storage: RemoteStorageManager,
        model: RemoteStorageModel,
        timer: SystemTimer,
        on_bytes_read: Callable[[int], None],
    ) -> None:
        self.metadata = metadata
        self.storage = storage
        self.model = model
        self.timer = timer
        self._on_bytes_read = on_bytes_read

    def async_read(
        self, info: RemoteStorageFetchInfo, callback: Callable[[RemoteLogReadResult], None]
    ) -> RemoteTask | None:
        """Kafka's asyncRead: the records at ``info.fetch_offset``, later, to ``callback``."""
        segment = self.metadata.remote_log_segment_metadata(info.tp, info.fetch_offset)
        if segment is None:  # retention removed it meanwhile: Kafka's OffsetOutOfRange
            callback(RemoteLogReadResult(True, b"", ErrorCode.offset_out_of_range))
            return None

        def read() -> RemoteLogReadResult:
            data = self.storage.fetch_log_segment(segment, 0)
            records = cut_batches(
                data, info.fetch_offset, info.fetch_max_bytes, info.min_one_message
            )
            result = RemoteLogReadResult(True, records, fetch_offset=info.fetch_offset)
            if info.read_committed:
                result.upper_bound = info.fetch_offset
                for _, header in iter_batches(records, allow_partial_tail=True):
                    result.upper_bound = header.next_offset
                self._collect_aborted(segment, result)
            return result

        def done(result: RemoteLogReadResult | None, error: Exception | None) -> None:
            if error is not None or result is None:
                # Kafka's reader: any failure is the partition's error (a RemoteStorage-
                # Exception is no ApiException: UNKNOWN_SERVER_ERROR to the client)
                callback(RemoteLogReadResult(True, b"", ErrorCode.unknown_server_error))
                return
            self._on_bytes_read(len(result.records))
            callback(result)

        return self.model.submit(
            self.timer, RemoteOperation.FETCH_SEGMENT, segment.segment_size_in_bytes, read, done
        )

    def _collect_aborted(
        self, first: RemoteLogSegmentMetadata, result: RemoteLogReadResult
    ) -> None:
        """The tier's part of Kafka's collectAbortedTransactions, into ``result``."""
        found: list[AbortedTxn] = []
        start, upper = result.fetch_offset, result.upper_bound
        for segment in self.metadata.copied_segments(first.segment_id.tp):
            if segment.start_offset < first.start_offset:
                continue
            for txn in self._aborted_txns(segment):
                if txn.last_offset >= start and txn.first_offset < upper:
                    found.append(txn)
                if txn.last_stable_offset >= upper:
                    result.txn_search_complete = True
            if result.txn_search_complete:
                break
        result.aborted_transactions = found

    def _aborted_txns(self, segment: RemoteLogSegmentMetadata) -> list[AbortedTxn]:
        try:
            data = self.storage.fetch_index(segment, IndexType.TRANSACTION)
        except RemoteResourceNotFoundException:  # copied before the index was
            return []
        positions = range(0, len(data) - TXN_ENTRY_SIZE + 1, TXN_ENTRY_SIZE)
        return [AbortedTxn.decode(data, position) for position in positions]

    def async_find_offset_by_timestamp(
        self,
        tp: TopicPartition,
        timestamp: int,
        start_offset: int,
        callback: Callable[[tuple[int, int] | None, ErrorCode], None],
    ) -> RemoteTask | None:
        """Kafka's findOffsetByTimestamp in the remote tier: (offset, timestamp) of the
        first record at or after ``timestamp`` at or above ``start_offset``, else None."""
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

        def done(found: tuple[int, int] | None, error: Exception | None) -> None:
            if error is not None:
                callback(None, ErrorCode.unknown_server_error)
            else:
                callback(found, ErrorCode.none)

        return self.model.submit(
            self.timer, RemoteOperation.FETCH_SEGMENT, segment.segment_size_in_bytes, search, done
        )
