"""protocol.builders' generated factories, for every class of every API version kio has.

Each request and response class, payload and nested, built through its factory must
equal the class's own constructor given the same fields; an omitted field takes its
schema default; an omitted required field raises ``TypeError`` naming the class and
the field; unknown fields are dropped; ``None`` for a non-nullable tagged field means
the default; plain ``int``s become kio's types. Instances made without ``__init__``
(``object.__new__`` and slot stores) must also compare, hash, print, copy and encode
as the constructor's do.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime
import io
import pickle
import re
import types
import typing
from collections.abc import Iterator
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer

from protocol.api_registry import KIO_VERSIONS
from protocol.builders import (
    Builder,
    factory_for,
    factory_source,
    request_builder,
    response_builder,
)
from testkit.kio_samples import sample

# One case per API (every version, both directions inside): some 90 cases, not 700.
APIS = [pytest.param(key, id=spec.name) for key, spec in KIO_VERSIONS.items()]


class Marker:
    """A value no conversion touches, distinct per field."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"Marker({self.name})"


def _builders(api_key: int) -> Iterator[Builder]:
    spec = KIO_VERSIONS[api_key]
    for version in range(spec.min_version, spec.max_version + 1):
        yield response_builder(api_key, version)
        yield request_builder(api_key, version)


def _classes(api_key: int) -> Iterator[tuple[type[Any], Any]]:
    for b in _builders(api_key):
        for name in b.class_names:
            yield b._classes[name], getattr(b, name)


def _nullable(tp: object) -> bool:
    return typing.get_origin(tp) in (types.UnionType, typing.Union) and type(
        None
    ) in typing.get_args(tp)


def _default(field: dataclasses.Field[Any]) -> Any:
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return field.default


def _required(cls: type[Any]) -> list[str]:
    return [
        f.name
        for f in dataclasses.fields(cls)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]


def _same(built: Any, direct: Any) -> None:
    assert type(built) is type(direct)
    assert built == direct, type(direct)
    assert hash(built) == hash(direct)
    assert repr(built) == repr(direct)
    for f in dataclasses.fields(direct):
        assert getattr(built, f.name) is getattr(direct, f.name), f.name


@pytest.mark.parametrize("api_key", APIS)
def test_every_class_equals_its_constructor(api_key: int) -> None:
    for cls, factory in _classes(api_key):
        assert factory is factory_for(cls)
        # Every kio class takes the fast path (no __init__); a change in kio shows here.
        assert "_new(_C)" in factory_source(cls), cls
        fields = dataclasses.fields(cls)
        required = _required(cls)
        given = {f.name: Marker(f.name) for f in fields}
        full = factory(**given, no_such_field=1, _others=2, self=3)  # extras: dropped
        _same(full, cls(**given))
        for f in fields:
            rest = {name: value for name, value in given.items() if name != f.name}
            if f.name in required:
                pattern = (
                    rf"^{re.escape(cls.__module__)}\.{cls.__qualname__}: "
                    rf"missing required field\(s\) {f.name}$"
                )
                with pytest.raises(TypeError, match=pattern):
                    factory(**rest)
            else:
                partial = factory(**rest)
                _same(partial, cls(**rest))
                assert getattr(partial, f.name) == _default(f)
        if required:
            listed = re.escape(", ".join(required))
            with pytest.raises(TypeError, match=rf"missing required field\(s\) {listed}$"):
                factory()
        else:
            _same(factory(), cls())


@pytest.mark.parametrize("api_key", APIS)
def test_none_and_int_conversions(api_key: int) -> None:
    for cls, factory in _classes(api_key):
        fields = dataclasses.fields(cls)
        required = _required(cls)
        given: dict[str, Any] = {f.name: Marker(f.name) for f in fields}
        expected = dict(given)
        for f in fields:
            kafka_type = f.metadata.get("kafka_type")
            is_array = typing.get_origin(f.type) is tuple
            if "tag" in f.metadata and f.name not in required:
                given[f.name] = None
                expected[f.name] = None if _nullable(f.type) else _default(f)
            elif is_array:
                given[f.name] = expected[f.name] = (3,)  # no conversion inside arrays
            elif kafka_type == "error_code":
                given[f.name], expected[f.name] = 6, ErrorCode.not_leader_or_follower
            elif kafka_type in ("timedelta_i32", "timedelta_i64"):
                given[f.name] = 1_500
                expected[f.name] = datetime.timedelta(milliseconds=1_500)
            elif kafka_type == "datetime_i64":
                given[f.name] = -1
                expected[f.name] = (
                    None
                    if _nullable(f.type)
                    else datetime.datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=datetime.UTC)
                )
            elif kafka_type in ("int8", "int16", "int32", "int64", "bool"):
                given[f.name] = expected[f.name] = 7 if kafka_type != "bool" else True
        built = factory(**given)
        assert built == cls(**expected)
        for f in fields:
            assert type(getattr(built, f.name)) is type(expected[f.name]), f.name


