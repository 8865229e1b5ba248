"""Record-granularity timestamp lookups inside one batch (ListOffsets).

Shared by both logs: they find the candidate batch from their indexes, then decode
its records here (decompressing if needed) to answer with a record's own offset and
timestamp, as Kafka does.
"""

from __future__ import annotations

from protocol.record_batch import iter_records


def first_record_at_or_after(batch: bytes, ts_ms: int, min_offset: int) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record with timestamp >= ts_ms and
    offset >= min_offset, or None."""
    for record in iter_records(batch):
        if record.timestamp >= ts_ms and record.offset >= min_offset:
            return record.offset, record.timestamp
    return None


def record_with_timestamp(batch: bytes, ts_ms: int, min_offset: int) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record carrying exactly ts_ms, or None."""
    for record in iter_records(batch):
        if record.timestamp == ts_ms and record.offset >= min_offset:
            return record.offset, record.timestamp
    return None
