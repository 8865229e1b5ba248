"""protocol.fast_writers: kio's bytes, exactly, for every schema kio has.

The reference is kio's own ``entity_writer``: for every API, version and direction in
``KIO_VERSIONS`` a dense sample (every field set, tagged fields present, nested arrays
of two) and a sparse one (nullable fields null, arrays empty) must encode to the same
bytes, and those bytes must decode back to the value through kio's reader. Hypothesis
then draws values -- edge integers, empty, null and non-ASCII strings, long strings and
arrays -- for a few representative messages (``FAST_WRITERS_EXAMPLES`` sets how many
per message and version, 25 by default; a few hundred make a deeper run).
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import os
import struct
import types
import typing
import uuid
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.serial.readers import tz_aware_from_i64
from kio.static.primitive import i64

from protocol.api_registry import (
    KIO_VERSIONS,
    Kind,
    request_class,
    request_header_version,
    response_class,
    response_header_version,
)
from protocol.builders import request_builder, response_builder
from protocol.codec import encode_request, encode_response
from protocol.fast_writers import encode, writer_for, writer_source
from testkit.kio_samples import sample

CASES = [
    pytest.param(kind, key, version, id=f"{kind}-{spec.name}-v{version}")
    for key, spec in KIO_VERSIONS.items()
    for version in range(spec.min_version, spec.max_version + 1)
    for kind in ("response", "request")
]


def kio_bytes(entity: Any) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    return buf.getvalue()


def assert_same_and_round_trips(entity: Any) -> bytes:
    cls = type(entity)
    fast = encode(entity)
    assert fast == kio_bytes(entity), writer_source(cls)
    decoded, end = entity_reader(cls)(fast, 0)
    assert end == len(fast)
    assert decoded == entity
    return fast


def _strip_optional(tp: Any) -> tuple[Any, bool]:
    if typing.get_origin(tp) in (types.UnionType, typing.Union):
        (inner,) = [arg for arg in typing.get_args(tp) if arg is not type(None)]
        return inner, True
    return tp, False


def _is_entity(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def _entity_element(tp: Any) -> type | None:
    tp, _ = _strip_optional(tp)
    if typing.get_origin(tp) is tuple:
        inner = typing.get_args(tp)[0]
        if isinstance(inner, type) and dataclasses.is_dataclass(inner):
            return inner
    return None


def widen(entity: Any) -> Any:
    """The dense sample with every array of entities holding two (different) elements."""
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(entity):
        value = getattr(entity, f.name)
        if _entity_element(f.type) is not None and value:
            first = widen(value[0])
            changes[f.name] = (first, _vary(first))
        elif dataclasses.is_dataclass(value):
            changes[f.name] = widen(value)
    return dataclasses.replace(entity, **changes)


def _vary(entity: Any) -> Any:
    """A copy with each int and string field changed, so two elements differ."""
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(entity):
        value = getattr(entity, f.name)
        if type(value) is int and f.metadata.get("kafka_type", "").startswith("int"):
            changes[f.name] = value + 1
        elif type(value) is str:
            changes[f.name] = value + "-2"
    return dataclasses.replace(entity, **changes)


def _builder(kind: Kind, key: int, version: int) -> Any:
    return (response_builder if kind == "response" else request_builder)(key, version)


# --------------------------------------------------------------------------- every schema


@pytest.mark.parametrize(("kind", "api_key", "api_version"), CASES)
def test_same_bytes_as_kio_for_every_api_and_version(
    kind: Kind, api_key: int, api_version: int
) -> None:
    b = _builder(kind, api_key, api_version)
    dense = widen(sample(b, b.payload_class))
    sparse = sample(b, b.payload_class, sparse=True)
    assert_same_and_round_trips(dense)
    assert_same_and_round_trips(sparse)
    # And through the codec: the frame is the length, the header and kio's body.
    body = kio_bytes(dense)
    if kind == "response":
        header = struct.pack(">i", 77) + b"\x00" * response_header_version(api_key, api_version)
        frame = encode_response(api_key, api_version, 77, dense)
    else:
        header = struct.pack(">hhih", api_key, api_version, 77, 1) + b"c"
        header += b"\x00" * (request_header_version(api_key, api_version) - 1)
        frame = encode_request(api_key, api_version, 77, "c", dense)
    assert frame == struct.pack(">i", len(header) + len(body)) + header + body


def test_the_dense_sample_writes_tagged_fields_and_two_element_arrays() -> None:
    # What the sweep above relies on, checked on one message.
    b = response_builder(1, 12)  # Fetch v12: tagged partition fields, nested arrays
    dense = widen(sample(b, b.payload_class))
    assert len(dense.responses) == 2
    topic = dense.responses[0]
    assert len(topic.partitions) == 2
    assert topic.partitions[0].partition_index != topic.partitions[1].partition_index
    data = assert_same_and_round_trips(dense)
    assert len(data) > len(encode(dataclasses.replace(dense, responses=())))
    assert topic.partitions[0].diverging_epoch != type(topic.partitions[0].diverging_epoch)()


# --------------------------------------------------------------------------- edges


def _metadata_v9(topics: int, replicas: int, name_len: int) -> Any:
    b = response_builder(3, 9)
    return b.MetadataResponse(
        throttle_time=2**31 - 1,
        brokers=(b.MetadataResponseBroker(node_id=-(2**31), host="h" * name_len, port=0),),
        cluster_id="ü" * name_len,
        topics=tuple(
            b.MetadataResponseTopic(
                error_code=ErrorCode.unknown_topic_or_partition,
                name=f"t{n}",
                partitions=(
                    b.MetadataResponsePartition(
                        error_code=0,
                        partition_index=n,
                        leader_id=2**31 - 1,
                        replica_nodes=tuple(range(replicas)),
                        isr_nodes=tuple(range(-replicas, 0)),
                    ),
                ),
            )
            for n in range(topics)
        ),
    )


@pytest.mark.parametrize("name_len", [0, 63, 126, 127, 128, 8191, 8192])
@pytest.mark.parametrize(("topics", "replicas"), [(0, 0), (126, 127), (127, 128), (300, 257)])
def test_varint_boundaries_and_large_arrays(topics: int, replicas: int, name_len: int) -> None:
    assert_same_and_round_trips(_metadata_v9(topics, replicas, name_len))


@pytest.mark.parametrize("count", [0, 1, 255, 256, 257, 1000])
def test_large_legacy_and_compact_number_arrays(count: int) -> None:
    for version in (0, 9):  # legacy int32 counts, then compact varints
        b = response_builder(3, version)
        nodes = tuple(range(-(2**31), -(2**31) + count))
        partition = b.MetadataResponsePartition(
            error_code=0, partition_index=0, leader_id=0, replica_nodes=nodes, isr_nodes=nodes
        )
        assert_same_and_round_trips(partition)


def test_legacy_string_length_limit() -> None:
    b = response_builder(3, 0)
    topic = b.MetadataResponseTopic(error_code=0, name="x" * 32767, partitions=())
    ok = b.MetadataResponse(brokers=(), topics=(topic,))
    assert_same_and_round_trips(ok)
    too_long = dataclasses.replace(ok, topics=(dataclasses.replace(topic, name="x" * 32768),))
    with pytest.raises(struct.error):
        encode(too_long)


def test_records_as_memoryview_and_large() -> None:
    b = response_builder(1, 12)
    records = bytes(range(256)) * 300
    partition = b.PartitionData(
        partition_index=0,
        error_code=0,
        high_watermark=1,
        aborted_transactions=None,
        records=memoryview(records),
    )
    topic = b.FetchableTopicResponse(topic="t", partitions=(partition,))
    payload = b.FetchResponse(throttle_time=0, error_code=0, responses=(topic,))
    assert encode(payload) == kio_bytes(payload)
    assert records in encode(payload)


def _heartbeat(**fields: Any) -> Any:
    return dataclasses.replace(
        response_builder(12, 4).HeartbeatResponse(throttle_time=0, error_code=0), **fields
    )


@pytest.mark.parametrize(
    ("entity", "error"),
    [
        (_heartbeat(error_code="0"), struct.error),  # not a number
        (_heartbeat(error_code=2**15), struct.error),  # out of range
        (_heartbeat(error_code=None), struct.error),
        (_heartbeat(throttle_time=5), AttributeError),  # an int, not a timedelta
        (_heartbeat(throttle_time=datetime.timedelta(days=30)), struct.error),  # > int32 ms
    ],
)
def test_a_wrong_value_fails_loudly(entity: Any, error: type[Exception]) -> None:
    with pytest.raises(error):
        encode(entity)


def test_wrong_values_in_nested_fields_fail_loudly() -> None:
    b = response_builder(3, 9)
    good = _metadata_v9(1, 1, 3)
    partition = good.topics[0].partitions[0]

    def with_partition(**fields: Any) -> Any:
        topic = dataclasses.replace(
            good.topics[0], partitions=(dataclasses.replace(partition, **fields),)
        )
        return dataclasses.replace(good, topics=(topic,))

    with pytest.raises(struct.error):
        encode(with_partition(replica_nodes=(1, "2")))
    with pytest.raises(struct.error):
        encode(with_partition(isr_nodes=(2**31,)))
    with pytest.raises((TypeError, AttributeError)):
        broker = b.MetadataResponseBroker(node_id=1, host=None, port=1)
        encode(dataclasses.replace(good, brokers=(broker,)))
    with pytest.raises(TypeError):
        encode(dataclasses.replace(good, cluster_id=5))
    # kio takes bytes for a compact string as they are; so do we.
    raw = dataclasses.replace(good, cluster_id=b"\xffraw")
    assert encode(raw) == kio_bytes(raw)
    with pytest.raises(AttributeError):
        encode(dataclasses.replace(good, topics=(object(),)))
    topic = request_builder(1, 13).FetchTopic(topic_id=uuid.uuid4(), partitions=())
    with pytest.raises(AttributeError):
        encode(dataclasses.replace(topic, topic_id=str(topic.topic_id)))


def test_writers_are_generated_once_per_class() -> None:
    cls = response_class(3, 9)
    assert writer_for(cls) is writer_for(cls)
    assert "def write(out, o):" in writer_source(cls)


# --------------------------------------------------------------------------- hypothesis

_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint8": (0, 2**8 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
    "uint64": (0, 2**64 - 1),
}
_MS = datetime.timedelta(milliseconds=1)
_MAX_DATETIME_MS = 253402300799999  # 9999-12-31T23:59:59.999Z


def _edge_ints(low: int, high: int) -> st.SearchStrategy[int]:
    return st.sampled_from([low, high, -1 if low < 0 else 1, 0]) | st.integers(low, high)


def _scalar(kafka_type: str) -> st.SearchStrategy[Any]:
    if kafka_type in _INT_RANGES:
        return _edge_ints(*_INT_RANGES[kafka_type])
    if kafka_type == "string":
        return st.text(max_size=70)  # up to 280 bytes: one- and two-byte varints
    if kafka_type in ("bytes", "records"):
        return st.binary(max_size=200)
    if kafka_type == "bool":
        return st.booleans()
    if kafka_type == "float64":
        return st.floats(allow_nan=False, allow_infinity=False)
    if kafka_type == "uuid":  # the zero uuid is null on the wire: it reads back as None
        return st.uuids().filter(lambda u: u.int != 0)
    if kafka_type == "error_code":
        return st.sampled_from(list(ErrorCode))
    if kafka_type == "timedelta_i32":
        return _edge_ints(*_INT_RANGES["int32"]).map(lambda ms: ms * _MS)
    if kafka_type == "timedelta_i64":  # exact in a float's 53 bits, as kio's tests keep it
        return _edge_ints(-(2**52), 2**52).map(lambda ms: ms * _MS)
    if kafka_type == "datetime_i64":
        return _edge_ints(0, _MAX_DATETIME_MS).map(lambda ms: tz_aware_from_i64(i64(ms)))
    raise AssertionError(kafka_type)


@cache
def entities(cls: type) -> st.SearchStrategy[Any]:
    fields: dict[str, st.SearchStrategy[Any]] = {}
    for f in dataclasses.fields(cls):
        tp, nullable = _strip_optional(f.type)
        kafka_type: str = f.metadata.get("kafka_type", "")
        strategy: st.SearchStrategy[Any]
        if typing.get_origin(tp) is tuple:
            inner, inner_nullable = _strip_optional(typing.get_args(tp)[0])
            element = entities(inner) if _is_entity(inner) else _scalar(kafka_type)
            if inner_nullable:
                element = st.none() | element
            strategy = st.lists(element, max_size=3).map(tuple)
        elif _is_entity(tp):
            strategy = entities(tp)
        else:
            strategy = _scalar(kafka_type)
        if nullable:
            strategy = st.none() | strategy
        if "tag" in f.metadata and f.default is not dataclasses.MISSING:
            strategy = st.just(f.default) | strategy  # often absent from the wire
        fields[f.name] = strategy
    return st.builds(cls, **fields)


def _versions(key: int) -> list[int]:
    """The oldest, the newest, and the two on either side of the flexible boundary."""
    spec = KIO_VERSIONS[key]
    versions = range(spec.min_version, spec.max_version + 1)
    flexible = [v for v in versions if response_class(key, v).__flexible__]
    picks = {spec.min_version, spec.max_version}
    if flexible:
        picks |= {flexible[0], max(flexible[0] - 1, spec.min_version)}
    return sorted(picks)


REPRESENTATIVE = {"Metadata": 3, "Fetch": 1, "Produce": 0, "ApiVersions": 18}
REPRESENTATIVE |= {"JoinGroup": 11, "OffsetFetch": 9}
HYPOTHESIS_CASES = [
    pytest.param(kind, key, version, id=f"{kind}-{name}-v{version}")
    for name, key in REPRESENTATIVE.items()
    for version in _versions(key)
    for kind in ("response", "request")
]


@pytest.mark.parametrize(("kind", "api_key", "api_version"), HYPOTHESIS_CASES)
@settings(
    max_examples=int(os.environ.get("FAST_WRITERS_EXAMPLES", "25")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_same_bytes_as_kio_for_drawn_values(
    kind: Kind, api_key: int, api_version: int, data: st.DataObject
) -> None:
    cls = (response_class if kind == "response" else request_class)(api_key, api_version)
    assert_same_and_round_trips(data.draw(entities(cls)))
