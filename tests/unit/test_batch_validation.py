"""Record-level validation of produced batches, and bounded decompression.

``validate_records`` walks the records of every batch as Kafka's LogValidator does at
produce time; ``iter_records`` decodes them (ListOffsets by timestamp, internal topics).
Both decompress with a hard bound: a small payload that inflates to gigabytes is
refused after producing at most the bound, never after allocating what it claims.
"""

from __future__ import annotations

import contextlib
import os
import struct
import subprocess
import sys
import textwrap

import cramjam
import crc32c
import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder as AioBuilder
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder

from protocol.compression import (
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    ZSTD,
    CompressionError,
    DecompressedSizeExceeded,
    compress,
    decompress,
    decompress_bounded,
)
from protocol.errors import ErrorCode
from protocol.record_batch import (
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    CorruptRecordError,
    InvalidRecordError,
    RecordsTooLargeError,
    iter_records,
    validate_records,
)
from protocol.record_builder import build_record_batch

CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]
COMPRESSED = [GZIP, SNAPPY, LZ4, ZSTD]
Rec = tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]
RECORDS: list[Rec] = [
    (b"key-0", b"value-0", [("trace", b"abc"), ("empty", None)]),
    (None, b"value-1", []),
    (b"key-2", None, [("h", b"")]),
    (b"", b"x" * 3000, []),  # a 2-byte length varint
    (b"k" * 70_000, b"v" * 20_000, [("big", b"h" * 9000)]),  # 3-byte varints
]

_HEADER = struct.Struct(">qiibIhiqqqhii")


def _varint(value: int) -> bytes:
    value = (value << 1) ^ (value >> 63)
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _record(
    offset_delta: int,
    key: bytes | None = b"k",
    value: bytes | None = b"v",
    headers: list[tuple[bytes | None, bytes | None]] | None = None,
    *,
    ts_delta: int = 0,
    length_adjust: int = 0,
    raw_header_count: bytes | None = None,
) -> bytes:
    """One record, with knobs to break it."""
    body = bytearray(b"\x00")
    body += _varint(ts_delta) + _varint(offset_delta)
    for field in (key, value):
        body += _varint(-1) if field is None else _varint(len(field)) + field
    headers = headers or []
    body += raw_header_count if raw_header_count is not None else _varint(len(headers))
    for hkey, hval in headers:
        body += _varint(-1) if hkey is None else _varint(len(hkey)) + hkey
        body += _varint(-1) if hval is None else _varint(len(hval)) + hval
    return _varint(len(body) + length_adjust) + bytes(body)


def _batch(
    section: bytes,
    count: int,
    codec: int = NONE,
    *,
    last_offset_delta: int | None = None,
    compressed: bytes | None = None,
    base_offset: int = 0,
) -> bytes:
    """A batch around a hand-made records section (compressed with ``codec`` unless
    ``compressed`` gives the payload itself), with a correct CRC."""
    payload = compressed if compressed is not None else compress(codec, section)
    out = bytearray(61)
    _HEADER.pack_into(
        out,
        0,
        base_offset,
        49 + len(payload),
        -1,
        2,
        0,
        codec,
        count - 1 if last_offset_delta is None else last_offset_delta,
        1000,
        1000,
        -1,
        -1,
        -1,
        count,
    )
    out += payload
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


def _section(n: int) -> bytes:
    return b"".join(_record(i, b"key-%d" % i, b"value-%d" % i) for i in range(n))


# --------------------------------------------------------------------------- valid input


@pytest.mark.parametrize("codec", CODECS)
def test_our_batches_validate(codec: int) -> None:
    data = build_record_batch(RECORDS, base_offset=5, timestamp_ms=1, compression=codec)
    validate_records(data)
    validate_records(memoryview(data))
    validate_records(bytearray(data))


@pytest.mark.parametrize("codec", CODECS)
def test_many_records_need_multi_byte_offset_deltas(codec: int) -> None:
    records: list[Rec] = [(None, b"v%d" % i, []) for i in range(20_000)]  # 3-byte deltas
    data = build_record_batch(records, timestamp_ms=1, compression=codec)
    validate_records(data)


