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
null where the field is nullable), and error codes. Those conversions never raise:
values past what a ``datetime``/``timedelta`` holds (years 1..9999, 999999999 days)
are clamped to its limits, which is what goes on the wire (``_timestamp``).

Every response of every request is built here, so a factory is generated code, as
``fast_writers`` does for encoding: per kio class, on first use, the source of one
straight-line function is written from the dataclass fields, compiled once and cached
by class (``factory_source(cls)`` shows it). Its keyword-only parameters are the
class's fields -- a sentinel default for a required one, the schema default for the
others -- and ``**_others`` swallows the fields the version lacks. The ``int``
conversions run only when ``value.__class__ is int``. kio's classes are frozen slotted
dataclasses whose ``__init__`` only assigns the fields, so the function allocates the
instance with ``object.__new__`` and stores each field through its slot descriptor,
which costs less than the constructor itself; a class that is not of that shape (a
``__post_init__``, a field outside ``__init__``, no slots) is built by calling it.
"""

from __future__ import annotations

import dataclasses
import datetime
import keyword
import linecache
import types
import typing
from collections.abc import Callable
from functools import cache
from typing import Any, Final, NoReturn

from kio.index import load_payload_module
from kio.schema.errors import ErrorCode
from kio.serial.readers import tz_aware_from_i64
from kio.static.constants import EntityType
from kio.static.primitive import i64

from protocol.api_registry import Kind, request_class, response_class

__all__ = ("Builder", "factory_for", "factory_source", "request_builder", "response_builder")

Factory = Callable[..., Any]


class _Sentinel:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


_REQUIRED: Final = _Sentinel("<required>")
"""The default of a required field's parameter: left out, it raises ``TypeError``."""
_FROM_FACTORY: Final = _Sentinel("<default_factory>")
"""The default of a parameter whose field has a ``default_factory`` (called per call)."""


class _MillisTable(dict[int, datetime.timedelta]):
    """``_MS[n]``: ``timedelta(milliseconds=n)``, kept for the first values seen (the
    same few -- a zero throttle time above all -- come back on every response)."""

    def __missing__(self, value: int) -> datetime.timedelta:
        # clamped to what a timedelta holds, as timestamps are (see ``_timestamp``)
        delta = datetime.timedelta(
            milliseconds=max(-MAX_TIMEDELTA_MS, min(value, MAX_TIMEDELTA_MS))
        )
        if len(self) < 1024:
            self[value] = delta
        return delta


_MS: Final = _MillisTable()


#: The epoch milliseconds a ``datetime`` can hold (kio's timestamp fields are datetimes):
#: 0001-01-01T00:00:00Z and 9999-12-31T23:59:59.999Z.
MIN_DATETIME_MS: Final = -62_135_596_800_000
MAX_DATETIME_MS: Final = 253_402_300_799_999
#: The milliseconds a ``timedelta`` can hold (999999999 days).
MAX_TIMEDELTA_MS: Final = 86_399_999_999_999_999


def _timestamp(value: int) -> datetime.datetime:
    """Epoch ms as kio's datetime, clamped to the years 1..9999 a datetime holds.

    Kafka's timestamp fields are int64s, and a client may put any of them into a record
    batch that comes back in an answer (a duplicate batch's timestamp as its produce
    response's log append time, with ``message.timestamp.after.max.ms`` at
    Long.MAX_VALUE). The wire then carries the nearest value a datetime can hold --
    never an exception; kio's own reader refuses those values anyway.
    """
    if not MIN_DATETIME_MS <= value <= MAX_DATETIME_MS:
        value = MIN_DATETIME_MS if value < MIN_DATETIME_MS else MAX_DATETIME_MS
    return tz_aware_from_i64(i64(value))


def _nullable_timestamp(value: int) -> datetime.datetime | None:
    return None if value == -1 else _timestamp(value)


_ERROR_CODES: Final[dict[int, ErrorCode]] = {int(code): code for code in ErrorCode}


def _bad_error_code(value: int) -> NoReturn:
    raise ValueError(f"{value} is not a Kafka error code") from None


def _raise_missing(cls: type, **required: object) -> NoReturn:
    missing = [name for name, value in required.items() if value is _REQUIRED]
    raise TypeError(
        f"{cls.__module__}.{cls.__qualname__}: missing required field(s) {', '.join(missing)}"
    )


def _is_nullable(tp: object) -> bool:
    origin = typing.get_origin(tp)
    return origin in (types.UnionType, typing.Union) and type(None) in typing.get_args(tp)


def _has_default(field: dataclasses.Field[Any]) -> bool:
    return (
        field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING
    )


def _conversion(field: dataclasses.Field[Any], v: str) -> list[str]:
    """The statements converting parameter ``v`` when it is a plain ``int``."""
    kafka_type = field.metadata.get("kafka_type")
    if typing.get_origin(field.type) is tuple:
        return []
    if kafka_type == "error_code":
        # A dict hit is ~15x cheaper than the enum's own lookup; try costs nothing in 3.11.
        return [
            f"if {v}.__class__ is int:",
            "    try:",
            f"        {v} = _EC[{v}]",
            "    except KeyError:",
            f"        _bad_error_code({v})",
        ]
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return [f"if {v}.__class__ is int: {v} = _MS[{v}]"]
    if kafka_type == "datetime_i64":
        convert = "_nullable_timestamp" if _is_nullable(field.type) else "_timestamp"
        return [f"if {v}.__class__ is int: {v} = {convert}({v})"]
    return []


