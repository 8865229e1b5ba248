"""Coordinator record schemas declared as data, compiled once per version.

Kafka generates its coordinator record classes (``OffsetCommitKey``,
``ConsumerGroupMemberMetadataValue``, ``TransactionLogValue``, ``ShareSnapshotValue``,
...) from JSON schemas: fields with a type, the versions they exist in, the versions in
which they may be null, tagged fields, and the versions that use the flexible encoding.
Here a coordinator declares the same facts as :class:`Schema` and :class:`Field`
values, and :meth:`Schema.codec` compiles them, once per version, into a
:class:`Codec` (an encoder and a decoder made of closures, one per field, cached).
Values are plain dicts keyed by the schema's field names; arrays are lists, structs
dicts. The coordinator maps them to and from its own dataclasses.

The encoding is Kafka's ``MessageUtil`` / generated ``write``/``read``:

- ints big-endian (``int8`` ... ``int64``, ``uint16``); ``uuid`` 16 bytes;
- ``string`` and ``bytes``: an int16 (string) or int32 (bytes) length, -1 for null;
  in a flexible version a compact length (unsigned varint of length + 1, 0 for null);
- arrays (``"[]int32"``, ``"[]string"``, or ``Field.of(..., struct)``): an int32
  count, -1 for null; compact (count + 1) in a flexible version;
- in a flexible version every struct ends with its tagged fields: their count, then
  for each present one (not None), in tag order, its tag, its size and its bytes.
  Tags a decoder does not know are skipped.

A record is Kafka's ``CoordinatorRecordSerde`` framing (:class:`RecordType`): the key
is an int16 -- the record type, which Kafka's older schemas call the key version --
then the key struct (never flexible); the value is an int16 version then the value
struct at that version; no value is a tombstone.

Where we differ from Kafka: a null where a non-nullable ``bytes`` is declared reads as
empty bytes (the classic group's subscription and assignment always read that way
here); any other null where none is allowed, a truncated record and an array longer
than its record are a ``ValueError`` (Kafka: its own exceptions). Field defaults are
only used for fields absent from a version, and a tagged field is written whenever it
is not None (Kafka: whenever it differs from its default, which for every tagged field
we declare is null).
"""

from __future__ import annotations

import functools
import struct
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from protocol.varint import UVARINT, read_uvarint

__all__ = ("Codec", "Field", "RecordType", "Schema", "Struct", "parse_versions")

Values = dict[str, Any]
Encoder = Callable[[bytearray, Any], None]
Decoder = Callable[[bytes, int], tuple[Any, int]]

_FIXED: dict[str, struct.Struct] = {
    "int8": struct.Struct(">b"),
    "int16": struct.Struct(">h"),
    "uint16": struct.Struct(">H"),
    "int32": struct.Struct(">i"),
    "int64": struct.Struct(">q"),
}
_INT16, _INT32 = _FIXED["int16"], _FIXED["int32"]


def parse_versions(spec: str) -> range:
    """Kafka's version ranges: ``"0+"``, ``"3"``, ``"0-3"``, ``"none"``."""
    if spec == "none":
        return range(0)
    if spec.endswith("+"):
        return range(int(spec[:-1]), 0x7FFF)
    low, _, high = spec.partition("-")
    return range(int(low), int(high or low) + 1)


@dataclass(frozen=True)
class Struct:
    """A struct type: its name (Kafka's) and fields."""

    name: str
    fields: tuple[Field, ...]


@dataclass(frozen=True)
class Field:
    """One field of a schema, as Kafka's JSON declares it.

    ``type`` is a primitive name (``int8``, ``int16``, ``uint16``, ``int32``,
    ``int64``, ``string``, ``bytes``, ``uuid``), an array of one (``"[]int32"``), or a
    :class:`Struct` (``array`` says whether it is an array of them).
    """

    name: str
    type: str | Struct
    versions: str = "0+"
    nullable_versions: str = "none"
    tag: int | None = None
    default: Any = None
    array: bool = False

    @classmethod
    def of(cls, name: str, struct_type: Struct, **kwargs: Any) -> Field:
        """An array of ``struct_type``."""
        return cls(name, struct_type, array=True, **kwargs)


@dataclass(frozen=True)
class Schema:
    """A record key's or value's schema: Kafka's ``validVersions``,
    ``flexibleVersions`` and fields."""

    name: str
    valid_versions: str
    flexible_versions: str
    fields: tuple[Field, ...]
    _codecs: dict[int, Codec] = field(default_factory=dict, init=False, compare=False, repr=False)

    @property
    def versions(self) -> range:
        return parse_versions(self.valid_versions)

    def codec(self, version: int) -> Codec:
        """The encoder and decoder of ``version``, compiled on first use."""
        found = self._codecs.get(version)
        if found is None:
            if version not in self.versions:
                raise ValueError(f"unknown {self.name} version {version}")
            flexible = version in parse_versions(self.flexible_versions)
            encode, decode = _struct_codec(self.fields, version, flexible)
            found = self._codecs[version] = Codec(self.name, version, encode, decode)
        return found


