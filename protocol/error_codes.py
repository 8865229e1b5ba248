"""Every error code in a response, in order: one fast walk per response, compiled per class.

The broker's capture writes the error codes of each response it sends and the replay
job records those of each response it gets, so both sides must extract them the same
way: hence one function here, in protocol/, which both may import.

Why compiled: the capture runs this on every response on the broker's event loop. A
generic ``dataclasses.fields`` walk with ``typing`` introspection costs tens of
microseconds per Fetch response; instead, the first time a response class is seen its
fields are inspected once and turned into a tuple of small steps (read this error-code
field; walk this nested entity; walk each element of this array of entities). Fields
that can hold no error code (scalars, arrays of scalars, entities without any error
code below them) get no step at all, so a Produce response costs a few attribute reads
per partition. An error code is any field kio types as ``error_code`` (Kafka's
``errorCode`` fields, whatever their name), read as a plain ``int``.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from typing import Any, Final

__all__ = ["error_codes", "error_codes_walker"]

_Walk = Callable[[Any, list[int]], None]

_walkers: dict[type, _Walk | None] = {}
_NO_STEPS: Final[tuple[()]] = ()
_CODE: Final = 0
_ENTITY: Final = 1
_ARRAY: Final = 2


def _unwrap(tp: Any) -> tuple[Any, bool]:
    """(type without ``| None``, whether it is a ``tuple[X, ...]``)."""
    if typing.get_origin(tp) in (types.UnionType, typing.Union):
        members = [arg for arg in typing.get_args(tp) if arg is not type(None)]
        tp = members[0] if len(members) == 1 else tp
    if typing.get_origin(tp) is tuple:
        args = typing.get_args(tp)
        return (args[0] if args else Any), True
    return tp, False


def _compile(cls: type) -> _Walk | None:
    """A walker for ``cls``, or None when no error code can occur in it."""
    if cls in _walkers:
        return _walkers[cls]
    _walkers[cls] = None  # guards recursion; kio schemas are trees, so never needed
    # Schema order: a response's own code comes before its partitions' codes.
    steps: list[tuple[int, str, _Walk | None]] = []
    for field in dataclasses.fields(cls):
        if field.metadata.get("kafka_type") == "error_code":
            steps.append((_CODE, field.name, None))
            continue
        inner, is_array = _unwrap(field.type)
        if not (isinstance(inner, type) and dataclasses.is_dataclass(inner)):
            continue
        sub = _compile(inner)
        if sub is not None:
            steps.append((_ARRAY if is_array else _ENTITY, field.name, sub))
    if not steps:
        return None
    compiled = tuple(steps)

    def walk(obj: Any, out: list[int]) -> None:
        for kind, name, sub in compiled:
            value = getattr(obj, name)
            if kind == _CODE:
                out.append(int(value))
            elif value is None:
                continue
            elif kind == _ENTITY:
                sub(value, out)  # type: ignore[misc]
            else:
                for element in value:
                    sub(element, out)  # type: ignore[misc]

    _walkers[cls] = walk
    return walk


def error_codes_walker(cls: type) -> _Walk | None:
    """The compiled walker of a kio entity class (None: it has no error code fields)."""
    walker = _walkers.get(cls, _NO_STEPS)
    if walker is _NO_STEPS:
        return _compile(cls)
    return walker  # type: ignore[return-value]


def error_codes(payload: object) -> list[int]:
    """Every error code field of a kio entity (a response), depth first in schema order.

    ``None`` (no response, as for an acks=0 produce) gives an empty list.
    """
    if payload is None:
        return []
    cls = type(payload)
    walker = _walkers.get(cls, _NO_STEPS)
    if walker is _NO_STEPS:
        walker = _compile(cls)
    out: list[int] = []
    if walker is not None:
        walker(payload, out)  # type: ignore[operator]
    return out
