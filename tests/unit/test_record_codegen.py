"""The generated coordinator record codecs write Kafka's bytes for any values, read them
back, and fail on a bad record only with ``ValueError`` or ``struct.error``.

``test_coordinator_records.py`` pins the bytes of fixed records against the hand-written
codecs of before; here hypothesis draws values for every record type, schema and version
we declare and compares the generated code with a plain recursive reference written from
Kafka's rules (``MessageUtil``, generated ``write``/``read``), unknown tagged fields
included, so that a generator bug outside the golden records still shows. A schema or
struct declared with a ``make`` (the share coordinator's, and ``PROBE`` here: tagged
fields, fields a version lacks, a class whose fields are not in the schema's order) takes
and gives objects: the drawn dicts are turned into them (:func:`_objects`).
"""

from __future__ import annotations

import contextlib
import os
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.coordinator.record_fields import FIXED_CODES, Field, Struct, parse_versions
from broker.coordinator.record_schema import RecordType, Schema
from broker.group import group_log
from broker.group.consumer import consumer_group_records
from broker.share_coordinator import share_state_records
from broker.txn import transaction_log
from protocol.varint import UVARINT


@dataclass(frozen=True)
class _Item:
    name: str
    counts: tuple[int, ...]


@dataclass(frozen=True)
class _Owner:
    owner_id: Any
    level: int = 0


@dataclass(frozen=True)
class _ProbeKey:
    id: int


@dataclass(frozen=True)
class _Probe:
    """Its fields in another order than the schema's: made by keyword."""

    epoch: int
    items: tuple[_Item, ...] | None
    owner: _Owner
    note: str | None = None
    ids: tuple[int, ...] | None = None
    level: int = -1


_ITEM = Struct("Item", (Field("Name", "string"), Field("Counts", "[]int32")), make=_Item)
_OWNER = Struct(
    "Owner",
    (Field("OwnerUuid", "uuid", attr="owner_id"), Field("Level", "int8", versions="1+")),
    make=_Owner,
)
PROBE = RecordType(
    9,
    Schema("ProbeKey", "0", "none", (Field("Id", "int32"),), make=_ProbeKey),
    Schema(
        "ProbeValue",
        "0-1",
        "1+",
        (
            Field.of("Items", _ITEM, nullable_versions="0+"),
            Field("Owner", _OWNER),
            Field("Epoch", "int32"),
            Field("Note", "string", versions="1+", nullable_versions="1+", tag=0),
            Field("Ids", "[]int64", versions="1+", nullable_versions="1+", tag=1),
            Field("Level", "int16", versions="1+", default=-1),
        ),
        make=_Probe,
    ),
)

RECORD_TYPES: list[RecordType] = [
    group_log.LEGACY_OFFSET_COMMIT,
    group_log.OFFSET_COMMIT,
    group_log.GROUP_METADATA,
    *consumer_group_records.RECORD_TYPES.values(),
    transaction_log.TRANSACTION_LOG,
    share_state_records.SHARE_SNAPSHOT,
    share_state_records.SHARE_UPDATE,
    PROBE,
]
_ALL = [
    (record_type, schema, version)
    for record_type in RECORD_TYPES
    for schema, versions in (
        (record_type.key, [0]),
        (record_type.value, list(record_type.value.versions)),
    )
    for version in versions
]
CASES = [pytest.param(*case, id=f"{case[1].name}-v{case[2]}") for case in _ALL]
FLEXIBLE_CASES = [
    pytest.param(*case, id=f"{case[1].name}-v{case[2]}")
    for case in _ALL
    if case[2] in parse_versions(case[1].flexible_versions)
]
_RANGES = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
_UNKNOWN_TAG = 1000  # declared by none of our schemas


# ---------------------------------------------------------------- reference
def _flexible(schema: Schema, version: int) -> bool:
    return version in parse_versions(schema.flexible_versions)


def _ref_encode(
    fields: tuple[Field, ...], version: int, flexible: bool, values: dict[str, Any], extra: bytes
) -> bytes:
    """A struct's bytes, Kafka's way, field by field; ``extra`` is an unknown tagged
    field's bytes (written after the known ones in a flexible version)."""
    out = b"".join(
        _ref_field(f, version, flexible, values[f.name])
        for f in fields
        if f.in_version(version) and f.tag is None
    )
    if not flexible:
        return out
    tagged = sorted(
        (
            f
            for f in fields
            if f.in_version(version) and f.tag is not None and values.get(f.name) is not None
        ),
        key=lambda f: f.tag or 0,
    )
    out += UVARINT[len(tagged) + (1 if extra else 0)]
    for f in tagged:
        body = _ref_field(f, version, flexible, values[f.name])
        out += UVARINT[f.tag or 0] + UVARINT[len(body)] + body
    if extra:
        out += UVARINT[_UNKNOWN_TAG] + UVARINT[len(extra)] + extra
    return out