@dataclass(frozen=True)
class Codec:
    """One schema version, compiled: ``encode`` appends a dict's bytes to ``out``,
    ``decode`` reads a dict at ``pos`` and returns it with the position after it."""

    name: str
    version: int
    encode: Callable[[bytearray, Mapping[str, Any]], None]
    decode: Callable[[bytes, int], tuple[Values, int]]

    def to_bytes(self, values: Mapping[str, Any]) -> bytes:
        out = bytearray()
        self.encode(out, values)
        return bytes(out)


@dataclass(frozen=True)
class RecordType:
    """A coordinator record type: the int16 its key starts with, its key and value
    schemas (Kafka's ``CoordinatorRecordType``)."""

    type_id: int
    key: Schema
    value: Schema

    @functools.cached_property
    def _key_codec(self) -> Codec:
        return self.key.codec(0)

    def key_bytes(self, values: Mapping[str, Any]) -> bytes:
        out = bytearray(_INT16.pack(self.type_id))
        self._key_codec.encode(out, values)
        return bytes(out)

    def value_bytes(self, version: int, values: Mapping[str, Any]) -> bytes:
        out = bytearray(_INT16.pack(version))
        self.value.codec(version).encode(out, values)
        return bytes(out)

    def read_key(self, data: bytes) -> Values:
        """The key's fields (``data`` starts with this type's int16)."""
        return self._key_codec.decode(data, 2)[0]

    def read_value(self, data: bytes) -> tuple[int, Values]:
        """(version, fields) of a value; ValueError for a version not declared."""
        version = read_int16(data, 0)
        return version, self.value.codec(version).decode(data, 2)[0]


def read_int16(data: bytes, pos: int) -> int:
    """The int16 at ``pos`` (a key's record type, a value's version)."""
    return int(_INT16.unpack_from(data, pos)[0])


# ------------------------------------------------------------------ compiling
def _struct_codec(
    fields: tuple[Field, ...], version: int, flexible: bool
) -> tuple[
    Callable[[bytearray, Mapping[str, Any]], None], Callable[[bytes, int], tuple[Values, int]]
]:
    present = [f for f in fields if version in parse_versions(f.versions)]
    steps = _steps([f for f in present if f.tag is None], version, flexible)
    tagged = sorted((f for f in present if f.tag is not None and flexible), key=_tag_of)
    tags = {_tag_of(f): (f.name, *_field_codec(f, version, flexible)) for f in tagged}
    # fields this version lacks, and tagged fields until read: their defaults
    absent = {f.name: f.default for f in fields if f not in present or f.tag is not None}
    encoders = [enc for enc, _ in steps]
    decoders = [dec for _, dec in steps]

    def encode(out: bytearray, values: Mapping[str, Any]) -> None:
        for enc in encoders:
            enc(out, values)
        if flexible:
            _write_tagged(out, values, tags)

    def decode(data: bytes, pos: int) -> tuple[Values, int]:
        values: Values = dict(absent)
        for dec in decoders:
            pos = dec(data, pos, values)
        if flexible:
            pos = _read_tagged(data, pos, values, tags)
        return values, pos

    return encode, decode


StepEncoder = Callable[[bytearray, Mapping[str, Any]], None]
StepDecoder = Callable[[bytes, int, Values], int]


def _steps(
    fields: list[Field], version: int, flexible: bool
) -> list[tuple[StepEncoder, StepDecoder]]:
    """One step per field, but a run of fixed-width fields is one step: one
    ``struct.Struct`` packs or unpacks them all."""
    steps: list[tuple[StepEncoder, StepDecoder]] = []
    run: list[Field] = []
    for f in [*fields, None]:
        if f is not None and isinstance(f.type, str) and f.type in _FIXED:
            run.append(f)
            continue
        if run:
            steps.append(_run_step(tuple(x.name for x in run), [_FIXED[str(x.type)] for x in run]))
            run = []
        if f is not None:
            steps.append(_field_step(f.name, *_field_codec(f, version, flexible)))
    return steps


def _run_step(
    names: tuple[str, ...], packers: list[struct.Struct]
) -> tuple[StepEncoder, StepDecoder]:
    packer = struct.Struct(">" + "".join(p.format[1:] for p in packers))
    pack, unpack, size = packer.pack, packer.unpack_from, packer.size

    def encode(out: bytearray, values: Mapping[str, Any]) -> None:
        out += pack(*[values[name] for name in names])

    def decode(data: bytes, pos: int, values: Values) -> int:
        values.update(zip(names, unpack(data, pos), strict=True))
        return pos + size

    return encode, decode


def _field_step(name: str, enc: Encoder, dec: Decoder) -> tuple[StepEncoder, StepDecoder]:
    def encode(out: bytearray, values: Mapping[str, Any]) -> None:
        enc(out, values[name])

    def decode(data: bytes, pos: int, values: Values) -> int:
        values[name], pos = dec(data, pos)
        return pos

    return encode, decode


def _tag_of(f: Field) -> int:
    assert f.tag is not None
    return f.tag


