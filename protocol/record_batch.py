"""Record batch v2 (magic 2): header parsing, CRC-32C, offset assignment, records.

The broker treats a batch as opaque bytes: it reads the 61-byte header, checks magic
and CRC, and rewrites the fields Kafka's broker rewrites (baseOffset,
partitionLeaderEpoch, and for LogAppendTime the timestamp type and maxTimestamp).
Records are decoded (and decompressed) only where a feature needs them: timestamp
lookups, our own internal topics, tests. The produce path walks the batches once
(``validate_batches``: magic, CRC-32C, counts) and stamps the validated headers in one
more pass (``stamp_leader_batches``: baseOffset and the leader epoch, which the CRC does
not cover; LogAppendTime also recomputes the CRC).

Layout (big-endian), byte positions in brackets::

    [0]  baseOffset int64            [8]  batchLength int32 (bytes after this field)
    [12] partitionLeaderEpoch int32  [16] magic int8
    [17] crc uint32 (CRC-32C of bytes [21:end])
    [21] attributes int16            [23] lastOffsetDelta int32
    [27] baseTimestamp int64         [35] maxTimestamp int64
    [43] producerId int64            [51] producerEpoch int16
    [53] baseSequence int32          [57] recordsCount int32
    [61] records...

baseOffset, batchLength and partitionLeaderEpoch lie outside the CRC, which is why the
broker can assign offsets and stamp the leader epoch without recomputing it.

Old message sets (magic 0 and 1) keep their magic byte at the same position [16], so a
single byte tells them apart; we refuse them (no down-conversion).

Records inside a batch (after the header, possibly compressed)::

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
    keyLength varint | key | valueLength varint | value |
    headerCount varint | (headerKeyLength varint | headerKey | headerValueLength varint |
    headerValue) * headerCount

Varints are zig-zag encoded; a negative key or value length is null.
``validate_records`` walks them at produce time as Kafka's LogValidator does, and
``iter_records`` decodes them; both decompress with a hard bound (see compression.py).

Errors carry the Kafka error code a produce response answers them with
(``exc.error_code``): CorruptRecordError CORRUPT_MESSAGE, InvalidRecordError
INVALID_RECORD, RecordsTooLargeError MESSAGE_TOO_LARGE.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar, NoReturn

import crc32c

from protocol.compression import (
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    NONE,
    CompressionError,
    DecompressedSizeExceeded,
    UnsupportedCodecError,
    decompress_bounded,
)
from protocol.errors import ErrorCode
from protocol.varint import read_bounded_varint, read_varint

__all__ = [
    "ATTR_COMPRESSION_MASK",
    "ATTR_CONTROL",
    "ATTR_TIMESTAMP_TYPE",
    "ATTR_TRANSACTIONAL",
    "BATCH_HEADER_SIZE",
    "DEFAULT_MAX_DECOMPRESSED_BYTES",
    "LOG_OVERHEAD",
    "NO_TIMESTAMP",
    "TIMESTAMP_CREATE_TIME",
    "TIMESTAMP_LOG_APPEND_TIME",
    "CorruptRecordError",
    "InvalidRecordError",
    "Record",
    "RecordBatchHeader",
    "RecordHeaders",
    "RecordsTooLargeError",
    "compute_crc",
    "iter_batches",
    "iter_records",
    "parse_batch_header",
    "stamp_leader_batches",
    "validate_batches",
    "validate_records",
]

BATCH_HEADER_SIZE = 61
# baseOffset + batchLength: the bytes that precede what batchLength counts.
LOG_OVERHEAD = 12
MAGIC_V2 = 2

ATTR_COMPRESSION_MASK = 0x07
ATTR_TIMESTAMP_TYPE = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20

TIMESTAMP_CREATE_TIME = 0
TIMESTAMP_LOG_APPEND_TIME = 1
#: Kafka's RecordBatch.NO_TIMESTAMP: a record (or batch) without a timestamp.
NO_TIMESTAMP = -1

_MAGIC_POS = 16
_CRC_POS = 17
_ATTRIBUTES_POS = 21  # the CRC covers everything from here to the end of the batch
_MAX_TIMESTAMP_POS = 35

_HEADER = struct.Struct(">qiibIhiqqqhii")
_OFFSET_AND_LENGTH = struct.Struct(">qi")
_OFFSET_LENGTH_EPOCH = struct.Struct(">qii")  # baseOffset, batchLength, partitionLeaderEpoch
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")
_INT64 = struct.Struct(">q")
assert _HEADER.size == BATCH_HEADER_SIZE

RecordHeaders = list[tuple[str, bytes | None]]


class CorruptRecordError(ValueError):
    """Bytes that are not a valid sequence of v2 record batches.

    Kafka answers a produce request carrying these with CORRUPT_MESSAGE (or
    UNSUPPORTED_FOR_MESSAGE_FORMAT for old magics); a reader of a log treats them as
    the end of valid data. A compressed payload that does not decompress is one too.
    ``error_code`` is the code to answer with; subclasses override it.
    """

    error_code: ClassVar[ErrorCode] = ErrorCode.corrupt_message


class InvalidRecordError(CorruptRecordError):
    """A well-formed batch whose contents break a rule (Kafka's INVALID_RECORD).

    For example a batch whose lastOffsetDelta disagrees with its record count, or
    records whose framing does not add up (Kafka's InvalidRecordException: "Invalid
    record size", "Found invalid record structure", "Incorrect declared batch size").
    A subclass of CorruptRecordError so callers that only care "is this appendable"
    catch one type.
    """

    error_code: ClassVar[ErrorCode] = ErrorCode.invalid_record


class RecordsTooLargeError(CorruptRecordError):
    """A compressed batch that inflates beyond the decompression bound.

    Answered MESSAGE_TOO_LARGE rather than CORRUPT_MESSAGE: the bytes may be fine, we
    only refuse to hold that much, and Kafka's Java producer answers MESSAGE_TOO_LARGE
    on a batch of several records by splitting it and sending the halves, which is
    what a legitimate producer of very compressible data needs (CORRUPT_MESSAGE is
    retriable there: it would resend the same batch until its delivery timeout).
    Kafka itself has no such bound; see compression.py for the default.
    """

    error_code: ClassVar[ErrorCode] = ErrorCode.message_too_large


@dataclass(slots=True)
class RecordBatchHeader:
    """The 61 fixed bytes at the start of every v2 batch."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def compression(self) -> int:
        return self.attributes & ATTR_COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        """0 = CreateTime, 1 = LogAppendTime."""
        return 1 if self.attributes & ATTR_TIMESTAMP_TYPE else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies, header included."""
        return self.batch_length + LOG_OVERHEAD


@dataclass(slots=True)
class Record:
    """One decoded record; `timestamp` already resolves LogAppendTime batches."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: RecordHeaders


Buffer = bytes | bytearray | memoryview


def parse_batch_header(buf: Buffer, offset: int = 0) -> RecordBatchHeader:
    """Unpack the header at `offset`. Raises CorruptRecordError if it is not magic 2 or
    fewer than 61 bytes are there. Does not check the CRC or the length."""
    if len(buf) - offset < BATCH_HEADER_SIZE:
        if len(buf) - offset > _MAGIC_POS:
            _check_magic(buf[offset + _MAGIC_POS])
        raise CorruptRecordError(
            f"record batch header at position {offset} needs {BATCH_HEADER_SIZE} bytes, "
            f"{max(len(buf) - offset, 0)} available"
        )
    _check_magic(buf[offset + _MAGIC_POS])
    return RecordBatchHeader(*_HEADER.unpack_from(buf, offset))


def _check_magic(magic: int) -> None:
    if magic != MAGIC_V2:
        if magic in (0, 1):
            raise CorruptRecordError(
                f"unsupported magic {magic}: old message-set format, only record batch v2 "
                "is accepted"
            )
        raise CorruptRecordError(f"unsupported magic {magic} (corrupt batch?)")


def compute_crc(batch: Buffer) -> int:
    """CRC-32C of one batch from its attributes field to its end."""
    return int(crc32c.crc32c(memoryview(batch)[_ATTRIBUTES_POS:]))


def iter_batches(
    buf: Buffer, *, verify_crc: bool = False, allow_partial_tail: bool = False
) -> Iterator[tuple[int, RecordBatchHeader]]:
    """Yield (start position, header) for each batch in a concatenation of batches.

    `allow_partial_tail` is for readers of fetch responses and log files, which may end
    with a truncated batch: iteration then simply stops there. Without it, any trailing
    bytes that are not a whole batch raise CorruptRecordError, as a produce request's
    records must be whole.
    """
    view = memoryview(buf)
    end = len(view)
    pos = 0
    while pos < end:
        size = _batch_size(view, pos, end)
        if size < 0:
            if allow_partial_tail:
                return
            _raise_incomplete(view, pos, end)
        header = RecordBatchHeader(*_HEADER.unpack_from(view, pos))
        if verify_crc:
            _verify_crc(view, pos, size, header)
        yield pos, header
        pos += size


def _batch_size(view: memoryview, pos: int, end: int) -> int:
    """The size of the whole batch at ``pos``; -1 when the buffer ends inside it.

    Raises CorruptRecordError for a wrong magic or a length shorter than a header.
    """
    remaining = end - pos
    if remaining < LOG_OVERHEAD:
        return -1
    _, batch_length = _OFFSET_AND_LENGTH.unpack_from(view, pos)
    size: int = batch_length + LOG_OVERHEAD
    if remaining > _MAGIC_POS and view[pos + _MAGIC_POS] != MAGIC_V2:
        _check_magic(view[pos + _MAGIC_POS])
    if size < BATCH_HEADER_SIZE:
        raise CorruptRecordError(
            f"record batch at position {pos} has length {batch_length}, "
            f"shorter than the {BATCH_HEADER_SIZE}-byte header"
        )
    return size if size <= remaining else -1


def _verify_crc(view: memoryview, pos: int, size: int, header: RecordBatchHeader) -> None:
    actual = crc32c.crc32c(view[pos + _ATTRIBUTES_POS : pos + size])
    if actual != header.crc:
        raise CorruptRecordError(
            f"record batch at offset {header.base_offset} (position {pos}) has CRC "
            f"{header.crc:#010x}, computed {actual:#010x}"
        )


def _raise_incomplete(view: memoryview, pos: int, end: int) -> NoReturn:
    remaining = end - pos
    if remaining < LOG_OVERHEAD:
        raise CorruptRecordError(
            f"{remaining} trailing bytes at position {pos} are not a record batch"
        )
    _, batch_length = _OFFSET_AND_LENGTH.unpack_from(view, pos)
    raise CorruptRecordError(
        f"record batch at position {pos} has length {batch_length}, which runs "
        f"past the end of the buffer ({remaining} bytes left)"
    )


def validate_batches(buf: Buffer) -> list[RecordBatchHeader]:
    """The produce path's checks: whole magic-2 batches, good CRCs, sane counts.

    Raises CorruptRecordError for bytes that are not valid batches and
    InvalidRecordError for well-formed batches that break Kafka's rules (non-positive
    record count, lastOffsetDelta that disagrees with the count, unknown codec). An
    empty buffer is not valid: a produce request must carry at least one batch.
    """
    # Every produced batch passes here exactly once: a plain loop, not the generator of
    # ``iter_batches`` (the same checks, in the same words).
    headers: list[RecordBatchHeader] = []
    view = memoryview(buf)
    end = len(view)
    pos = 0
    while pos < end:
        size = _batch_size(view, pos, end)
        if size < 0:
            _raise_incomplete(view, pos, end)
        header = RecordBatchHeader(*_HEADER.unpack_from(view, pos))
        _verify_crc(view, pos, size, header)
        pos += size
        if header.records_count <= 0:
            raise InvalidRecordError(
                f"record batch at offset {header.base_offset} has record count "
                f"{header.records_count}"
            )
        if header.last_offset_delta != header.records_count - 1:
            raise InvalidRecordError(
                f"inconsistent batch offset range: lastOffsetDelta {header.last_offset_delta} "
                f"with {header.records_count} records"
            )
        if header.compression > 4:
            raise InvalidRecordError(f"unknown compression codec id {header.compression}")
        headers.append(header)
    if not headers:
        raise CorruptRecordError("no record batches in the records field")
    return headers


def stamp_leader_batches(
    buf: Buffer,
    headers: list[RecordBatchHeader],
    first_offset: int,
    leader_epoch: int,
    log_append_time_ms: int | None = None,
) -> bytearray:
    """The leader's rewrite of validated batches, in one pass over their headers.

    Consecutive offsets from ``first_offset`` and the leader epoch that appends them:
    baseOffset and partitionLeaderEpoch are outside the CRC, so these are plain
    overwrites. With ``log_append_time_ms`` a batch becomes LogAppendTime: the
    timestamp-type bit is set and maxTimestamp is the append time (readers then use it
    for every record), which the CRC covers, so the CRC is recomputed. Compressed
    batches keep their payload as sent. ``headers`` are ``validate_batches(buf)``'s,
    and are updated to describe the bytes returned.
    """
    out = bytearray(buf)
    pos = 0
    offset = first_offset
    for header in headers:
        _OFFSET_LENGTH_EPOCH.pack_into(out, pos, offset, header.batch_length, leader_epoch)
        header.base_offset = offset
        header.partition_leader_epoch = leader_epoch
        size = header.batch_length + LOG_OVERHEAD
        if log_append_time_ms is not None:
            attributes = header.attributes | ATTR_TIMESTAMP_TYPE
            _INT16.pack_into(out, pos + _ATTRIBUTES_POS, attributes)
            _INT64.pack_into(out, pos + _MAX_TIMESTAMP_POS, log_append_time_ms)
            crc = crc32c.crc32c(memoryview(out)[pos + _ATTRIBUTES_POS : pos + size])
            _UINT32.pack_into(out, pos + _CRC_POS, crc)
            header.attributes = attributes
            header.max_timestamp = log_append_time_ms
            header.crc = crc
        offset += header.last_offset_delta + 1
        pos += size
    return out


# ---------------------------------------------------------------------------
# Records inside a batch

# The smallest record: a one-byte length, then attributes, timestampDelta, offsetDelta,
# keyLength, valueLength and headerCount of one byte each.
_MIN_RECORD_SIZE = 7


def _invalid_structure(message: str) -> InvalidRecordError:
    return InvalidRecordError(f"Found invalid record structure: {message}")


def _batch_payload(
    batch: Buffer, header: RecordBatchHeader, start: int, max_decompressed_bytes: int
) -> tuple[Buffer, int, int]:
    """(buffer, start, end) of the records section of the batch at ``start``: the
    batch's own bytes when uncompressed (no copy), else the bounded decompression."""
    payload_start = start + BATCH_HEADER_SIZE
    payload_end = start + header.size
    if header.compression == NONE:
        return batch, payload_start, payload_end
    payload = memoryview(batch)[payload_start:payload_end]
    try:
        data = decompress_bounded(header.compression, payload, max_decompressed_bytes)
    except UnsupportedCodecError as exc:
        raise InvalidRecordError(f"record batch at offset {header.base_offset}: {exc}") from exc
    except DecompressedSizeExceeded as exc:
        raise RecordsTooLargeError(f"record batch at offset {header.base_offset}: {exc}") from exc
    except CompressionError as exc:
        raise CorruptRecordError(f"record batch at offset {header.base_offset}: {exc}") from exc
    return data, 0, len(data)


def _check_records(buf: Buffer, pos: int, end: int, header: RecordBatchHeader) -> None:
    """Walk the records of one batch in ``buf[pos:end]`` without decoding them.

    Checks what Kafka's record reader checks (every length within its record, the
    fields adding up to the record's length, varints in range, a non-negative header
    count, no null header key, exactly ``recordsCount`` records and nothing after
    them) and that offset deltas run 0, 1, 2, ... (see validate_records). Raises
    InvalidRecordError. Written for speed: 1- and 2-byte varints are read inline,
    and the expected offset delta is compared in its zig-zag form (2 * index).
    """
    count = header.records_count
    where = f"record batch at offset {header.base_offset}"
    if count * _MIN_RECORD_SIZE > end - pos:
        raise InvalidRecordError(
            f"{where}: Incorrect declared batch size, premature EOF reached "
            f"({count} records cannot fit in {end - pos} bytes)"
        )
    expected_delta = 0  # zig-zag of the index: 2 * index
    index = 0
    try:
        for index in range(count):
            if pos >= end:
                raise InvalidRecordError(
                    f"{where}: Incorrect declared batch size, premature EOF reached "
                    f"({count} records declared, {index} found)"
                )
            # length
            b = buf[pos]
            if b < 0x80:
                raw = b
                pos += 1
            elif (b2 := buf[pos + 1]) < 0x80:
                raw = (b & 0x7F) | (b2 << 7)
                pos += 2
            else:
                raw, pos = read_bounded_varint(buf, pos, 5, _invalid_structure)
            record_end = pos + ((raw >> 1) ^ -(raw & 1))
            if record_end > end or raw & 1:
                raise InvalidRecordError(
                    f"{where}: record {index} has length {(raw >> 1) ^ -(raw & 1)} but "
                    f"{end - pos} bytes are left"
                )
            start = pos
            pos += 1  # attributes: unused in v2
            # timestampDelta: only skipped
            if buf[pos] < 0x80:
                pos += 1
            else:
                pos = read_bounded_varint(buf, pos, 10, _invalid_structure)[1]
            # offsetDelta
            b = buf[pos]
            if b < 0x80:
                raw = b
                pos += 1
            elif (b2 := buf[pos + 1]) < 0x80:
                raw = (b & 0x7F) | (b2 << 7)
                pos += 2
            else:
                raw, pos = read_bounded_varint(buf, pos, 5, _invalid_structure)
            if raw != expected_delta:
                raise InvalidRecordError(
                    f"{where}: record {index} has offset delta {(raw >> 1) ^ -(raw & 1)}, "
                    f"expected {index}"
                )
            expected_delta += 2
            # key, then value (unrolled): a negative length is null
            b = buf[pos]
            if b < 0x80:
                raw = b
                pos += 1
            elif (b2 := buf[pos + 1]) < 0x80:
                raw = (b & 0x7F) | (b2 << 7)
                pos += 2
            else:
                raw, pos = read_bounded_varint(buf, pos, 5, _invalid_structure)
            if not raw & 1:
                pos += raw >> 1
            b = buf[pos]
            if b < 0x80:
                raw = b
                pos += 1
            elif (b2 := buf[pos + 1]) < 0x80:
                raw = (b & 0x7F) | (b2 << 7)
                pos += 2
            else:
                raw, pos = read_bounded_varint(buf, pos, 5, _invalid_structure)
            if not raw & 1:
                pos += raw >> 1
            # headers
            if pos >= record_end:
                raise InvalidRecordError(
                    f"{where}: record {index}: Invalid record size: its key and value run "
                    f"past its length {record_end - start}"
                )
            if buf[pos] == 0:
                pos += 1
            else:
                raw, pos = read_bounded_varint(buf, pos, 5, _invalid_structure)
                header_count = (raw >> 1) ^ -(raw & 1)
                if header_count < 0 or header_count * 2 > record_end - pos:
                    raise InvalidRecordError(
                        f"{where}: record {index}: Found invalid number of record headers "
                        f"{header_count}"
                    )
                for _ in range(header_count):
                    raw, pos = read_bounded_varint(buf, pos, 5, _invalid_structure)
                    if raw & 1:
                        raise InvalidRecordError(
                            f"{where}: record {index}: Invalid negative header key size "
                            f"{(raw >> 1) ^ -(raw & 1)}"
                        )
                    pos += raw >> 1
                    raw, pos = read_bounded_varint(buf, pos, 5, _invalid_structure)
                    if not raw & 1:
                        pos += raw >> 1
            if pos != record_end:
                raise InvalidRecordError(
                    f"{where}: record {index}: Invalid record size: expected to read "
                    f"{record_end - start} bytes in record payload, but instead read "
                    f"{pos - start}"
                )
    except IndexError:
        raise InvalidRecordError(
            f"{where}: record {index}: Found invalid record structure (truncated), "
            "Incorrect declared batch size, premature EOF reached"
        ) from None
    if pos != end:
        raise InvalidRecordError(
            f"{where}: Incorrect declared batch size, records still remaining in file "
            f"({end - pos} bytes after record {count - 1})"
        )


def validate_records(
    records: Buffer, max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES
) -> None:
    """Record-level checks of every batch in ``records``, as Kafka's LogValidator
    makes them at produce time; None when all hold, else raises.

    ``records`` is one whole batch or a concatenation of whole batches (a produce
    request's ``records`` field). For each batch: a positive record count that agrees
    with lastOffsetDelta; the payload decompressed (for compressed batches) with a hard
    bound of ``max_decompressed_bytes`` -- at most that much output is ever produced or
    held; then the records walked without decoding them: each record's length inside
    the payload and equal to what its fields take, varints in range (5 bytes and 32
    bits, 10 and 64 for varlongs), header counts and header key lengths not negative,
    offset deltas 0, 1, 2, ... in order, and exactly ``recordsCount`` records with
    nothing after them. Uncompressed batches are walked in place: no copy.

    Raises (``exc.error_code`` is the produce answer):

    * ``InvalidRecordError`` (INVALID_RECORD): the records do not add up -- Kafka's
      InvalidRecordException, which its record reader raises for the same faults; an
      unknown codec id.
    * ``RecordsTooLargeError`` (MESSAGE_TOO_LARGE): the payload inflates beyond
      ``max_decompressed_bytes``.
    * ``CorruptRecordError`` (CORRUPT_MESSAGE): bytes that are not batches at all, or a
      compressed payload that does not decompress.

    Does not check CRCs: call it after ``validate_batches`` (which does), so a batch
    damaged in transit is answered CORRUPT_MESSAGE before its records are looked at.

    Where this differs from Kafka: Kafka rewrites a compressed batch whose inner offset
    deltas are not 0, 1, 2, ... (old clients); we keep payloads as sent, so we refuse
    it (INVALID_RECORD) -- no client of magic 2 writes such deltas. Timestamps
    (``message.timestamp.*``) and keys of compacted topics are the caller's checks,
    since they depend on the topic's configuration.
    """
    view = memoryview(records)
    found = False
    for pos, header in iter_batches(view):
        found = True
        if header.records_count <= 0:
            raise InvalidRecordError(
                f"record batch at offset {header.base_offset} has record count "
                f"{header.records_count}"
            )
        if header.last_offset_delta != header.records_count - 1:
            raise InvalidRecordError(
                f"inconsistent batch offset range: lastOffsetDelta {header.last_offset_delta} "
                f"with {header.records_count} records"
            )
        data, start, end = _batch_payload(view, header, pos, max_decompressed_bytes)
        _check_records(data, start, end, header)
        del data  # a decompressed payload goes now, before the next batch's is made
    if not found:
        raise CorruptRecordError("no record batches in the records field")


def iter_records(
    batch: Buffer, max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES
) -> Iterator[Record]:
    """Decode the records of one whole batch, decompressing its payload when needed.

    The payload is decompressed with a hard bound of ``max_decompressed_bytes`` (see
    compression.py). Raises CorruptRecordError (or a subclass: InvalidRecordError for
    records that do not add up, RecordsTooLargeError past the bound) when the records
    section cannot be decoded -- never another exception. Header keys that are not
    UTF-8 are decoded with replacement characters, as Java's String does.
    """
    header = parse_batch_header(batch)
    view = memoryview(batch)
    if header.size > len(view):
        raise CorruptRecordError(f"record batch needs {header.size} bytes, {len(view)} available")
    if header.size < BATCH_HEADER_SIZE:
        raise CorruptRecordError(
            f"record batch at offset {header.base_offset} has length {header.batch_length}, "
            f"shorter than the {BATCH_HEADER_SIZE}-byte header"
        )
    data, pos, end = _batch_payload(view, header, 0, max_decompressed_bytes)
    log_append_time = header.timestamp_type == TIMESTAMP_LOG_APPEND_TIME
    base_offset = header.base_offset
    base_timestamp = header.base_timestamp
    try:
        for _ in range(header.records_count):
            length, pos = read_varint(data, pos, _invalid_structure)
            record_end = pos + length
            if record_end > end:
                raise InvalidRecordError(
                    f"record batch at offset {base_offset}: record of length {length} runs "
                    "past the end of the batch"
                )
            pos += 1  # record attributes: unused in v2
            ts_delta, pos = read_varint(data, pos, _invalid_structure)
            offset_delta, pos = read_varint(data, pos, _invalid_structure)
            key_len, pos = read_varint(data, pos, _invalid_structure)
            key: bytes | None = None
            if key_len >= 0:
                key = bytes(data[pos : pos + key_len])
                pos += key_len
            value_len, pos = read_varint(data, pos, _invalid_structure)
            value: bytes | None = None
            if value_len >= 0:
                value = bytes(data[pos : pos + value_len])
                pos += value_len
            header_count, pos = read_varint(data, pos, _invalid_structure)
            if header_count < 0 or header_count * 2 > record_end - pos:
                raise InvalidRecordError(
                    f"record batch at offset {base_offset}: invalid number of record "
                    f"headers {header_count}"
                )
            headers: RecordHeaders = []
            for _h in range(header_count):
                hk_len, pos = read_varint(data, pos, _invalid_structure)
                if hk_len < 0:
                    raise InvalidRecordError("record header key is null")
                hkey = str(data[pos : pos + hk_len], "utf-8", "replace")
                pos += hk_len
                hv_len, pos = read_varint(data, pos, _invalid_structure)
                hval: bytes | None = None
                if hv_len >= 0:
                    hval = bytes(data[pos : pos + hv_len])
                    pos += hv_len
                headers.append((hkey, hval))
            if pos != record_end:
                raise InvalidRecordError(
                    f"record at offset delta {offset_delta} has length {length} but its "
                    "fields do not add up to it"
                )
            yield Record(
                offset=base_offset + offset_delta,
                timestamp=header.max_timestamp if log_append_time else base_timestamp + ts_delta,
                key=key,
                value=value,
                headers=headers,
            )
    except IndexError as exc:
        raise InvalidRecordError(
            f"record batch at offset {base_offset}: records section is truncated or "
            f"malformed ({exc})"
        ) from exc