def _rebuild(entity: Any) -> Any:
    if isinstance(entity, tuple):
        return tuple(_rebuild(item) for item in entity)
    if not dataclasses.is_dataclass(entity):
        return entity
    return type(entity)(
        **{f.name: _rebuild(getattr(entity, f.name)) for f in dataclasses.fields(entity)}
    )


@pytest.mark.parametrize("api_key", APIS)
def test_built_messages_encode_as_constructed_ones(api_key: int) -> None:
    """kio's own writer, on a whole message built through the factories and on the same
    message built by the constructors (dense and sparse samples: tagged fields written,
    nulls and empty arrays)."""
    for b in _builders(api_key):
        writer = entity_writer(b.payload_class)
        for sparse in (False, True):
            built = sample(b, b.payload_class, sparse)
            direct = _rebuild(built)
            assert built == direct
            assert hash(built) == hash(direct)
            out_built, out_direct = io.BytesIO(), io.BytesIO()
            writer(out_built, built)
            writer(out_direct, direct)
            assert out_built.getvalue() == out_direct.getvalue(), (b, sparse)


def test_copy_pickle_and_frozen() -> None:
    b = response_builder(0, 10)
    partition = b.PartitionProduceResponse(index=1, error_code=0, base_offset=2, record_errors=())
    assert copy.copy(partition) == partition
    assert copy.deepcopy(partition) == partition
    assert pickle.loads(pickle.dumps(partition)) == partition
    assert dataclasses.replace(partition, index=5).index == 5
    with pytest.raises(dataclasses.FrozenInstanceError):
        partition.index = 3  # type: ignore[misc]


def test_unknown_error_code_and_positional_arguments() -> None:
    b = response_builder(0, 9)
    with pytest.raises(ValueError, match="12345 is not a Kafka error code") as info:
        b.PartitionProduceResponse(index=0, error_code=12345, base_offset=1, record_errors=())
    assert info.value.__suppress_context__
    with pytest.raises(TypeError):
        b.PartitionProduceResponse(0)


def test_typed_values_are_not_converted() -> None:
    b = response_builder(0, 9)
    # bool and IntEnum are ints, but not plain ones: kept as given.
    partition = b.PartitionProduceResponse(
        index=True, error_code=ErrorCode.none, base_offset=1, record_errors=()
    )
    assert partition.index is True
    assert partition.error_code is ErrorCode.none
    stamp = datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC)
    partition = b.PartitionProduceResponse(
        index=0, error_code=0, base_offset=1, record_errors=(), log_append_time=stamp
    )
    assert partition.log_append_time is stamp


def test_millisecond_values_are_shared_and_exact() -> None:
    b = response_builder(0, 9)
    for ms in (0, 1, 999, 2**31 - 1, -5):
        response = b.ProduceResponse(responses=(), throttle_time=ms)
        assert response.throttle_time == datetime.timedelta(milliseconds=ms)
    zero = b.ProduceResponse(responses=(), throttle_time=0).throttle_time
    assert b.ProduceResponse(responses=(), throttle_time=0).throttle_time is zero


# ------------------------------------------------------- classes kio does not have (yet)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class WithFactory:
    items: tuple[int, ...] = dataclasses.field(default_factory=tuple)
    tags: list[int] = dataclasses.field(default_factory=list, metadata={"tag": 0})
    timeout: datetime.timedelta = dataclasses.field(metadata={"kafka_type": "timedelta_i32"})


@dataclasses.dataclass(frozen=True, kw_only=True)
class WithPostInit:
    value: int
    doubled: int = dataclasses.field(init=False, default=0)

    def __post_init__(self) -> None:
        object.__setattr__(self, "doubled", self.value * 2)


@dataclasses.dataclass(kw_only=True)
class NotFrozen:
    value: int = 1


def test_default_factory_is_called_per_call() -> None:
    factory = factory_for(WithFactory)
    first, second = factory(timeout=5), factory(timeout=5, tags=None)
    assert first == WithFactory(timeout=datetime.timedelta(milliseconds=5))
    assert second.tags == [] and second.tags is not first.tags
    assert "_new(_C)" in factory_source(WithFactory)
    with pytest.raises(TypeError, match=r"WithFactory: missing required field\(s\) timeout$"):
        factory(items=())


def test_other_dataclasses_are_built_by_their_constructor() -> None:
    assert "_new(_C)" not in factory_source(WithPostInit)
    built = factory_for(WithPostInit)(value=4, extra=1)
    assert built == WithPostInit(value=4)
    assert built.doubled == 8
    assert "_new(_C)" not in factory_source(NotFrozen)
    assert factory_for(NotFrozen)() == NotFrozen()