def _ref_field(f: Field, version: int, flexible: bool, value: Any) -> bytes:
    if isinstance(f.type, Struct):
        fields = f.type.fields
        if not f.array:
            return _ref_encode(fields, version, flexible, value, b"")
        return _ref_array(
            value, flexible, lambda item: _ref_encode(fields, version, flexible, item, b"")
        )
    if f.type.startswith("[]"):
        item_type = f.type[2:]
        return _ref_array(value, flexible, lambda item: _ref_primitive(item_type, flexible, item))
    return _ref_primitive(f.type, flexible, value)


def _ref_array(value: list[Any] | None, flexible: bool, item: Callable[[Any], bytes]) -> bytes:
    if value is None:
        return UVARINT[0] if flexible else struct.pack(">i", -1)
    head = UVARINT[len(value) + 1] if flexible else struct.pack(">i", len(value))
    return head + b"".join(item(v) for v in value)


def _ref_primitive(type_name: str, flexible: bool, value: Any) -> bytes:
    if type_name in FIXED_CODES:
        return struct.pack(">" + FIXED_CODES[type_name], value)
    if type_name == "uuid":
        return bytes(value.bytes)
    length = ">h" if type_name == "string" else ">i"
    if value is None:
        return UVARINT[0] if flexible else struct.pack(length, -1)
    raw: bytes = value.encode() if type_name == "string" else value
    return (UVARINT[len(raw) + 1] if flexible else struct.pack(length, len(raw))) + raw


def _expected(
    fields: tuple[Field, ...], version: int, flexible: bool, values: dict[str, Any]
) -> dict[str, Any]:
    """What a decoder gives back: fields a version lacks, and tagged fields not written,
    hold their defaults."""
    out: dict[str, Any] = {}
    for f in fields:
        written = f.in_version(version) and (f.tag is None or flexible)
        value = values.get(f.name) if written else None
        if not written or (value is None and f.tag is not None):
            out[f.name] = f.default
        elif isinstance(f.type, Struct) and value is not None:
            if f.array:
                out[f.name] = [_expected(f.type.fields, version, flexible, v) for v in value]
            else:
                out[f.name] = _expected(f.type.fields, version, flexible, value)
        else:
            out[f.name] = value
    return out


def _objects(
    fields: tuple[Field, ...], make: Callable[..., Any] | None, values: dict[str, Any]
) -> Any:
    """``values`` (every field, as :func:`_expected` gives them) as the codec of a
    struct of ``make`` takes and gives them: an object whose arrays are tuples; a dict
    when ``make`` is None (its nested structs may still be objects)."""
    out: dict[str, Any] = {}
    for f in fields:
        value = values[f.name]
        if isinstance(f.type, Struct) and value is not None:
            if f.array:
                value = [_objects(f.type.fields, f.type.make, v) for v in value]
            else:
                value = _objects(f.type.fields, f.type.make, value)
        is_array = f.array or (isinstance(f.type, str) and f.type.startswith("[]"))
        if make is not None and is_array and value is not None:
            value = tuple(value)
        out[f.attribute if make is not None else f.name] = value
    return out if make is None else make(**out)


def _record(schema: Schema, version: int, values: dict[str, Any]) -> tuple[Any, Any]:
    """(what the codec of ``schema`` encodes for the drawn ``values``, what it decodes)."""
    expected = _expected(schema.fields, version, _flexible(schema, version), values)
    decoded = _objects(schema.fields, schema.make, expected)
    return (values if schema.make is None and decoded == expected else decoded), decoded


# --------------------------------------------------------------- strategies
def _values(
    fields: tuple[Field, ...], version: int, flexible: bool
) -> st.SearchStrategy[dict[str, Any]]:
    drawn = {}
    for f in fields:
        if not f.in_version(version) or (f.tag is not None and not flexible):
            continue
        value = _field_values(f, version, flexible)
        drawn[f.name] = st.none() | value if f.tag is not None or f.nullable_in(version) else value
    return st.fixed_dictionaries(drawn)


