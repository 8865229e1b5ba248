"""Coordinator record schemas declared as data, compiled once per version.

Kafka generates its coordinator record classes (``OffsetCommitKey``,
``ConsumerGroupMemberMetadataValue``, ``TransactionLogValue``, ``ShareSnapshotValue``,
...) from JSON schemas: fields with a type, the versions they exist in, the versions in
which they may be null, tagged fields, and the versions that use the flexible encoding.
Here a coordinator declares the same facts as :class:`Schema` and :class:`Field`
values, and :meth:`Schema.codec` compiles them, once per version, into a
:class:`Codec`: ``record_codegen`` writes the straight-line Python source of its
encoder and decoder (every nested struct inlined, runs of fixed-width fields packed by
one ``struct``), as ``protocol.fast_writers`` does for kio's messages, and the result
is cached. The declared schema stays the only statement of the format; ``Codec.source``
shows what was generated from it. Values are plain dicts keyed by the schema's field
names; arrays are lists, structs dicts -- or, for a schema or struct declared with a
``make`` (a class), objects of it, their fields read as attributes and their arrays
tuples: the coordinator's own dataclasses then go in and come out with no dict between
(the share coordinator's records do; the others still map dicts to their dataclasses).

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
here); any other null where none is allowed and an array longer than its record are a
``ValueError``, a truncated record a ``ValueError`` or a ``struct.error`` (Kafka: its
own exceptions). Field defaults are
only used for fields absent from a version, and a tagged field is written whenever it
is not None (Kafka: whenever it differs from its default, which for every tagged field
we declare is null).
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from broker.coordinator.record_codegen import compile_codec
from broker.coordinator.record_fields import Field, Struct, parse_versions

__all__ = ("Codec", "Field", "RecordType", "Schema", "Struct", "parse_versions")

Values = dict[str, Any]
Record = Mapping[str, Any] | Any
"""What an encoder takes: a dict of the field names, or an object of the ``make``."""

_read_int16 = struct.Struct(">h").unpack_from


@dataclass(frozen=True)
class Schema:
    """A record key's or value's schema: Kafka's ``validVersions``,
    ``flexibleVersions`` and fields."""

    name: str
    valid_versions: str
    flexible_versions: str
    fields: tuple[Field, ...]
    make: Callable[..., Any] | None = None
    """As :attr:`Struct.make`: the class whose objects are this schema's values
    (None: dicts)."""
    _codecs: dict[int, Codec] = field(default_factory=dict, init=False, compare=False, repr=False)

    @functools.cached_property
    def versions(self) -> range:
        """The versions declared (parsed once: every value a coordinator reads asks)."""
        return parse_versions(self.valid_versions)

    def codec(self, version: int) -> Codec:
        """The encoder and decoder of ``version``, compiled on first use."""
        found = self._codecs.get(version)
        if found is None:
            if version not in self.versions:
                raise ValueError(f"unknown {self.name} version {version}")
            flexible = version in parse_versions(self.flexible_versions)
            compiled = compile_codec(self.name, self.fields, version, flexible, self.make)
            found = self._codecs[version] = Codec(
                self.name,
                version,
                compiled.encode,
                compiled.decode,
                compiled.framed,
                compiled.source,
            )
        return found


@dataclass(frozen=True)
class Codec:
    """One schema version, compiled: ``encode`` appends a value's bytes to ``out``,
    ``decode`` reads a value at ``pos`` and returns it with the position after it (a
    dict, or an object of the schema's ``make``)."""

    name: str
    version: int
    encode: Callable[[bytearray, Record], None]
    decode: Callable[[bytes, int], tuple[Any, int]]
    framed: Callable[[int, Record], bytes]
    """``framed(head, values)``: an int16 (a record type, a value version), then the
    encoding, as bytes."""
    source: str = field(default="", compare=False, repr=False)
    """The generated source of ``encode``, ``framed`` and ``decode``."""

    def to_bytes(self, values: Record) -> bytes:
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

    def key_bytes(self, values: Record) -> bytes:
        return self._key_codec.framed(self.type_id, values)

    def value_bytes(self, version: int, values: Record) -> bytes:
        return self.value.codec(version).framed(version, values)

    def read_key(self, data: bytes) -> Any:
        """The key's fields, a dict or an object of its ``make`` (``data`` starts with
        this type's int16)."""
        return self._key_codec.decode(data, 2)[0]

    def read_value(self, data: bytes) -> tuple[int, Any]:
        """(version, fields) of a value; ValueError for a version not declared."""
        version: int = _read_int16(data, 0)[0]
        return version, self.value.codec(version).decode(data, 2)[0]


def read_int16(data: bytes, pos: int) -> int:
    """The int16 at ``pos`` (a key's record type, a value's version)."""
    value: int = _read_int16(data, pos)[0]
    return value
