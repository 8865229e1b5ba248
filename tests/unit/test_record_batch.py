"""Record batch v2: header fields, CRC, offset assignment, records, interop."""

from __future__ import annotations

import struct
from typing import Any

import crc32c
import pytest
from aiokafka.record.default_records import DefaultRecordBatch as AioBatch
from aiokafka.record.default_records import DefaultRecordBatchBuilder as AioBuilder
from aiokafka.record.default_records import _DefaultRecordBatchBuilderPy as AioBuilderPy
from kafka.record.default_records import DefaultRecordBatch as KpBatch
from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder

from protocol.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD
from protocol.record_batch import (
    BATCH_HEADER_SIZE,
    CorruptRecordError,
    InvalidRecordError,
    Record,
    compute_crc,
    iter_batches,
    iter_records,
    parse_batch_header,
    stamp_leader_batches,
    validate_batches,
)
from protocol.record_builder import build_record_batch

CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]
RECORDS: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]] = [
    (b"key-0", b"value-0", [("trace", b"abc"), ("empty", None)]),
    (None, b"value-1", []),
    (b"key-2", None, [("h", b"")]),
    (b"", b"x" * 3000, []),
]


def batch(n: int = 3, ts: int = 1_700_000_000_000, **kwargs: Any) -> bytes:
    return build_record_batch(
        [(b"k%d" % i, b"v%d" % i, []) for i in range(n)], timestamp_ms=ts, **kwargs
    )


def test_header_fields_of_a_built_batch() -> None:
    data = build_record_batch(
        RECORDS,
        base_offset=100,
        timestamp_ms=5000,
        compression=GZIP,
        producer_id=42,
        producer_epoch=3,
        base_sequence=7,
        is_transactional=True,
        partition_leader_epoch=9,
    )
    h = parse_batch_header(data)
    assert (h.base_offset, h.magic, h.partition_leader_epoch) == (100, 2, 9)
    assert h.size == len(data) and h.batch_length == len(data) - 12
    assert h.compression == GZIP and h.is_transactional and not h.is_control
    assert h.timestamp_type == 0
    assert (h.last_offset_delta, h.records_count, h.last_offset) == (3, 4, 103)
    assert (h.base_timestamp, h.max_timestamp) == (5000, 5000)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (42, 3, 7)
    assert h.crc == crc32c.crc32c(data[21:]) == compute_crc(data)


def test_header_is_61_bytes_and_records_start_after_it() -> None:
    data = batch(1)
    assert BATCH_HEADER_SIZE == 61
    # first record: length varint, then attributes byte 0
    assert data[62] == 0


def test_per_record_timestamps() -> None:
    data = build_record_batch(RECORDS[:3], timestamp_ms=0, record_timestamps=[30, 10, 20])
    h = parse_batch_header(data)
    assert (h.base_timestamp, h.max_timestamp) == (10, 30)
    assert [r.timestamp for r in iter_records(data)] == [30, 10, 20]


@pytest.mark.parametrize("codec", CODECS)
def test_iter_records_round_trip(codec: int) -> None:
    data = build_record_batch(RECORDS, base_offset=10, timestamp_ms=777, compression=codec)
    assert list(iter_records(data)) == [
        Record(offset=10 + i, timestamp=777, key=k, value=v, headers=list(hs))
        for i, (k, v, hs) in enumerate(RECORDS)
    ]


def test_crc_catches_a_flipped_byte() -> None:
    data = bytearray(batch(3))
    validate_batches(data)
    data[-1] ^= 0x01
    with pytest.raises(CorruptRecordError, match="CRC"):
        validate_batches(data)
    # without verification the bad batch still parses (readers choose)
    assert len(list(iter_batches(data))) == 1


def test_base_offset_and_leader_epoch_are_outside_the_crc() -> None:
    data = batch(3)
    out = stamp_leader_batches(data, validate_batches(data), 5000, 12)
    validate_batches(out)
    h = parse_batch_header(out)
    assert (h.base_offset, h.partition_leader_epoch) == (5000, 12)


def test_stamped_offsets_run_on_across_batches() -> None:
    buf = batch(3) + batch(1) + batch(5, compression=LZ4)
    stamped = validate_batches(buf)
    out = stamp_leader_batches(buf, stamped, 100, 7)
    assert stamped[-1].next_offset == 109
    headers = [h for _, h in iter_batches(out, verify_crc=True)]
    assert headers == stamped  # the headers given are updated to the bytes returned
    assert {h.partition_leader_epoch for h in headers} == {7}
    assert [(h.base_offset, h.last_offset) for h in headers] == [
        (100, 102),
        (103, 103),
        (104, 108),
    ]
    assert [r.offset for _, h in iter_batches(out) for r in iter_records(out)][:3] == [
        100,
        101,
        102,
    ]
    assert len(out) == len(buf)


def test_log_append_time_keeps_crc_valid() -> None:
    buf = batch(2, ts=1000) + batch(2, ts=2000, compression=ZSTD)
    stamped = validate_batches(buf)
    out = stamp_leader_batches(buf, stamped, 0, 0, log_append_time_ms=99_999)
    headers = validate_batches(out)  # CRCs recomputed
    assert headers == stamped
    assert all(h.timestamp_type == 1 and h.max_timestamp == 99_999 for h in headers)
    assert headers[0].base_timestamp == 1000  # the producer's stays in the header
    first = out[: headers[0].size]
    assert {r.timestamp for r in iter_records(first)} == {99_999}


