"""The generated body guards against an independent reference, for every request and
response class of every API version kio has.

The reference below is a plain recursive walk over kio's dataclass schema, written
for clarity and checking every read against the buffer: it says where a body ends or
why it is refused. On valid encodings (dense and sparse samples), on every truncation,
on hostile values at every count and length position (null, negative, huge, overlong
and non-canonical varints) and on random byte changes, the guard must give the same
verdict -- the same end, or the same kind of refusal naming the same field. Whatever
both accept then goes through kio's native reader, which must not see an array count
it cannot hold (the whole point of the guard) and, when it decodes, must end where the
guard said.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import struct
import types
import typing
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.serial import entity_reader

from protocol import KIO_VERSIONS, request_builder, response_builder
from protocol.body_guards import (
    FIXED_WIDTH,
    MAX_ARRAY_ELEMENTS,
    MAX_TAGGED_FIELDS,
    check_body,
    guard_for,
    guard_source,
)
from protocol.fast_writers import encode
from testkit.kio_samples import sample

ALL_VERSIONS = [
    (key, version)
    for key, spec in KIO_VERSIONS.items()
    for version in range(spec.min_version, spec.max_version + 1)
]

# --------------------------------------------------------------------------- reference

_FIXED = FIXED_WIDTH  # the widths are Kafka's; the walk below is the test's own

Verdict = tuple[Any, ...]  # ("end", n) or ("fit", name, count, left), ("null", name), ...


class Refused(Exception):
    def __init__(self, *verdict: Any) -> None:
        super().__init__(*verdict)
        self.verdict: Verdict = verdict


@dataclasses.dataclass(frozen=True)
class Field:
    name: str  # Owner.field, as the guard names it
    kind: str  # "array", "struct", "scalar"
    kafka_type: str
    nullable: bool
    tag: int | None
    inner: type | None  # the struct (of a struct field or an array of structs)


@functools.cache
def _schema(cls: type) -> tuple[Field, ...]:
    out = []
    for f in dataclasses.fields(cls):
        tp: Any = f.type
        nullable = False
        if typing.get_origin(tp) in (types.UnionType, typing.Union):
            args = [a for a in typing.get_args(tp) if a is not type(None)]
            nullable, tp = True, args[0]
        kind = "scalar"
        if typing.get_origin(tp) is tuple:
            kind, tp = "array", typing.get_args(tp)[0]
        elif dataclasses.is_dataclass(tp):
            kind = "struct"
        inner = tp if isinstance(tp, type) and dataclasses.is_dataclass(tp) else None
        tag = f.metadata.get("tag")
        out.append(
            Field(
                f"{cls.__qualname__}.{f.name}",
                kind,
                f.metadata.get("kafka_type", ""),
                nullable,
                None if tag is None else int(tag),
                inner,
            )
        )
    return tuple(out)


def _flexible(cls: type) -> bool:
    return bool(getattr(cls, "__flexible__", False))


def _scalar_min(kafka_type: str, flexible: bool) -> int:
    if kafka_type in _FIXED:
        return _FIXED[kafka_type]
    return 1 if flexible else 2 if kafka_type == "string" else 4


@functools.cache
def _min_size(cls: type) -> int:
    flexible = _flexible(cls)
    total = 1 if flexible else 0
    for f in _schema(cls):
        if f.tag is not None:
            continue
        if f.kind == "array":
            total += 1 if flexible else 4
        elif f.kind == "struct":
            assert f.inner is not None
            total += 1 if f.nullable else _min_size(f.inner)
        else:
            total += _scalar_min(f.kafka_type, flexible)
    return total


class Walk:
    """One reference walk over ``buf``; ``counts`` records where each length or count
    was read: (offset, "uvarint" | "int16" | "int32")."""

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.counts: list[tuple[int, str]] = []

    def need(self, pos: int, size: int) -> None:
        if pos + size > len(self.buf):
            raise Refused("truncated")

    def uvarint(self, pos: int) -> tuple[int, int]:
        self.counts.append((pos, "uvarint"))
        value = 0
        for i in range(5):
            self.need(pos, 1)
            byte = self.buf[pos]
            pos += 1
            value |= (byte & 0x7F) << (7 * i)
            if byte < 0x80:
                return value, pos
        raise Refused("varint")

    def int_(self, pos: int, width: int) -> tuple[int, int]:
        self.counts.append((pos, f"int{width * 8}"))
        self.need(pos, width)
        return int.from_bytes(self.buf[pos : pos + width], "big", signed=True), pos + width

    def struct(self, cls: type, pos: int) -> int:
        flexible = _flexible(cls)
        tagged = {}
        for f in _schema(cls):
            if f.tag is None:
                pos = self.field(f, pos, flexible, in_tag=False)
            else:
                tagged[f.tag] = f
        if flexible:
            count, pos = self.uvarint(pos)
            if count > MAX_TAGGED_FIELDS:
                raise Refused("tag-limit")
            for _ in range(count):
                tag, pos = self.uvarint(pos)
                size, pos = self.uvarint(pos)
                end = pos + size
                if end > len(self.buf):
                    raise Refused("truncated")
                if tag in tagged and self.field(tagged[tag], pos, flexible, True) != end:
                    raise Refused("tag-fill", tag)
                pos = end
        return pos

    def field(self, f: Field, pos: int, flexible: bool, in_tag: bool) -> int:
        if f.kind == "array":
            return self.array(f, pos, flexible)
        if f.kind == "struct":
            assert f.inner is not None
            if f.nullable and not in_tag:
                self.need(pos, 1)
                if self.buf[pos] >= 0x80:  # a negative int8 marker: null
                    return pos + 1
                pos += 1
            return self.struct(f.inner, pos)
        return self.scalar(f.kafka_type, pos, flexible)

    def scalar(self, kafka_type: str, pos: int, flexible: bool) -> int:
        # Only lengths and counts are read: a value may run past the buffer, which the
        # next read or the final check finds (or a tagged field's size, first).
        if kafka_type in _FIXED:
            return pos + _FIXED[kafka_type]
        if flexible:
            size, pos = self.uvarint(pos)
            size = max(size - 1, 0)  # 0 is null
        else:
            size, pos = self.int_(pos, 2 if kafka_type == "string" else 4)
            size = max(size, 0)  # any negative length reads as null here; kio decides
        return pos + size

    def array(self, f: Field, pos: int, flexible: bool) -> int:
        if flexible:
            count, pos = self.uvarint(pos)
            count -= 1
        else:
            count, pos = self.int_(pos, 4)
        if count == -1 and not f.nullable:
            raise Refused("null", f.name)
        if count < -1:
            raise Refused("negative", f.name, count)
        if count <= 0:
            return pos
        if count > MAX_ARRAY_ELEMENTS:
            raise Refused("limit", f.name, count)
        least = max(
            _min_size(f.inner) if f.inner is not None else _scalar_min(f.kafka_type, flexible),
            1,
        )
        if count * least > len(self.buf) - pos:
            raise Refused("fit", f.name, count, max(len(self.buf) - pos, 0))
        for _ in range(count):
            if f.inner is not None:
                pos = self.struct(f.inner, pos)
            else:
                pos = self.scalar(f.kafka_type, pos, flexible)
        return pos


def reference(cls: type, buf: bytes) -> tuple[Verdict, list[tuple[int, str]]]:
    walk = Walk(buf)
    try:
        end = walk.struct(cls, 0)
        walk.need(0, end)
        verdict: Verdict = ("end", end)
    except Refused as refused:
        verdict = refused.verdict
    return verdict, walk.counts


# --------------------------------------------------------------------------- the guard's verdict

_MESSAGES = [
    (re.compile(r"non-nullable array (\S+) is null$"), lambda m: ("null", m[1])),
    (
        re.compile(r"negative array length (-\d+) for (\S+)$"),
        lambda m: ("negative", m[2], int(m[1])),
    ),
    (
        re.compile(r"array (\S+) of (\d+) elements cannot fit in the (\d+) bytes left$"),
        lambda m: ("fit", m[1], int(m[2]), int(m[3])),
    ),
    (
        re.compile(r"array (\S+) of (\d+) elements is over the limit of \d+$"),
        lambda m: ("limit", m[1], int(m[2])),
    ),
    (re.compile(r"tagged fields in .* are over the limit of \d+$"), lambda m: ("tag-limit",)),
    (
        re.compile(r"tagged field (\d+) of \S+ does not fill its \d+ bytes$"),
        lambda m: ("tag-fill", int(m[1])),
    ),
    (re.compile(r"varint longer than 5 bytes in "), lambda m: ("varint",)),
    (
        re.compile(
            r"(frame ends at or before \S|truncated varint in |truncated tagged field"
            r"|body needs \d+ bytes, \d+ present$)"
        ),
        lambda m: ("truncated",),
    ),
]


def guard_verdict(cls: type, buf: bytes) -> Verdict:
    problem = check_body(cls, buf, 0)
    if problem is None:
        return ("end", guard_for(cls)(buf, 0))
    for pattern, verdict in _MESSAGES:
        match = pattern.search(problem)
        if match:
            return verdict(match)
    raise AssertionError(f"unexpected guard message {problem!r}")


def agree(cls: type, buf: bytes) -> Verdict:
    """Guard and reference agree on ``buf``; whatever they accept, kio may read."""
    expected, _ = reference(cls, buf)
    got = guard_verdict(cls, buf)
    assert got == expected, (cls.__module__, buf.hex())
    # Also at an offset, as in a frame behind its header.
    shifted = b"\xaa\xbb\xcc" + buf
    end = guard_for(cls)(shifted, 3) if expected[0] == "end" else None
    assert (check_body(cls, shifted, 3) is None) == (expected[0] == "end")
    if expected[0] == "end":
        assert end == expected[1] + 3
        try:
            _payload, kio_end = _reader(cls)(buf, 0)
        except Exception:  # kio's own checks: strings, UTF-8, markers ...
            return expected
        assert kio_end == expected[1], (cls.__module__, buf.hex())
    return expected


@functools.cache
def _reader(cls: type) -> Any:
    return entity_reader(cls)


# --------------------------------------------------------------------------- cases


@functools.cache
def _bodies(api_key: int, version: int) -> tuple[tuple[type, bytes], ...]:
    out = []
    for builder in (request_builder(api_key, version), response_builder(api_key, version)):
        cls = builder.payload_class
        for sparse in (False, True):
            out.append((cls, encode(sample(builder, cls, sparse))))
    return tuple(out)


def _hostile(kind: str) -> list[bytes]:
    """Values to put where a length or count is read."""
    if kind == "uvarint":
        return [
            b"\x00",  # null
            b"\x01",  # empty
            b"\x02",
            b"\x7f",
            b"\x80\x00",  # a non-canonical 0: null
            b"\x80\x01",  # 128
            b"\xff\x7f",
            b"\x80\x80\x01",
            b"\xff\xff\xff\xff\x0f",  # 2**32 - 1
            b"\xff\xff\xff\xff\x7f",  # the largest five-byte value
            b"\xff\xff\xff\xff\xff\x01",  # six bytes
        ]
    width = 2 if kind == "int16" else 4
    values = [-1, -2, 0, 1, 3, 0x7FFF, -0x8000] if width == 2 else [-1, -2, 0, 1, 3, 2**31 - 1]
    values += [] if width == 2 else [2**28, -(2**31)]
    return [v.to_bytes(width, "big", signed=True) for v in values]


def _width(buf: bytes, offset: int, kind: str) -> int:
    if kind == "int16":
        return 2
    if kind == "int32":
        return 4
    width = 1
    while offset + width - 1 < len(buf) and buf[offset + width - 1] & 0x80 and width < 5:
        width += 1
    return width


def _mutations(buf: bytes, counts: list[tuple[int, str]]) -> Iterator[bytes]:
    for offset, kind in counts:
        width = _width(buf, offset, kind)
        for value in _hostile(kind):
            yield buf[:offset] + value + buf[offset + width :]


@pytest.mark.parametrize(("api_key", "api_version"), ALL_VERSIONS)
def test_guard_agrees_with_the_reference(api_key: int, api_version: int) -> None:
    for cls, body in _bodies(api_key, api_version):
        verdict, counts = reference(cls, body)
        assert verdict == ("end", len(body))
        assert agree(cls, body) == verdict
        assert _reader(cls)(body, 0)[1] == len(body)
        step = max(1, len(body) // 48)  # every cut of a small body, ~48 of a large one
        cuts = {*range(0, len(body), step), *(o for o, _ in counts), len(body) - 1}
        for cut in sorted(cuts - {-1}):
            assert agree(cls, body[:cut])[0] != "end"
        for mutated in _mutations(body, counts):
            agree(cls, mutated)


_CASES = [(key, version, i) for key, version in ALL_VERSIONS for i in range(4)]


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=st.sampled_from(_CASES),
    changes=st.lists(
        st.tuples(st.integers(0, 10**6), st.integers(0, 255), st.sampled_from(["set", "xor"])),
        min_size=1,
        max_size=4,
    ),
)
def test_random_byte_changes(case: tuple[int, int, int], changes: list[Any]) -> None:
    api_key, version, index = case
    cls, body = _bodies(api_key, version)[index]
    if not body:
        return
    data = bytearray(body)
    for where, value, how in changes:
        at = where % len(data)
        data[at] = value if how == "set" else data[at] ^ (1 << (value % 8))
    agree(cls, bytes(data))


# --------------------------------------------------------------------------- by hand


def _produce_v9_head() -> bytes:
    # transactional_id null, acks -1, timeout 1000, one topic "t"
    return b"\x00" + b"\xff\xff" + b"\x00\x00\x03\xe8" + b"\x02" + b"\x02t"


def _produce_v9_class() -> type:
    return request_builder(0, 9).payload_class


def test_records_with_two_byte_lengths() -> None:
    cls = _produce_v9_class()
    head = _produce_v9_head() + b"\x02" + b"\x00\x00\x00\x00"
    records = b"r" * 200
    body = head + b"\xc9\x01" + records + b"\x00" + b"\x00" + b"\x00"  # 201 = 200 + 1
    assert check_body(cls, body, 0) is None
    assert guard_for(cls)(body, 0) == len(body)
    # A non-canonical two-byte 0 is null: two bytes and nothing after them.
    null = head + b"\x80\x00" + b"\x00" + b"\x00" + b"\x00"
    assert guard_for(cls)(null, 0) == len(null)
    assert check_body(cls, body[:-1], 0) is not None
    assert check_body(cls, head + b"\xc9\x81", 0) == (
        "truncated varint in PartitionProduceData.records"
    )


def test_truncation_and_varint_messages_name_the_field() -> None:
    cls = _produce_v9_class()
    assert check_body(cls, _produce_v9_head()[:5], 0) == (
        "frame ends at or before ProduceRequest.topic_data"
    )
    overlong = _produce_v9_head()[:-2] + b"\xff\xff\xff\xff\xff\x01t"
    assert check_body(cls, overlong, 0) == ("varint longer than 5 bytes in TopicProduceData.name")
    assert check_body(cls, _produce_v9_head() + b"\x80", 0) == (
        "truncated varint in TopicProduceData.partition_data"
    )


def test_tagged_fields_must_fill_their_size() -> None:
    # ApiVersions v3 response: api_keys empty, throttle 0, then tag 0
    # (supported_features, an array of structs) given 3 bytes for an empty array (1 byte).
    cls = response_builder(18, 3).payload_class
    head = b"\x00\x00" + b"\x01" + b"\x00\x00\x00\x00"
    good = head + b"\x01" + b"\x00\x01\x01"
    assert check_body(cls, good, 0) is None
    bad = head + b"\x01" + b"\x00\x03\x01\x00\x00"
    assert check_body(cls, bad, 0) == (
        "tagged field 0 of ApiVersionsResponse does not fill its 3 bytes"
    )
    short = head + b"\x01" + b"\x00\x05\x01"
    assert check_body(cls, short, 0) == "truncated tagged field 0 of ApiVersionsResponse"
    unknown = head + b"\x01" + b"\x09\x01\x07"  # an unknown tag is skipped, if it fits
    assert check_body(cls, unknown, 0) is None
    assert check_body(cls, unknown[:-1], 0) == "truncated tagged field 9 of ApiVersionsResponse"
    # Heartbeat v4 request has no tagged field of its own: a helper skips them.
    heartbeat = request_builder(12, 4).payload_class
    body = b"\x02g" + b"\x00\x00\x00\x01" + b"\x02m" + b"\x00" + b"\x01\x00\x02xy"
    assert check_body(heartbeat, body, 0) is None
    assert check_body(heartbeat, body[:-1], 0) == (
        "truncated tagged field in HeartbeatRequest's tagged fields"
    )


def test_fixed_width_elements_are_one_multiplication() -> None:
    # ApiVersions v0 response entries are three int16s: no loop over them.
    source = guard_source(response_builder(18, 0).payload_class)
    assert "for " not in source
    assert "x * 6" in source
    body = b"\x00\x00" + struct.pack(">i", 10**6) + bytes(60)
    assert check_body(response_builder(18, 0).payload_class, body, 0) == (
        "array ApiVersionsResponse.api_keys of 1000000 elements cannot fit in the 60 bytes left"
    )


def test_memoryview_bodies() -> None:
    cls = _produce_v9_class()
    body = _produce_v9_head() + b"\x02" + b"\x00\x00\x00\x00" + b"\x03ab" + b"\x00\x00\x00"
    assert guard_for(cls)(memoryview(body), 0) == len(body)
    assert check_body(cls, memoryview(body)[:-1], 0) is not None
