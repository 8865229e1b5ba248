"""Record-granularity timestamp lookups inside one batch (ListOffsets).

Shared by both logs: they find the candidate batch from their indexes, then decode
its records here (decompressing, with the protocol's bound) to answer with a record's
own offset and timestamp, as Kafka does. A batch whose records cannot be decoded (its
CRC was right, its payload was not: stored before produce-time validation, or an
uncompressed batch, which is not walked record by record at produce time) is answered
at batch granularity from its header instead — its first offset and its max timestamp —
so one bad batch never makes a partition's ListOffsets fail.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from protocol.record_batch import CorruptRecordError, iter_records, parse_batch_header

log = logging.getLogger("broker.log")


def first_record_at_or_after(batch: bytes, ts_ms: int, min_offset: int) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record with timestamp >= ts_ms and
    offset >= min_offset, or None."""
    try:
        for record in iter_records(batch):
            if record.timestamp >= ts_ms and record.offset >= min_offset:
                return record.offset, record.timestamp
    except CorruptRecordError as exc:
        return _batch_level(batch, exc, lambda max_ts: max_ts >= ts_ms, min_offset)
    return None


def record_with_timestamp(batch: bytes, ts_ms: int, min_offset: int) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record carrying exactly ts_ms, or None."""
    try:
        for record in iter_records(batch):
            if record.timestamp == ts_ms and record.offset >= min_offset:
                return record.offset, record.timestamp
    except CorruptRecordError as exc:
        return _batch_level(batch, exc, lambda max_ts: max_ts == ts_ms, min_offset)
    return None


def _batch_level(
    batch: bytes, exc: CorruptRecordError, matches: Callable[[int], bool], min_offset: int
) -> tuple[int, int] | None:
    header = parse_batch_header(batch)
    log.warning(
        "records of the batch at offset %d cannot be read (%s); answering from its header",
        header.base_offset,
        exc,
    )
    if matches(header.max_timestamp):
        return max(header.base_offset, min_offset), header.max_timestamp
    return None
