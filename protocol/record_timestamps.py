"""The timestamps of a batch's records, read without decoding them (KIP-937's check).

Kafka's LogValidator judges each produced record's timestamp against
``message.timestamp.before.max.ms`` / ``after.max.ms`` (``broker/replica/
timestamp_validation.py`` decides when the batch header is not enough). This is the walk
it needs: each record's length and timestampDelta, nothing else, in the style of
``record_batch._check_records``.
"""

from __future__ import annotations

from protocol.record_batch import (
    ATTR_TIMESTAMP_TYPE,
    BATCH_HEADER_SIZE,
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    NO_TIMESTAMP,
    Buffer,
    CorruptRecordError,
    InvalidRecordError,
    RecordBatchHeader,
    _batch_payload,
    _invalid_structure,
    parse_batch_header,
)
from protocol.varint import read_bounded_varint

__all__ = ["records_outside_timestamps"]


def records_outside_timestamps(
    batch: Buffer,
    lower_ms: int,
    upper_ms: int,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
    header: RecordBatchHeader | None = None,
) -> list[tuple[int, int, int]]:
    """``(index, offset, timestamp)`` of each record of one whole batch whose timestamp
    lies outside ``[lower_ms, upper_ms]``; records without one (NO_TIMESTAMP, -1) are
    never outside. Kafka's LogValidator check for ``message.timestamp.type=CreateTime``
    (``message.timestamp.before.max.ms`` / ``after.max.ms`` give the bounds).

    A record's timestamp is what Kafka's ``Record.timestamp()`` gives: the batch's
    maxTimestamp in a LogAppendTime batch, else baseTimestamp + the record's
    timestampDelta; its offset is the batch's baseOffset (as sent) + its offsetDelta.
    Only each record's length, timestampDelta and offsetDelta are read (keys, values and
    headers are jumped over); a compressed payload is inflated with the hard bound
    ``max_decompressed_bytes``. Records that do not add up raise InvalidRecordError
    (CorruptRecordError and RecordsTooLargeError for a payload that does not inflate or
    inflates too far), as Kafka's record iterator would at the same place. ``header``:
    the batch's, when the caller has parsed it already (``validate_batches``).
    """
    if header is None:
        header = parse_batch_header(batch)
    view = memoryview(batch)
    if header.size > len(view) or header.size < BATCH_HEADER_SIZE:
        raise CorruptRecordError(
            f"record batch at offset {header.base_offset} has length {header.batch_length}, "
            f"{len(view)} bytes available"
        )
    data, pos, end = _batch_payload(view, header, 0, max_decompressed_bytes)
    count = header.records_count
    if header.attributes & ATTR_TIMESTAMP_TYPE:  # every record's timestamp is the max
        lower_delta, upper_delta = 1, 0  # an empty range: every record is looked at
        fixed: int | None = header.max_timestamp
    else:
        # timestamp = baseTimestamp + delta: compare deltas, no addition per record
        lower_delta = lower_ms - header.base_timestamp
        upper_delta = upper_ms - header.base_timestamp
        fixed = None
    outside: list[tuple[int, int, int]] = []
    index = 0
    try:
        # Written for speed, as _check_records: 1- and 2-byte varints read inline.
        for index in range(count):
            if pos >= end:
                raise InvalidRecordError(
                    f"record batch at offset {header.base_offset}: Incorrect declared batch "
                    f"size, premature EOF reached ({count} records declared, {index} found)"
                )
            b = data[pos]
            if b < 0x80:
                raw = b
                pos += 1
            elif (b2 := data[pos + 1]) < 0x80:
                raw = (b & 0x7F) | (b2 << 7)
                pos += 2
            else:
                raw, pos = read_bounded_varint(data, pos, 5, _invalid_structure)
            record_end = pos + ((raw >> 1) ^ -(raw & 1))
            if record_end > end or raw & 1 or record_end <= pos + 1:
                raise InvalidRecordError(
                    f"record batch at offset {header.base_offset}: record {index} has length "
                    f"{(raw >> 1) ^ -(raw & 1)} but {end - pos} bytes are left"
                )
            # timestampDelta, after the attributes byte
            b = data[pos + 1]
            if b < 0x80:
                raw = b
            elif (b2 := data[pos + 2]) < 0x80:
                raw = (b & 0x7F) | (b2 << 7)
            else:
                raw = read_bounded_varint(data, pos + 1, 10, _invalid_structure)[0]
            delta = (raw >> 1) ^ -(raw & 1)
            if not lower_delta <= delta <= upper_delta:
                timestamp = fixed if fixed is not None else header.base_timestamp + delta
                if timestamp != NO_TIMESTAMP and not lower_ms <= timestamp <= upper_ms:
                    offset = _record_offset(data, pos, record_end, index, header)
                    outside.append((index, offset, timestamp))
            pos = record_end
    except IndexError:
        raise InvalidRecordError(
            f"record batch at offset {header.base_offset}: record {index}: Found invalid "
            "record structure (truncated)"
        ) from None
    return outside


def _record_offset(
    data: Buffer, pos: int, record_end: int, index: int, header: RecordBatchHeader
) -> int:
    """The offset of the record whose attributes byte is at ``pos`` (baseOffset + its
    offsetDelta): the slow path of ``records_outside_timestamps``."""
    after = read_bounded_varint(data, pos + 1, 10, _invalid_structure)[1]  # past timestampDelta
    raw, after = read_bounded_varint(data, after, 5, _invalid_structure)
    if after > record_end:
        raise InvalidRecordError(
            f"record batch at offset {header.base_offset}: record {index}: Invalid record "
            "size: its timestamp and offset deltas run past its length"
        )
    return header.base_offset + ((raw >> 1) ^ -(raw & 1))
