"""Version-agnostic construction of kio messages.

kio has one frozen dataclass per API *version*, and the versions differ by a field here
and there. A handler that answers Produce v3..v13 should not need eleven branches, so
it writes the newest shape once and lets the builder fit it to the version asked:

    b = response_builder(0, api_version)
    b.ProduceResponse(
        responses=(b.TopicProduceResponse(name="t", partition_responses=(...)),),
        throttle_time=0,
    )

A factory accepts a *superset* of fields: a field the version does not have is dropped,
a field left out takes its schema default (so does ``None`` for a tagged field that
is not nullable: tagged fields are optional on the wire), and a required field left out
raises
``TypeError`` naming the class and the field. For handler convenience plain ``int``s
are accepted for the typed fields Kafka sends as integers -- milliseconds for
``i32Timedelta``/``i64Timedelta`` fields, epoch milliseconds for timestamps (``-1`` means
null where the field is nullable), and error codes.

Per-class field metadata is computed once, so a call costs a key filter, a few
conversions and the dataclass constructor.
"""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
from collections.abc import Callable
from functools import cache
from typing import Any, Final

from kio.index import load_payload_module
from kio.schema.errors import ErrorCode
from kio.serial.readers import tz_aware_from_i64
from kio.static.constants import EntityType
from kio.static.primitive import i64

from protocol.api_registry import Kind, request_class, response_class

__all__ = ("Builder", "request_builder", "response_builder")

_Convert = Callable[[int], object]


def _millis(value: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=value)


def _timestamp(value: int) -> datetime.datetime:
    return tz_aware_from_i64(i64(value))


def _nullable_timestamp(value: int) -> datetime.datetime | None:
    return None if value == -1 else tz_aware_from_i64(i64(value))


_ERROR_CODES: Final[dict[int, ErrorCode]] = {int(code): code for code in ErrorCode}


def _error_code(value: int) -> ErrorCode:
    # A dict hit is ~15x cheaper than the enum's own lookup, and this runs per partition.
    try:
        return _ERROR_CODES[value]
    except KeyError:
        raise ValueError(f"{value} is not a Kafka error code") from None


_CONVERTERS: Final[dict[str, _Convert]] = {
    "timedelta_i32": _millis,
    "timedelta_i64": _millis,
    "error_code": _error_code,
    "datetime_i64": _timestamp,
}


def _is_nullable(tp: object) -> bool:
    origin = typing.get_origin(tp)
    return origin in (types.UnionType, typing.Union) and type(None) in typing.get_args(tp)


class _Factory:
    """Builds one kio class from a superset of its fields."""

    __slots__ = ("absent_if_none", "cls", "converters", "field_names", "required")

    def __init__(self, cls: type[Any]) -> None:
        self.cls = cls
        fields = dataclasses.fields(cls)
        self.field_names: frozenset[str] = frozenset(f.name for f in fields)
        self.required: tuple[str, ...] = tuple(
            f.name
            for f in fields
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        )
        converters: list[tuple[str, _Convert]] = []
        for f in fields:
            kafka_type = f.metadata.get("kafka_type")
            if typing.get_origin(f.type) is tuple or kafka_type not in _CONVERTERS:
                continue
            convert = _CONVERTERS[kafka_type]
            if kafka_type == "datetime_i64" and _is_nullable(f.type):
                convert = _nullable_timestamp
            converters.append((f.name, convert))
        self.converters: tuple[tuple[str, _Convert], ...] = tuple(converters)
        # A tagged field is optional on the wire; None for one that kio does not type
        # as nullable means "leave it out" (take the default), not a value to encode.
        self.absent_if_none: tuple[str, ...] = tuple(
            f.name
            for f in fields
            if "tag" in f.metadata
            and not _is_nullable(f.type)
            and (
                f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
            )
        )

    def __call__(self, **fields: Any) -> Any:
        if not fields.keys() <= self.field_names:
            names = self.field_names
            fields = {name: value for name, value in fields.items() if name in names}
        for name in self.absent_if_none:
            if name in fields and fields[name] is None:
                del fields[name]
        get = fields.get
        for name, convert in self.converters:
            value = get(name)
            if value.__class__ is int:
                fields[name] = convert(value)
        try:
            return self.cls(**fields)
        except TypeError:
            missing = [name for name in self.required if name not in fields]
            if missing:
                raise TypeError(
                    f"{self.cls.__module__}.{self.cls.__qualname__}: missing required "
                    f"field(s) {', '.join(missing)}"
                ) from None
            raise

    def __repr__(self) -> str:
        return f"<factory of {self.cls.__module__}.{self.cls.__qualname__}>"


class Builder:
    """Factories for every message class of one API version (``b.<ClassName>(...)``).

    Attribute access returns a cached factory; an unknown class name raises
    ``AttributeError`` listing the classes that version has.
    """

    def __init__(self, api_key: int, api_version: int, kind: Kind) -> None:
        # Validates the key and version (UnsupportedApiKey / UnsupportedVersion).
        payload = (
            request_class(api_key, api_version)
            if kind == "request"
            else response_class(api_key, api_version)
        )
        self.api_key = api_key
        self.api_version = api_version
        self.kind: Kind = kind
        self.payload_class: type[Any] = payload
        module = load_payload_module(
            api_key, api_version, EntityType.request if kind == "request" else EntityType.response
        )
        self._classes: dict[str, type[Any]] = {
            name: obj
            for name, obj in vars(module).items()
            if isinstance(obj, type)
            and dataclasses.is_dataclass(obj)
            and obj.__module__ == module.__name__
        }

    @property
    def class_names(self) -> list[str]:
        """The message classes of this version, payload and nested."""
        return sorted(self._classes)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        # Only called when normal lookup fails, i.e. the first time for each class;
        # the factory is then stored on the instance.
        classes = self.__dict__.get("_classes")
        if classes is None or name not in classes:
            raise AttributeError(
                f"{self.kind} v{self.__dict__.get('api_version')} of api key "
                f"{self.__dict__.get('api_key')} has no class {name!r}; it has "
                f"{sorted(classes or ())}"
            )
        factory = _Factory(classes[name])
        setattr(self, name, factory)
        return factory

    def __dir__(self) -> list[str]:
        return [*super().__dir__(), *self._classes]

    def __repr__(self) -> str:
        return f"<Builder {self.kind} api_key={self.api_key} v{self.api_version}>"


@cache
def response_builder(api_key: int, api_version: int) -> Builder:
    """The (shared, cached) builder of that API version's response classes."""
    return Builder(api_key, api_version, "response")


@cache
def request_builder(api_key: int, api_version: int) -> Builder:
    """The (shared, cached) builder of that API version's request classes."""
    return Builder(api_key, api_version, "request")
