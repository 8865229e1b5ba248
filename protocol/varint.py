"""Kafka's variable-length integers, read and written in one place.

Two encodings, both little-endian base-128 groups of 7 bits, the high bit saying
another byte follows (Java's ``ByteUtils``):

- **unsigned** varints (``readUnsignedVarint``): the lengths of a flexible message's
  compact strings, bytes and arrays (length + 1, 0 for null), its tagged-field counts,
  tags and sizes; at most 5 bytes (32 bits).
- **zig-zag** varints and varlongs (``readVarint``/``readVarlong``): the fields of a
  record inside a v2 record batch (length, timestamp and offset deltas, key, value and
  header lengths); ``(n << 1) ^ (n >> 63)`` so small negatives stay short.

The hot loops (``record_batch._check_records``, ``record_timestamps``, the record
walkers) read one- and two-byte varints inline and call :func:`read_bounded_varint`
for the rest; everything else calls these functions. Each reader takes the exception
its caller raises for a bad varint (``error``, called with a message), since each layer
reports malformed bytes its own way (a request's ``_Short``, a batch's
``InvalidRecordError``, a cleaner's ``CorruptRecordError``, a coordinator record's
``ValueError``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

__all__ = (
    "UVARINT",
    "VarintError",
    "read_bounded_varint",
    "read_uvarint",
    "read_varint",
    "uvarint",
    "write_uvarint",
    "write_varint",
)

Buffer = bytes | bytearray | memoryview
ErrorFactory = Callable[[str], Exception]


class VarintError(ValueError):
    """A varint that is truncated or longer than its type allows."""


class _UvarintTable(dict[int, bytes]):
    """``UVARINT[n]``: the unsigned varint of ``n``; a table up to 127, computed beyond."""

    def __missing__(self, value: int) -> bytes:
        if value < 0:
            raise ValueError(f"unsigned varint of negative {value}")
        out = bytearray()
        write_uvarint(out, value)
        return bytes(out)


UVARINT: Final = _UvarintTable({n: bytes((n,)) for n in range(128)})


def uvarint(value: int) -> bytes:
    """The unsigned varint of ``value`` (>= 0)."""
    return UVARINT[value]


def write_uvarint(out: bytearray, value: int) -> None:
    """Append the unsigned varint of ``value`` (>= 0) to ``out``."""
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def write_varint(out: bytearray, value: int) -> None:
    """Append a zig-zag varint (a record's varint or varlong) to ``out``."""
    write_uvarint(out, (value << 1) ^ (value >> 63))


def read_uvarint(buf: Buffer, pos: int, error: ErrorFactory = VarintError) -> tuple[int, int]:
    """(value, position after it) of the unsigned varint at ``pos``: at most 5 bytes,
    as Kafka writes it; ``error`` for a truncated or overlong one."""
    result = 0
    shift = 0
    end = len(buf)
    while True:
        if pos >= end:
            raise error("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 28:
            raise error("varint longer than 5 bytes")


def read_varint(buf: Buffer, pos: int, error: ErrorFactory = VarintError) -> tuple[int, int]:
    """(value, position after it) of the zig-zag varint or varlong at ``pos``; ``error``
    past 10 bytes. A truncated one raises IndexError (the record walkers turn that into
    their own "truncated record")."""
    b = buf[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    result = b & 0x7F
    shift = 7
    pos += 1
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise error("varint longer than 10 bytes")


def read_bounded_varint(
    buf: Buffer, pos: int, max_len: int, error: ErrorFactory = VarintError
) -> tuple[int, int]:
    """The raw (not yet zig-zag decoded) value of a varint of at most ``max_len`` bytes:
    5 bytes and 32 bits for a varint, 10 bytes and 64 bits for a varlong, as Java's
    ``ByteUtils.readVarint`` / ``readVarlong`` require; ``error`` otherwise. The slow
    path of the record walkers."""
    bits = 32 if max_len == 5 else 64
    result = 0
    shift = 0
    for _ in range(max_len):
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            if result >> bits:
                break
            return result, pos
        shift += 7
    raise error(f"{'varint' if max_len == 5 else 'varlong'} out of range")