def _field_values(f: Field, version: int, flexible: bool) -> st.SearchStrategy[Any]:
    if isinstance(f.type, Struct):
        one = _values(f.type.fields, version, flexible)
        return st.lists(one, max_size=4) if f.array else one
    if f.type.startswith("[]"):
        return st.lists(_primitive_values(f.type[2:]), max_size=6)
    return _primitive_values(f.type)


def _primitive_values(type_name: str) -> st.SearchStrategy[Any]:
    if type_name in _RANGES:
        bits = _RANGES[type_name]
        return st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    if type_name == "uint16":
        return st.integers(0, 0xFFFF)
    if type_name == "uuid":
        return st.uuids()
    if type_name == "bytes":
        return st.binary(max_size=200)
    return st.text(max_size=150)


EXAMPLES = int(os.environ.get("RECORD_CODEGEN_EXAMPLES", "15"))
_SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# -------------------------------------------------------------------- tests
@pytest.mark.parametrize(("record_type", "schema", "version"), CASES)
@_SETTINGS
@given(data=st.data())
def test_same_bytes_as_the_reference_and_round_trips(
    record_type: RecordType, schema: Schema, version: int, data: st.DataObject
) -> None:
    flexible = _flexible(schema, version)
    values = data.draw(_values(schema.fields, version, flexible))
    record, expected_record = _record(schema, version, values)
    codec = schema.codec(version)
    expected = _ref_encode(schema.fields, version, flexible, values, b"")
    assert codec.to_bytes(record) == expected
    assert (
        codec.framed(record_type.type_id, record)
        == struct.pack(">h", record_type.type_id) + expected
    )
    decoded, end = codec.decode(b"\x07" + expected, 1)
    assert end == len(expected) + 1
    assert decoded == expected_record
    if schema is record_type.value:
        assert record_type.read_value(record_type.value_bytes(version, record)) == (
            version,
            decoded,
        )
    else:
        assert record_type.read_key(record_type.key_bytes(record)) == decoded


@pytest.mark.parametrize(("record_type", "schema", "version"), FLEXIBLE_CASES)
@_SETTINGS
@given(data=st.data())
def test_unknown_tagged_fields_are_skipped(
    record_type: RecordType, schema: Schema, version: int, data: st.DataObject
) -> None:
    values = data.draw(_values(schema.fields, version, flexible=True))
    extra = data.draw(st.binary(min_size=1, max_size=300))
    raw = _ref_encode(schema.fields, version, True, values, extra)
    decoded, end = schema.codec(version).decode(raw, 0)
    assert (decoded, end) == (_record(schema, version, values)[1], len(raw))


@pytest.mark.parametrize(("record_type", "schema", "version"), CASES)
@_SETTINGS
@given(data=st.data())
def test_a_truncated_record_raises_value_error_or_struct_error(
    record_type: RecordType, schema: Schema, version: int, data: st.DataObject
) -> None:
    flexible = _flexible(schema, version)
    raw = _ref_encode(
        schema.fields, version, flexible, data.draw(_values(schema.fields, version, flexible)), b""
    )
    cut = data.draw(st.integers(0, len(raw) - 1))
    with pytest.raises((ValueError, struct.error)):
        schema.codec(version).decode(raw[:cut], 0)


@pytest.mark.parametrize(("record_type", "schema", "version"), CASES)
@_SETTINGS
@given(junk=st.binary(max_size=120))
def test_junk_raises_only_value_error_or_struct_error(
    record_type: RecordType, schema: Schema, version: int, junk: bytes
) -> None:
    with contextlib.suppress(ValueError, struct.error):  # UnicodeDecodeError is a ValueError
        schema.codec(version).decode(junk, 0)


def test_long_compact_lengths_and_arrays_use_multi_byte_varints() -> None:
    """Past 126 items or bytes a compact length takes two bytes: the decoder's
    one-byte fast path must hand over to the varint reader."""
    snapshot = share_state_records.SHARE_SNAPSHOT
    batch = share_state_records.PersisterStateBatch
    batches = tuple(batch(i, i, 0, 1) for i in range(300))
    values = share_state_records.ShareGroupOffset(1, 2, 3, 0, batches)
    raw = snapshot.value_bytes(0, values)
    assert raw[2 + 18 : 2 + 20] == UVARINT[301]
    assert snapshot.read_value(raw) == (0, values)
    member = consumer_group_records.MEMBER_METADATA
    long_id = "c" * 500
    key = member.key_bytes({"GroupId": long_id, "MemberId": "m"})
    assert member.read_key(key) == {"GroupId": long_id, "MemberId": "m"}