def test_partial_tail_is_allowed_only_for_readers() -> None:
    a, b = batch(2), batch(3)
    buf = a + b[:40]
    assert [p for p, _ in iter_batches(buf, allow_partial_tail=True)] == [0]
    assert [p for p, _ in iter_batches(a + b[:5], allow_partial_tail=True)] == [0]
    with pytest.raises(CorruptRecordError, match="past the end"):
        list(iter_batches(buf))
    with pytest.raises(CorruptRecordError, match="trailing"):
        list(iter_batches(a + b[:5]))


def test_batch_shorter_than_header() -> None:
    bad = bytearray(batch(1))
    struct.pack_into(">i", bad, 8, 20)
    with pytest.raises(CorruptRecordError, match="shorter"):
        list(iter_batches(bad))


def test_magic_1_message_set_is_rejected() -> None:
    # offset int64, size int32, crc int32, magic int8=1, attributes, timestamp, key, value
    message = struct.pack(">IbbqiI", 0, 1, 0, 1000, -1, 3) + b"abc"
    legacy = struct.pack(">qi", 0, len(message)) + message
    with pytest.raises(CorruptRecordError, match="unsupported magic 1"):
        validate_batches(legacy)
    with pytest.raises(CorruptRecordError, match="unsupported magic"):
        parse_batch_header(legacy)


def test_validate_rejects_empty_and_inconsistent_batches() -> None:
    with pytest.raises(CorruptRecordError):
        validate_batches(b"")
    bad = bytearray(batch(3))
    struct.pack_into(">i", bad, 23, 5)  # lastOffsetDelta 5 with 3 records
    struct.pack_into(">I", bad, 17, compute_crc(bad))
    with pytest.raises(InvalidRecordError, match="inconsistent"):
        validate_batches(bad)
    bad = bytearray(batch(3))
    struct.pack_into(">i", bad, 57, 0)  # zero records
    struct.pack_into(">I", bad, 17, compute_crc(bad))
    with pytest.raises(InvalidRecordError, match="record count"):
        validate_batches(bad)


def test_truncated_records_section_is_corrupt() -> None:
    data = bytearray(batch(3))
    struct.pack_into(">i", data, 57, 4)  # claims a 4th record that is not there
    with pytest.raises(CorruptRecordError):
        list(iter_records(data))


def test_corrupt_compressed_payload_is_corrupt_record() -> None:
    data = bytearray(batch(3, compression=GZIP))
    data[70:80] = b"\x00" * 10
    with pytest.raises(CorruptRecordError):
        list(iter_records(data))


# --- interop: batches built by the clients' own record builders --------------------


def _aiokafka_batch(builder_cls: type, codec: int) -> bytes:
    builder = builder_cls(
        magic=2,
        compression_type=codec,
        is_transactional=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for i, (key, value, headers) in enumerate(RECORDS):
        builder.append(i, timestamp=1000 + i, key=key, value=value, headers=headers)
    return bytes(builder.build())


@pytest.mark.parametrize("builder_cls", [AioBuilder, AioBuilderPy], ids=["c", "py"])
@pytest.mark.parametrize("codec", CODECS)
def test_iter_records_on_aiokafka_batches(builder_cls: type, codec: int) -> None:
    data = _aiokafka_batch(builder_cls, codec)
    (header,) = validate_batches(data)
    assert header.compression == codec and header.records_count == len(RECORDS)
    out = stamp_leader_batches(data, validate_batches(data), 50, 0)
    records = list(iter_records(out))
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records] == [
        (50 + i, 1000 + i, k, v, list(hs)) for i, (k, v, hs) in enumerate(RECORDS)
    ]


@pytest.mark.parametrize("codec", [NONE, GZIP])  # kafka-python lacks snappy/lz4/zstd libs here
def test_iter_records_on_kafka_python_batches(codec: int) -> None:
    builder = KpBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for i, (key, value, headers) in enumerate(RECORDS):
        builder.append(i, timestamp=2000 + i, key=key, value=value, headers=headers)
    data = bytes(builder.build())
    validate_batches(data)
    assert [(r.offset, r.timestamp, r.value) for r in iter_records(data)] == [
        (i, 2000 + i, v) for i, (_, v, _) in enumerate(RECORDS)
    ]


@pytest.mark.parametrize("codec", CODECS)
def test_clients_read_our_batches(codec: int) -> None:
    built = build_record_batch(RECORDS, timestamp_ms=3000, compression=codec)
    data = stamp_leader_batches(built, validate_batches(built), 20, 0, log_append_time_ms=4000)
    aio = AioBatch(bytes(data))
    assert aio.validate_crc()
    got = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in aio]
    assert got == [(20 + i, 4000, k, v, list(hs)) for i, (k, v, hs) in enumerate(RECORDS)]
    if codec in (NONE, GZIP):
        kp = KpBatch(bytes(data))
        assert kp.validate_crc()
        assert [r.value for r in kp] == [v for _, v, _ in RECORDS]