def test_varied_timestamps_and_concatenated_batches() -> None:
    first = build_record_batch(
        RECORDS[:3], timestamp_ms=0, record_timestamps=[10**12, 5, 2**40], compression=ZSTD
    )
    second = build_record_batch(RECORDS[:2], timestamp_ms=7)
    validate_records(first + second)


@pytest.mark.parametrize("codec", CODECS)
def test_aiokafka_batches_validate(codec: int) -> None:
    builder = AioBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 22,
    )
    for i, (key, value, headers) in enumerate(RECORDS):
        builder.append(i, timestamp=1000 + i * 7919, key=key, value=value, headers=headers)
    validate_records(bytes(builder.build()))


@pytest.mark.parametrize("codec", [NONE, GZIP])  # kafka-python lacks the other libs here
def test_kafka_python_batches_validate(codec: int) -> None:
    builder = KpBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 22,
    )
    for i, (key, value, headers) in enumerate(RECORDS):
        builder.append(i, timestamp=2000 + i, key=key, value=value, headers=headers)
    validate_records(bytes(builder.build()))


def test_any_negative_key_or_value_length_is_null_as_in_kafka() -> None:
    # Kafka's reader takes any negative length as null, not only -1.
    record = bytearray(_record(0, None, None))
    record[4] = 0x03  # key length -2
    validate_records(_batch(bytes(record), 1))
    assert [r.key for r in iter_records(_batch(bytes(record), 1))] == [None]


def test_header_keys_that_are_not_utf8_are_accepted_as_java_does() -> None:
    data = _batch(_record(0, headers=[(b"\xff\xfe", b"x")]), 1)
    validate_records(data)
    ((key, value),) = next(iter_records(data)).headers
    assert (key, value) == ("\ufffd\ufffd", b"x")


# --------------------------------------------------------------------------- bad records