def _write_tagged(
    out: bytearray, values: Mapping[str, Any], tags: dict[int, tuple[str, Encoder, Decoder]]
) -> None:
    written = [(tag, enc, values.get(name)) for tag, (name, enc, _) in tags.items()]
    written = [(tag, enc, value) for tag, enc, value in written if value is not None]
    out += UVARINT[len(written)]
    for tag, enc, value in written:
        body = bytearray()
        enc(body, value)
        out += UVARINT[tag]
        out += UVARINT[len(body)]
        out += body


def _read_tagged(
    data: bytes, pos: int, values: Values, tags: dict[int, tuple[str, Encoder, Decoder]]
) -> int:
    count, pos = _uvarint(data, pos)
    for _ in range(count):
        tag, pos = _uvarint(data, pos)
        size, pos = _uvarint(data, pos)
        end = pos + size
        if end > len(data):
            raise ValueError("truncated tagged field")
        known = tags.get(tag)
        if known is not None:
            name, _, dec = known
            values[name], after = dec(data[:end], pos)
            if after != end:
                raise ValueError(f"bad size of tagged field {name}")
        pos = end
    return pos


def _uvarint(data: bytes, pos: int) -> tuple[int, int]:
    return read_uvarint(data, pos, ValueError)


def _field_codec(f: Field, version: int, flexible: bool) -> tuple[Encoder, Decoder]:
    nullable = version in parse_versions(f.nullable_versions)
    if isinstance(f.type, Struct):
        encode, decode = _struct_codec(f.type.fields, version, flexible)
        if not f.array:
            return encode, decode
        return _array_codec(encode, decode, flexible, nullable, f.name)
    if f.type.startswith("[]"):
        enc, dec = _primitive_codec(f.type[2:], flexible, nullable=False)
        return _array_codec(enc, dec, flexible, nullable, f.name)
    return _primitive_codec(f.type, flexible, nullable)


def _primitive_codec(type_name: str, flexible: bool, nullable: bool) -> tuple[Encoder, Decoder]:
    fixed = _FIXED.get(type_name)
    if fixed is not None:
        return _fixed_codec(fixed)
    if type_name == "uuid":
        return _uuid_encode, _uuid_decode
    if type_name in ("string", "bytes"):
        return _sized_codec(type_name == "string", flexible, nullable)
    raise ValueError(f"unknown field type {type_name}")


def _fixed_codec(packer: struct.Struct) -> tuple[Encoder, Decoder]:
    pack, unpack, size = packer.pack, packer.unpack_from, packer.size

    def encode(out: bytearray, value: Any) -> None:
        out += pack(value)

    def decode(data: bytes, pos: int) -> tuple[Any, int]:
        return unpack(data, pos)[0], pos + size

    return encode, decode


def _uuid_encode(out: bytearray, value: Any) -> None:
    out += value.bytes


def _uuid_decode(data: bytes, pos: int) -> tuple[Any, int]:
    return uuid.UUID(bytes=_take(data, pos, 16)), pos + 16


def _take(data: bytes, pos: int, n: int) -> bytes:
    raw = data[pos : pos + n]
    if len(raw) != n:
        raise ValueError("truncated record")
    return bytes(raw)


def _sized_codec(is_string: bool, flexible: bool, nullable: bool) -> tuple[Encoder, Decoder]:
    """Strings and bytes: legacy (int16 / int32 length) or compact lengths."""
    length = _INT16 if is_string else _INT32

    def encode(out: bytearray, value: Any) -> None:
        if value is None:
            out += UVARINT[0] if flexible else length.pack(-1)
            return
        raw = value.encode("utf-8") if is_string else value
        out += UVARINT[len(raw) + 1] if flexible else length.pack(len(raw))
        out += raw

    def decode(data: bytes, pos: int) -> tuple[Any, int]:
        if flexible:
            n, pos = _uvarint(data, pos)
            n -= 1
        else:
            n = length.unpack_from(data, pos)[0]
            pos += length.size
        if n < 0:
            if nullable:
                return None, pos
            if not is_string:
                return b"", pos
            raise ValueError("null where a string is required")
        raw = _take(data, pos, n)
        return (raw.decode("utf-8") if is_string else raw), pos + n

    return encode, decode


def _array_codec(
    item_encode: Encoder, item_decode: Decoder, flexible: bool, nullable: bool, name: str
) -> tuple[Encoder, Decoder]:
    def encode(out: bytearray, value: Any) -> None:
        if value is None:
            out += UVARINT[0] if flexible else _INT32.pack(-1)
            return
        out += UVARINT[len(value) + 1] if flexible else _INT32.pack(len(value))
        for item in value:
            item_encode(out, item)

    def decode(data: bytes, pos: int) -> tuple[Any, int]:
        if flexible:
            n, pos = _uvarint(data, pos)
            n -= 1
        else:
            n = _INT32.unpack_from(data, pos)[0]
            pos += 4
        if n < 0:
            if nullable:
                return None, pos
            raise ValueError(f"null where an array is required ({name})")
        if n > len(data) - pos:
            raise ValueError(f"array {name} longer than the record")
        items = []
        for _ in range(n):
            item, pos = item_decode(data, pos)
            items.append(item)
        return items, pos

    return encode, decode
