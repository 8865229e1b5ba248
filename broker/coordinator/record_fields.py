"""The declaration side of a coordinator record schema: :class:`Field`, :class:`Struct`
and Kafka's version ranges.

They sit apart from ``record_schema`` (which compiles a :class:`~.record_schema.Schema`)
so that the code generator (``record_codegen``) can read them without importing its own
caller; ``record_schema`` re-exports them, and coordinators import them from there.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ("FIXED_CODES", "Field", "Struct", "parse_versions")

FIXED_CODES: dict[str, str] = {
    "int8": "b",
    "int16": "h",
    "uint16": "H",
    "int32": "i",
    "int64": "q",
}
"""The fixed-width primitive types and their big-endian ``struct`` codes."""


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
    """A struct type: its name (Kafka's) and fields.

    Its values are dicts keyed by the field names, unless ``make`` is given: then they
    are objects -- the encoder reads each field as the attribute
    :attr:`Field.attribute`, the decoder builds the struct as ``make(**{attribute:
    value})`` (every declared field; one a version lacks, or a tagged field not
    present, at its default) and its arrays as tuples. A coordinator that keeps its
    records as (frozen) dataclasses names the class, and no dict is built on the way
    in or out (Kafka's generated classes are the records themselves).
    """

    name: str
    fields: tuple[Field, ...]
    make: Callable[..., Any] | None = None


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
    attr: str | None = None
    """The attribute that holds the field in a struct made by ``Struct.make``
    (default: the name in snake case, ``FirstOffset`` -> ``first_offset``)."""

    @classmethod
    def of(cls, name: str, struct_type: Struct, **kwargs: Any) -> Field:
        """An array of ``struct_type``."""
        return cls(name, struct_type, array=True, **kwargs)

    @property
    def attribute(self) -> str:
        """The field's attribute in an object struct (``attr``, else snake case)."""
        return self.attr or _snake_case(self.name)

    def in_version(self, version: int) -> bool:
        return version in parse_versions(self.versions)

    def nullable_in(self, version: int) -> bool:
        return version in parse_versions(self.nullable_versions)


def _snake_case(name: str) -> str:
    """``FirstOffset`` -> ``first_offset``, ``TopicId`` -> ``topic_id``."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()
