"""Encoding record batches, as a producer would: for our own writers.

The broker's coordinators write their records (``__consumer_offsets``,
``__transaction_state``) with it, and so do the tests, the benchmarks and the workload
generator. Reading, validating and rewriting batches is ``record_batch.py``'s.
"""

from __future__ import annotations

from collections.abc import Sequence

import crc32c

from protocol.compression import compress
from protocol.record_batch import (
    _ATTRIBUTES_POS,
    _CRC_POS,
    _HEADER,
    _UINT32,
    ATTR_COMPRESSION_MASK,
    ATTR_CONTROL,
    ATTR_TRANSACTIONAL,
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
)
from protocol.varint import write_varint

__all__ = ["build_record_batch"]


def build_record_batch(
    records: Sequence[tuple[bytes | None, bytes | None, Sequence[tuple[str, bytes | None]]]],
    *,
    base_offset: int = 0,
    timestamp_ms: int,
    compression: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = -1,
    record_timestamps: Sequence[int] | None = None,
) -> bytes:
    """Encode one v2 batch of (key, value, headers) records, as a producer would.

    Every record gets `timestamp_ms` unless `record_timestamps` gives one per record.
    For our own writers (internal topics, tests, benchmarks).
    """
    if not records:
        raise ValueError("a record batch holds at least one record")
    if record_timestamps is not None and len(record_timestamps) != len(records):
        raise ValueError("record_timestamps must give one timestamp per record")
    timestamps = list(record_timestamps) if record_timestamps is not None else None
    base_timestamp = min(timestamps) if timestamps else timestamp_ms
    max_timestamp = max(timestamps) if timestamps else timestamp_ms

    body = bytearray()
    record = bytearray()
    for delta, (key, value, headers) in enumerate(records):
        record.clear()
        record.append(0)  # attributes
        ts = timestamps[delta] if timestamps else timestamp_ms
        write_varint(record, ts - base_timestamp)
        write_varint(record, delta)
        _write_bytes(record, key)
        _write_bytes(record, value)
        write_varint(record, len(headers))
        for hkey, hval in headers:
            _write_bytes(record, hkey.encode("utf-8"))
            _write_bytes(record, hval)
        write_varint(body, len(record))
        body += record

    payload = compress(compression, body) if compression else bytes(body)
    attributes = compression & ATTR_COMPRESSION_MASK
    if is_transactional:
        attributes |= ATTR_TRANSACTIONAL
    if is_control:
        attributes |= ATTR_CONTROL
    out = bytearray(BATCH_HEADER_SIZE)
    _HEADER.pack_into(
        out,
        0,
        base_offset,
        BATCH_HEADER_SIZE - LOG_OVERHEAD + len(payload),
        partition_leader_epoch,
        MAGIC_V2,
        0,  # CRC, filled in below
        attributes,
        len(records) - 1,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    )
    out += payload
    _UINT32.pack_into(out, _CRC_POS, crc32c.crc32c(memoryview(out)[_ATTRIBUTES_POS:]))
    return bytes(out)


def _write_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        write_varint(out, -1)
    else:
        write_varint(out, len(data))
        out += data
