"""The declaration side of a coordinator record schema: :class:`Field`, :class:`Struct`
and Kafka's version ranges.

They sit apart from ``record_schema`` (which compiles a :class:`~.record_schema.Schema`)
so that the code generator (``record_codegen``) can read them without importing its own
caller; ``record_schema`` re-exports them, and coordinators import them from there.
"""

from __future__ import annotations

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

    def in_version(self, version: int) -> bool:
        return version in parse_versions(self.versions)

    def nullable_in(self, version: int) -> bool:
        return version in parse_versions(self.nullable_versions)