def _refused(data: bytes, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        validate_records(data)
    with pytest.raises(CorruptRecordError):
        list(iter_records(data))


@pytest.mark.parametrize("codec", CODECS)
def test_count_larger_than_the_records_found(codec: int) -> None:
    with pytest.raises(InvalidRecordError, match="premature EOF"):
        validate_records(_batch(_section(3), 4, codec))


@pytest.mark.parametrize("codec", CODECS)
def test_count_smaller_than_the_records_found(codec: int) -> None:
    with pytest.raises(InvalidRecordError, match="records still remaining"):
        validate_records(_batch(_section(3), 2, codec))


def test_count_disagreeing_with_last_offset_delta() -> None:
    with pytest.raises(InvalidRecordError, match="inconsistent"):
        validate_records(_batch(_section(3), 3, last_offset_delta=5))


def test_non_positive_count() -> None:
    with pytest.raises(InvalidRecordError, match="record count 0"):
        validate_records(_batch(b"", 0))


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("deltas", [[0, 2, 3], [1, 2, 3], [0, 1, 1], [0, -1, 2]])
def test_offset_deltas_must_run_from_zero(codec: int, deltas: list[int]) -> None:
    section = b"".join(_record(d) for d in deltas)
    with pytest.raises(InvalidRecordError, match="offset delta"):
        validate_records(_batch(section, 3, codec))


@pytest.mark.parametrize("adjust", [-1, 1, 1000, -1000])
def test_record_length_that_does_not_match_its_fields(adjust: int) -> None:
    section = _record(0) + _record(1, length_adjust=adjust) + _record(2)
    _refused(_batch(section, 3), InvalidRecordError, "record 1|Incorrect declared")


def test_value_running_past_its_record() -> None:
    record = bytearray(_record(0, b"k", b"value"))
    assert record[6] == 0x0A  # value length 5
    record[6] = 0x7E  # value length 63, the record is far shorter
    _refused(_batch(bytes(record), 1), InvalidRecordError, "record 0")


def test_varint_longer_than_five_bytes() -> None:
    section = b"\x80\x80\x80\x80\x80\x01" + bytes(20)
    _refused(_batch(section, 1), InvalidRecordError, "varint out of range")


def test_varint_beyond_32_bits() -> None:
    section = b"\xfe\xff\xff\xff\x7f" + bytes(20)  # 5 bytes, but 35 bits
    _refused(_batch(section, 1), InvalidRecordError, "varint out of range")


def test_varlong_timestamp_delta_longer_than_ten_bytes() -> None:
    body = b"\x00" + b"\x80" * 10 + b"\x01" + b"\x00\x02k\x02v\x00"
    _refused(_batch(_varint(len(body)) + body, 1), InvalidRecordError, "varlong out of range")


def test_negative_header_count() -> None:
    section = _record(0, raw_header_count=_varint(-3))
    _refused(_batch(section, 1), InvalidRecordError, "number of record headers -3")


def test_header_count_larger_than_the_record() -> None:
    section = _record(0, raw_header_count=_varint(1000))
    _refused(_batch(section, 1), InvalidRecordError, "number of record headers 1000")


def test_null_header_key() -> None:
    section = _record(0, headers=[(None, b"x")])
    _refused(_batch(section, 1), InvalidRecordError, "negative header key size")


def test_truncated_last_record() -> None:
    section = _section(2)[:-3]
    _refused(_batch(section, 2), InvalidRecordError, "record 1")


@pytest.mark.parametrize("codec", COMPRESSED)
def test_undecodable_payload_is_corrupt_message(codec: int) -> None:
    good = compress(codec, _section(3))
    bad = bytearray(good)
    for i in range(len(bad) // 3, len(bad)):
        bad[i] ^= 0x5A
    with pytest.raises(CorruptRecordError) as info:
        validate_records(_batch(b"", 3, codec, compressed=bytes(bad)))
    # A payload that does not decompress at all is CORRUPT_MESSAGE; one that happens to
    # decompress into garbage records is INVALID_RECORD. Either way, a protocol error.
    assert info.value.error_code in (ErrorCode.corrupt_message, ErrorCode.invalid_record)
    with pytest.raises(CorruptRecordError):
        list(iter_records(_batch(b"", 3, codec, compressed=bytes(bad))))


@pytest.mark.parametrize("codec", COMPRESSED)
def test_garbage_payload_is_corrupt_message(codec: int) -> None:
    data = _batch(b"", 1, codec, compressed=b"\x82SNAPPY\x00" + b"\xff" * 40)
    with pytest.raises(CorruptRecordError) as info:
        validate_records(data)
    assert type(info.value) is CorruptRecordError
    assert info.value.error_code == ErrorCode.corrupt_message


def test_unknown_codec_is_invalid_record() -> None:
    data = _batch(b"", 1, 5, compressed=b"whatever")
    with pytest.raises(InvalidRecordError, match="codec") as info:
        validate_records(data)
    assert info.value.error_code == ErrorCode.invalid_record


def test_not_batches_at_all() -> None:
    with pytest.raises(CorruptRecordError, match="no record batches"):
        validate_records(b"")
    with pytest.raises(CorruptRecordError, match="trailing"):
        validate_records(build_record_batch(RECORDS[:1], timestamp_ms=1) + b"abc")


def test_error_codes_of_the_error_classes() -> None:
    assert CorruptRecordError.error_code == ErrorCode.corrupt_message
    assert InvalidRecordError.error_code == ErrorCode.invalid_record
    assert RecordsTooLargeError.error_code == ErrorCode.message_too_large
    assert issubclass(RecordsTooLargeError, CorruptRecordError)


# --------------------------------------------------------------------------- the bound


@pytest.mark.parametrize("codec", COMPRESSED)
@pytest.mark.parametrize("size", [1000, 300 * 1024])  # bytearray and mmap outputs
def test_bound_is_inclusive(codec: int, size: int) -> None:
    data = (b"0123456789abcdef" * (size // 16 + 1))[:size]
    packed = compress(codec, data)
    assert bytes(decompress_bounded(codec, packed, size)) == data
    with pytest.raises(DecompressedSizeExceeded):
        decompress_bounded(codec, packed, size - 1)
    with pytest.raises(CompressionError):  # decompress() shares the bound
        decompress(codec, packed, size - 1)


@pytest.mark.parametrize("codec", COMPRESSED)
def test_payload_larger_than_the_first_guess(codec: int) -> None:
    """A very compressible payload overflows the small first buffer and is read again
    into the full bound. This pins the text of cramjam's "output buffer full" error:
    were it to change, this would read as a corrupt payload and fail here."""
    data = bytes(1024 * 1024)
    # Snappy's streamed form is the framing format; raw and xerial blocks are sized
    # exactly from their headers, no guess.
    packed = bytes(cramjam.snappy.compress(data)) if codec == SNAPPY else compress(codec, data)
    assert len(packed) * 4 < 256 * 1024  # the first guess is smaller than the data
    assert bytes(decompress_bounded(codec, packed, 4 * 1024 * 1024)) == data


@pytest.mark.parametrize("codec", COMPRESSED)
def test_batch_over_the_bound_is_message_too_large(codec: int) -> None:
    records: list[Rec] = [(None, bytes(1000), []) for _ in range(100)]  # ~100 KB
    data = build_record_batch(records, timestamp_ms=1, compression=codec)
    validate_records(data, max_decompressed_bytes=200_000)
    with pytest.raises(RecordsTooLargeError) as info:
        validate_records(data, max_decompressed_bytes=50_000)
    assert info.value.error_code == ErrorCode.message_too_large
    with pytest.raises(RecordsTooLargeError):
        list(iter_records(data, max_decompressed_bytes=50_000))
    assert len(list(iter_records(data, max_decompressed_bytes=200_000))) == 100


def test_raw_snappy_claiming_a_huge_size_is_refused_before_allocating() -> None:
    # Raw snappy starts with its uncompressed length: here 2**32 - 1.
    payload = b"\xff\xff\xff\xff\x0f" + b"\x00" * 16
    with pytest.raises(DecompressedSizeExceeded):
        decompress_bounded(SNAPPY, payload, DEFAULT_MAX_DECOMPRESSED_BYTES)
    xerial = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + struct.pack(">i", 21) + payload
    with pytest.raises(DecompressedSizeExceeded):
        decompress_bounded(SNAPPY, xerial, DEFAULT_MAX_DECOMPRESSED_BYTES)


def test_default_bound() -> None:
    assert DEFAULT_MAX_DECOMPRESSED_BYTES == 64 * 1024 * 1024


def _zstd_rle_bomb(total: int) -> bytes:
    """A zstd frame of RLE blocks: 4 bytes per 128 KiB of zeros (1 GiB in 32 KiB),
    written by hand so the test need not compress a gigabyte."""
    block = 128 * 1024
    out = bytearray(b"\x28\xb5\x2f\xfd")  # magic
    out += b"\x00"  # frame header descriptor: no content size, no checksum, no dict
    out += b"\x38"  # window descriptor: 2**17 = 128 KiB
    blocks = total // block
    for i in range(blocks):
        last = 1 if i == blocks - 1 else 0
        out += ((block << 3) | (1 << 1) | last).to_bytes(3, "little")  # RLE block
        out += b"\x00"
    return bytes(out)


def test_hand_made_zstd_bomb_is_valid_zstd() -> None:
    assert bytes(cramjam.zstd.decompress(_zstd_rle_bomb(4 * 128 * 1024))) == bytes(512 * 1024)
    assert len(_zstd_rle_bomb(1 << 30)) <= 33 * 1024


_BOMBS = textwrap.dedent(
    """
    import resource, sys
    import cramjam
    from protocol.compression import GZIP, LZ4, SNAPPY, ZSTD, compress
    from protocol.record_batch import RecordsTooLargeError, iter_records, validate_records
    from tests.unit.test_batch_validation import _batch, _zstd_rle_bomb

    BOUND = 8 << 20
    chunk = bytes(16 << 20)

    def streamed(compressor, total):
        for _ in range(total // len(chunk)):
            compressor.compress(chunk)
        return bytes(compressor.finish())

    bombs = {  # each inflates to 128 MiB (the zstd one to 1 GiB)
        "zstd": (ZSTD, _zstd_rle_bomb(1 << 30)),
        "gzip": (GZIP, streamed(cramjam.gzip.Compressor(level=1), 128 << 20)),
        "lz4": (LZ4, streamed(cramjam.lz4.Compressor(level=1), 128 << 20)),
        "snappy-framed": (SNAPPY, streamed(cramjam.snappy.Compressor(), 128 << 20)),
        "snappy-xerial": (SNAPPY, compress(SNAPPY, bytes(128 << 20))),
        "snappy-raw": (SNAPPY, bytes(cramjam.snappy.compress_raw(bytes(128 << 20)))),
    }
    batches = {name: _batch(b"", 1, codec, compressed=payload)
               for name, (codec, payload) in bombs.items()}
    del chunk, bombs

    def rss_kib():
        for line in open("/proc/self/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])

    def vm_kib():
        for line in open("/proc/self/status"):
            if line.startswith("VmSize:"):
                return int(line.split()[1])

    # From here on, holding 128 MiB more than now is impossible.
    limit = (vm_kib() << 10) + (96 << 20)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for name, data in batches.items():
        for check in (validate_records, lambda d, max_decompressed_bytes: list(
                iter_records(d, max_decompressed_bytes=max_decompressed_bytes))):
            try:
                check(data, max_decompressed_bytes=BOUND)
            except RecordsTooLargeError:
                pass
            else:
                print(name, "accepted")
                continue
        grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base
        print(name, "refused", "ok" if grew < (BOUND >> 10) + 24 * 1024 else f"grew {grew} KiB")
    """
)


def test_decompression_bombs_are_refused_within_the_bound() -> None:
    """Every codec's bomb is refused having held at most the bound: the peak RSS
    grows by less than bound + slack, and an address-space limit makes holding the
    inflated size impossible (the child would die, or raise MemoryError)."""
    result = subprocess.run(
        [sys.executable, "-c", _BOMBS],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "RUST_BACKTRACE": "0"},
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    names = ["zstd", "gzip", "lz4", "snappy-framed", "snappy-xerial", "snappy-raw"]
    assert lines == [f"{name} refused ok" for name in names], result.stdout


# --------------------------------------------------------------------------- fuzzing

_BASE_SECTION = b"".join(
    [
        _record(0, b"key", b"value", [(b"h1", b"x"), (b"h2", None)]),
        _record(1, None, b"v" * 200),
        _record(2, b"", None, ts_delta=123_456_789),
    ]
)


def _mutate(section: bytes, edits: list[tuple[int, int]], cut: int | None) -> bytes:
    out = bytearray(section)
    for position, value in edits:
        out[position % len(out)] = value
    if cut is not None:
        out = out[: cut % (len(out) + 1)]
    return bytes(out)


def _consistent(data: bytes, count: int) -> None:
    """validate_records and iter_records agree: both accept, or both raise a
    CorruptRecordError -- and nothing else escapes either."""
    try:
        validate_records(data)
    except CorruptRecordError:
        with contextlib.suppress(CorruptRecordError):
            list(iter_records(data))
        return
    records = list(iter_records(data))
    assert [r.offset for r in records] == list(range(count))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    edits=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=4),
    cut=st.none() | st.integers(0, 10_000),
    count=st.integers(1, 5),
    codec=st.sampled_from(CODECS),
)
def test_mutated_records_never_escape_protocol_errors(
    edits: list[tuple[int, int]], cut: int | None, count: int, codec: int
) -> None:
    section = _mutate(_BASE_SECTION, edits, cut)
    _consistent(_batch(section, count, codec), count)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    edits=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=4),
    codec=st.sampled_from(COMPRESSED),
)
def test_mutated_compressed_payloads_never_escape_protocol_errors(
    edits: list[tuple[int, int]], codec: int
) -> None:
    payload = _mutate(compress(codec, _BASE_SECTION), edits, None)
    _consistent(_batch(b"", 3, codec, compressed=payload), 3)


@settings(max_examples=300, deadline=None)
@given(section=st.binary(max_size=300), count=st.integers(1, 40))
def test_random_sections_never_escape_protocol_errors(section: bytes, count: int) -> None:
    _consistent(_batch(section, count), count)
