"""kio message instances with every field filled (or every nullable field null)."""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
import uuid
from typing import Any

from protocol.builders import Builder
from protocol.errors import ErrorCode

_INT_TYPES = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"}


def _primitive(kafka_type: str, name: str, typed: bool) -> Any:
    """A non-default value, so tagged fields are really written."""
    seed = sum(map(ord, name)) % 100 + 1
    if kafka_type in _INT_TYPES:
        return seed
    if kafka_type == "string":
        return f"s-{name}"
    if kafka_type in ("bytes", "records"):
        return f"b-{name}".encode()
    if kafka_type == "bool":
        return True
    if kafka_type == "uuid":
        return uuid.UUID(int=seed)
    if kafka_type == "float64":
        return 1.5
    if kafka_type == "error_code":
        return ErrorCode.corrupt_message if typed else 2
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return datetime.timedelta(milliseconds=1500) if typed else 1500
    if kafka_type == "datetime_i64":
        stamp = 1_700_000_000_123
        return datetime.datetime.fromtimestamp(stamp / 1000, datetime.UTC) if typed else stamp
    raise AssertionError(f"no sample for {kafka_type}")


def _strip_optional(tp: Any) -> tuple[Any, bool]:
    if typing.get_origin(tp) in (types.UnionType, typing.Union):
        (inner,) = [arg for arg in typing.get_args(tp) if arg is not type(None)]
        return inner, True
    return tp, False


def sample(builder: Builder, cls: type[Any], sparse: bool = False) -> Any:
    """Fill ``cls`` through the builder's factories (ints for typed scalars, so the
    builder's conversions are exercised too). Dense: every field gets a non-default
    value, so tagged fields are written. Sparse: nullable fields are null and arrays
    empty, so the null encodings are exercised."""
    fields: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        tp, nullable = _strip_optional(f.type)
        kafka_type: str = f.metadata.get("kafka_type", "")
        if sparse and nullable and "tag" not in f.metadata:
            fields[f.name] = None
        elif typing.get_origin(tp) is tuple:
            inner = typing.get_args(tp)[0]
            if sparse:
                fields[f.name] = ()
            elif isinstance(inner, type) and dataclasses.is_dataclass(inner):
                fields[f.name] = (sample(builder, inner),)
            else:
                value = _primitive(kafka_type, f.name, typed=True)
                fields[f.name] = (value, value)
        elif dataclasses.is_dataclass(tp):
            fields[f.name] = sample(builder, tp, sparse)  # type: ignore[arg-type]
        else:
            fields[f.name] = _primitive(kafka_type, f.name, typed=False)
    factory = getattr(builder, cls.__name__) if cls.__name__ in builder.class_names else cls
    return factory(**fields)
