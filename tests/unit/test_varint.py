"""protocol/varint.py: Kafka's unsigned and zig-zag varints, and their limits."""

from __future__ import annotations

import pytest

from protocol.varint import (
    VarintError,
    read_bounded_varint,
    read_uvarint,
    read_varint,
    uvarint,
    write_varint,
)


@pytest.mark.parametrize("value", [0, 1, 127, 128, 300, 2**21, 2**31 - 1])
def test_unsigned_round_trip(value: int) -> None:
    data = uvarint(value) + b"tail"
    assert read_uvarint(data, 0) == (value, len(data) - 4)


@pytest.mark.parametrize("value", [0, -1, 1, -64, 63, -(2**31), 2**31 - 1, -(2**63), 2**63 - 1])
def test_zig_zag_round_trip(value: int) -> None:
    out = bytearray()
    write_varint(out, value)
    assert read_varint(bytes(out), 0) == (value, len(out))


def test_known_bytes() -> None:
    assert uvarint(300) == b"\xac\x02"
    out = bytearray()
    write_varint(out, -1)
    assert bytes(out) == b"\x01"


def test_limits_raise_the_callers_error() -> None:
    with pytest.raises(VarintError, match="truncated"):
        read_uvarint(b"\x80", 0)
    with pytest.raises(KeyError, match="longer than 5 bytes"):
        read_uvarint(b"\x80" * 5 + b"\x01", 0, KeyError)
    with pytest.raises(VarintError, match="longer than 10 bytes"):
        read_varint(b"\xff" * 11, 0)
    with pytest.raises(VarintError, match="varint out of range"):
        read_bounded_varint(b"\xff\xff\xff\xff\x7f", 0, 5)
    assert read_bounded_varint(b"\xff\xff\xff\xff\x0f", 0, 5) == (2**32 - 1, 5)