def _slotted(cls: type, fields: tuple[dataclasses.Field[Any], ...]) -> bool:
    """Whether an instance may be made by ``object.__new__`` and a slot store per field
    with the same result as ``cls(**fields)``: a frozen slotted dataclass, directly on
    ``object``, whose ``__init__`` is the one dataclasses generated and only assigns
    (no ``__post_init__``, no ``InitVar``, no field left out of ``__init__``)."""
    params = getattr(cls, "__dataclass_params__", None)
    init = cls.__dict__.get("__init__")
    code = getattr(init, "__code__", None)
    return (
        params is not None
        and params.frozen
        and params.init
        and cls.__mro__ == (cls, object)
        and "__new__" not in cls.__dict__
        and not hasattr(cls, "__post_init__")
        and code is not None
        and code.co_filename == "<string>"  # dataclasses' generated source
        and code.co_kwonlyargcount + code.co_argcount - 1 == len(fields)
        and all(
            f.init and isinstance(cls.__dict__.get(f.name), types.MemberDescriptorType)
            for f in fields
        )
    )


def _generate(cls: type) -> tuple[str, dict[str, Any]]:
    all_fields = dataclasses.fields(cls)
    slotted = _slotted(cls, all_fields)
    # A field outside __init__ is not the caller's to set: passed, it is dropped.
    fields = [f for f in all_fields if f.init]
    namespace: dict[str, Any] = {
        "_C": cls,
        "_R": _REQUIRED,
        "_F": _FROM_FACTORY,
        "_EC": _ERROR_CODES,
        "_MS": _MS,
        "_new": object.__new__,
        "_bad_error_code": _bad_error_code,
        "_raise_missing": _raise_missing,
        "_timestamp": _timestamp,
        "_nullable_timestamp": _nullable_timestamp,
    }
    for f in fields:
        if not f.name.isidentifier() or keyword.iskeyword(f.name) or f.name.startswith("_"):
            raise ValueError(f"{cls.__qualname__}: field name {f.name!r} is not supported")
    params: list[str] = []
    body: list[str] = []
    required: list[str] = []
    factories: list[str] = []
    for f in fields:
        name = f.name
        if f.default is not dataclasses.MISSING:
            namespace[f"_D_{name}"] = f.default
            params.append(f"{name}=_D_{name}")
        elif f.default_factory is not dataclasses.MISSING:
            namespace[f"_DF_{name}"] = f.default_factory
            params.append(f"{name}=_F")
            factories.append(name)
        else:
            params.append(f"{name}=_R")
            required.append(name)
        # A tagged field is optional on the wire; None for one that kio does not type
        # as nullable means "leave it out" (take the default), not a value to encode.
        if "tag" in f.metadata and not _is_nullable(f.type) and _has_default(f):
            default = f"_D_{name}" if f.default is not dataclasses.MISSING else "_F"
            body.append(f"if {name} is None: {name} = {default}")
    for f in fields:
        body.extend(_conversion(f, f.name))
    if required:
        body.append(f"if {' or '.join(f'{name} is _R' for name in required)}:")
        body.append(f"    _raise_missing(_C, {', '.join(f'{n}={n}' for n in required)})")
    for name in factories:
        body.append(f"if {name} is _F: {name} = _DF_{name}()")
    if slotted:
        body.append("o = _new(_C)")
        for f in fields:
            namespace[f"_S_{f.name}"] = cls.__dict__[f.name].__set__
            body.append(f"_S_{f.name}(o, {f.name})")
        body.append("return o")
    else:
        body.append(f"return _C({', '.join(f'{f.name}={f.name}' for f in fields)})")
    signature = ", ".join(["*", *params, "**_others"] if params else ["**_others"])
    lines = [f"def {cls.__name__}({signature}):", *(f"    {line}" for line in body)]
    return "\n".join(lines) + "\n", namespace


_factories: dict[type, Factory] = {}


def factory_source(cls: type) -> str:
    """The generated source of ``cls``'s factory (a function named after the class)."""
    return _generate(cls)[0]


def factory_for(cls: type) -> Factory:
    """The compiled factory of ``cls`` (generated and compiled on first use)."""
    factory = _factories.get(cls)
    if factory is None:
        source, namespace = _generate(cls)
        filename = f"<factory {cls.__module__}.{cls.__qualname__}>"
        # Registered so that a traceback through a factory shows its lines.
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        exec(compile(source, filename, "exec"), namespace)
        factory = _factories[cls] = namespace[cls.__name__]
    return factory


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

    def __getattr__(self, name: str) -> Factory:
        # Only called when normal lookup fails, i.e. the first time for each class;
        # the factory is then stored on the instance.
        classes = self.__dict__.get("_classes")
        if classes is None or name not in classes:
            raise AttributeError(
                f"{self.kind} v{self.__dict__.get('api_version')} of api key "
                f"{self.__dict__.get('api_key')} has no class {name!r}; it has "
                f"{sorted(classes or ())}"
            )
        factory = factory_for(classes[name])
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
