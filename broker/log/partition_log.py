"""The interface every partition log offers, and the append checks they share.

Offsets are assigned in exactly one place: `prepare_leader_append`, which the logs'
`append_as_leader` calls with their log end offset. A follower's batches arrive with
the leader's offsets and are stored as they are (`prepare_follower_append` checks them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from broker import real_clock
from broker.log.cleanable import CleanedWriter, CleanerCheckpoint, CleanerSnapshot
from broker.log.errors import RecordTooLargeError, UnexpectedAppendOffsetError
from broker.log.log_config import LogConfig
from protocol.record_batch import (
    RecordBatchHeader,
    iter_batches,
    stamp_leader_batches,
    validate_batches,
)

NO_TIMESTAMP = -1


@dataclass(slots=True)
class AppendInfo:
    """What an append did, in the terms ProduceResponse needs.

    `log_append_time_ms` is -1 unless the batches were stamped with LogAppendTime,
    which is exactly ProduceResponse's field. `log_start_offset` is the log start after
    the append (ProduceResponse v5+).
    """

    first_offset: int
    last_offset: int
    num_records: int
    max_timestamp: int
    log_append_time_ms: int
    batches: list[RecordBatchHeader] = field(default_factory=list)
    log_start_offset: int = 0
    # offset of the batch holding max_timestamp (its last offset, as Kafka's
    # shallowOffsetOfMaxTimestamp); -1 when there is none
    offset_of_max_timestamp: int = -1


class PartitionLog(Protocol):
    """One partition's log of record batches. MemoryLog and DiskLog implement it."""

    config: LogConfig

    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int:
        """The next offset to assign."""
        ...

    @property
    def size_bytes(self) -> int: ...

    def append_as_leader(
        self,
        records: bytes,
        *,
        log_append_time_ms: int | None = None,
        leader_epoch: int = 0,
        validated: list[RecordBatchHeader] | None = None,
    ) -> AppendInfo:
        """Append a producer's batches with offsets from our log end.

        ``validated``: ``validate_batches(records)``'s headers when the caller (the
        partition, which checks more than the log does) has validated them already;
        they are not walked again, and they are updated to the appended batches.
        """
        ...

    def append_as_follower(self, records: bytes) -> AppendInfo: ...

    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one_batch: bool = True,
    ) -> bytes: ...

    def offset_for_timestamp(self, ts_ms: int) -> tuple[int, int] | None: ...

    def max_timestamp(self) -> tuple[int, int] | None: ...

    def truncate_to(self, offset: int) -> None: ...

    def truncate_fully_and_start_at(self, offset: int) -> None: ...

    def delete_records_before(self, offset: int) -> int: ...

    def apply_retention(self, now_ms: int, *, high_watermark: int | None = None) -> int: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...

    # -- what the log cleaner uses (log_cleaner.py, cleanable.py) ----------------------

    cleaner_checkpoint: CleanerCheckpoint

    @property
    def active_segment_base_offset(self) -> int:
        """The cleaner never cleans at or above this."""
        ...

    @property
    def layout_version(self) -> int:
        """Changes whenever batches are removed or replaced (truncation, retention,
        DeleteRecords, cleaning, close): a cleaning started before is void."""
        ...

    def cleaner_snapshot(self) -> CleanerSnapshot: ...

    def replace_cleaned(
        self,
        snapshot: CleanerSnapshot,
        groups: list[tuple[tuple[int, int], CleanedWriter]],
        checkpoint: CleanerCheckpoint | None,
    ) -> bool: ...


def prepare_leader_append(
    records: bytes | bytearray | memoryview,
    *,
    config: LogConfig,
    log_end_offset: int,
    log_append_time_ms: int | None,
    leader_epoch: int,
    validated: list[RecordBatchHeader] | None = None,
) -> tuple[bytearray, AppendInfo]:
    """Validate a producer's batches and rewrite them for the log.

    Nothing is returned (and so nothing appended) unless every batch is good.
    `log_append_time_ms` is "now" on the broker's clock; it is applied only when the
    topic's message.timestamp.type is LogAppendTime, as in Kafka (for CreateTime the
    producer's timestamps stand). A LogAppendTime topic with no time given falls back
    to the wall clock. `validated`: see ``PartitionLog.append_as_leader``.
    """
    headers = validate_batches(records) if validated is None else validated
    if validated is None:
        for header in headers:
            if header.size > config.max_message_bytes:
                raise RecordTooLargeError(
                    f"record batch of {header.size} bytes exceeds max.message.bytes "
                    f"{config.max_message_bytes}"
                )
    append_time: int | None = None
    if config.uses_log_append_time:
        append_time = (
            log_append_time_ms if log_append_time_ms is not None else real_clock.wall_clock_ms()
        )
    data = stamp_leader_batches(records, headers, log_end_offset, leader_epoch, append_time)
    num_records = 0
    max_ts = NO_TIMESTAMP
    offset_of_max = -1
    for header in headers:
        num_records += header.records_count
        if header.max_timestamp > max_ts:
            max_ts = header.max_timestamp
            offset_of_max = header.base_offset + header.last_offset_delta
    info = AppendInfo(
        first_offset=log_end_offset,
        last_offset=headers[-1].base_offset + headers[-1].last_offset_delta,
        num_records=num_records,
        max_timestamp=max_ts,
        log_append_time_ms=append_time if append_time is not None else NO_TIMESTAMP,
        batches=headers,
        offset_of_max_timestamp=offset_of_max,
    )
    return data, info


def prepare_follower_append(
    records: bytes | bytearray | memoryview, *, log_end_offset: int
) -> AppendInfo:
    """Check a leader's batches before a follower stores them as they are.

    CRCs are verified (a corrupt fetch must not poison the replica). The first batch
    must not start below the log end (UnexpectedAppendOffsetError: truncate first);
    offsets must increase. As in Kafka, a gap is allowed (a compacted or
    retention-trimmed leader), and the log end moves to the last offset + 1.
    An empty `records` is a no-op append.
    """
    headers = [h for _, h in iter_batches(records, verify_crc=True)]
    num_records = 0
    max_ts = NO_TIMESTAMP
    offset_of_max = -1
    expected = log_end_offset
    for header in headers:
        if header.base_offset < expected or header.last_offset_delta < 0:
            raise UnexpectedAppendOffsetError(
                f"follower append has a batch at offsets [{header.base_offset}, "
                f"{header.last_offset}], expected offsets from {expected}"
            )
        expected = header.last_offset + 1
        num_records += header.records_count
        if header.max_timestamp > max_ts:
            max_ts = header.max_timestamp
            offset_of_max = header.last_offset
    first = headers[0].base_offset if headers else log_end_offset
    return AppendInfo(
        first_offset=first,
        last_offset=expected - 1,
        num_records=num_records,
        max_timestamp=max_ts,
        log_append_time_ms=NO_TIMESTAMP,
        batches=headers,
        offset_of_max_timestamp=offset_of_max,
    )
