"""Hostile bodies: null where Kafka's schema has no null, counts larger than the frame.

For every request (and response) of every API and version kio has, each array field
reachable in a densely filled message is set to null in turn: where Kafka's schema
declares the array nullable for that version the message decodes with ``None`` there,
and where it does not the body is refused with a protocol error naming the field
(Kafka's generated readers: "non-nullable field ... was serialized as null").
"""

from __future__ import annotations

import dataclasses
import os
import struct
import subprocess
import sys
import textwrap
import types
import typing
from collections.abc import Iterator
from typing import Any

import pytest

from protocol import (
    KIO_VERSIONS,
    FrameDecoder,
    MalformedRequest,
    MalformedResponse,
    ProtocolError,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    parse_request_header,
    request_builder,
    response_builder,
)
from testkit.kio_samples import sample as _sample

ALL_VERSIONS = [
    (key, version)
    for key, spec in KIO_VERSIONS.items()
    for version in range(spec.min_version, spec.max_version + 1)
]

# A path into a message: field names, with 0 standing for "the first element".
Path = tuple[str | int, ...]


def _unwrap(tp: Any) -> tuple[Any, bool]:
    if typing.get_origin(tp) in (types.UnionType, typing.Union):
        args = [arg for arg in typing.get_args(tp) if arg is not type(None)]
        return args[0], len(args) < len(typing.get_args(tp))
    return tp, False


def _array_fields(obj: Any, path: Path = ()) -> Iterator[tuple[Path, str, bool]]:
    """(path, "Owner.field", nullable) of every non-tagged array field in ``obj``,
    looking inside nested structs and the first element of entity arrays. (A tagged
    field that is null is simply left out of the message, so there is nothing to
    refuse.)"""
    for field in dataclasses.fields(obj):
        tp, nullable = _unwrap(field.type)
        value = getattr(obj, field.name)
        is_tag = "tag" in field.metadata
        if typing.get_origin(tp) is tuple:
            if not is_tag:
                yield (*path, field.name), f"{type(obj).__qualname__}.{field.name}", nullable
            if value and dataclasses.is_dataclass(value[0]):
                yield from _array_fields(value[0], (*path, field.name, 0))
        elif dataclasses.is_dataclass(value):
            yield from _array_fields(value, (*path, field.name))


def _set_null(obj: Any, path: Path) -> Any:
    name = path[0]
    assert isinstance(name, str)
    if len(path) == 1:
        return dataclasses.replace(obj, **{name: None})
    value = getattr(obj, name)
    if path[1] == 0:
        inner = _set_null(value[0], path[2:])
        return dataclasses.replace(obj, **{name: (inner, *value[1:])})
    return dataclasses.replace(obj, **{name: _set_null(value, path[1:])})


def _frame(data: bytes) -> bytes:
    (frame,) = FrameDecoder().feed(data)
    return frame


@pytest.mark.parametrize(("api_key", "api_version"), ALL_VERSIONS)
def test_null_arrays_in_requests(api_key: int, api_version: int) -> None:
    b = request_builder(api_key, api_version)
    payload = _sample(b, b.payload_class)
    cases = list(_array_fields(payload))
    for path, name, nullable in cases:
        mutated = _set_null(payload, path)
        frame = _frame(encode_request(api_key, api_version, 99, "c", mutated))
        header, offset = parse_request_header(frame)
        if nullable:
            assert decode_request(header, frame, offset) == mutated, name
        else:
            with pytest.raises(MalformedRequest, match=f"non-nullable array {name} is null"):
                decode_request(header, frame, offset)


@pytest.mark.parametrize(("api_key", "api_version"), ALL_VERSIONS)
def test_null_arrays_in_responses(api_key: int, api_version: int) -> None:
    b = response_builder(api_key, api_version)
    payload = _sample(b, b.payload_class)
    for path, name, nullable in _array_fields(payload):
        mutated = _set_null(payload, path)
        frame = _frame(encode_response(api_key, api_version, 5, mutated))
        if nullable:
            assert decode_response(api_key, api_version, frame) == (5, mutated), name
        else:
            with pytest.raises(MalformedResponse, match=f"non-nullable array {name} is null"):
                decode_response(api_key, api_version, frame)


def test_every_api_has_array_cases_and_both_kinds_occur() -> None:
    """The sweep above is not vacuous: it meets nullable and non-nullable arrays."""
    kinds: set[bool] = set()
    total = 0
    for api_key, api_version in ALL_VERSIONS:
        b = request_builder(api_key, api_version)
        for _path, _name, nullable in _array_fields(_sample(b, b.payload_class)):
            kinds.add(nullable)
            total += 1
    assert kinds == {True, False}
    assert total > 400


# --------------------------------------------------------------------------- known cases


def _request_frame(api_key: int, version: int, flexible: bool, body: bytes) -> bytes:
    head = struct.pack(">hhih", api_key, version, 1, -1) + (b"\x00" if flexible else b"")
    return head + body


def test_metadata_v0_null_topics_is_refused_v1_is_all_topics() -> None:
    # Metadata's "topics" has nullableVersions 1+: v0 has no "all topics" null.
    v0 = _request_frame(3, 0, False, b"\xff\xff\xff\xff")
    header, offset = parse_request_header(v0)
    with pytest.raises(MalformedRequest, match=r"MetadataRequest\.topics is null"):
        decode_request(header, v0, offset)
    v1 = _request_frame(3, 1, False, b"\xff\xff\xff\xff")
    header, offset = parse_request_header(v1)
    assert decode_request(header, v1, offset).topics is None  # type: ignore[union-attr]


@pytest.mark.parametrize(("version", "flexible"), [(3, False), (8, False), (9, True), (11, True)])
def test_produce_null_topic_data_is_refused(version: int, flexible: bool) -> None:
    # transactional_id null, acks -1, timeout 1000, topic_data null.
    if flexible:
        body = b"\x00" + b"\xff\xff" + b"\x00\x00\x03\xe8" + b"\x00" + b"\x00"
    else:
        body = b"\xff\xff" + b"\xff\xff" + b"\x00\x00\x03\xe8" + b"\xff\xff\xff\xff"
    frame = _request_frame(0, version, flexible, body)
    header, offset = parse_request_header(frame)
    with pytest.raises(MalformedRequest, match=r"ProduceRequest\.topic_data is null") as info:
        decode_request(header, frame, offset)
    assert isinstance(info.value, ProtocolError)


def test_produce_null_partition_data_is_refused() -> None:
    # Produce v3: one topic "t" whose partition_data is null.
    body = b"\xff\xff" + b"\xff\xff" + b"\x00\x00\x03\xe8" + b"\x00\x00\x00\x01"
    body += b"\x00\x01t" + b"\xff\xff\xff\xff"
    frame = _request_frame(0, 3, False, body)
    header, offset = parse_request_header(frame)
    with pytest.raises(MalformedRequest, match=r"TopicProduceData\.partition_data is null"):
        decode_request(header, frame, offset)


def test_negative_legacy_array_length_other_than_null_is_refused() -> None:
    frame = _request_frame(3, 1, False, b"\xff\xff\xff\xfe")  # -2, even where null is fine
    header, offset = parse_request_header(frame)
    with pytest.raises(MalformedRequest, match="negative array length -2"):
        decode_request(header, frame, offset)


def test_count_is_checked_against_the_smallest_element() -> None:
    # Produce v3, one topic whose partition_data claims 3 elements in 12 bytes: each
    # element needs at least 8 (int32 index + int32 records length), so it cannot fit.
    body = b"\xff\xff" + b"\xff\xff" + b"\x00\x00\x03\xe8" + b"\x00\x00\x00\x01"
    body += b"\x00\x01t" + b"\x00\x00\x00\x03" + bytes(12)
    frame = _request_frame(0, 3, False, body)
    header, offset = parse_request_header(frame)
    with pytest.raises(MalformedRequest, match="3 elements cannot fit in the 12 bytes"):
        decode_request(header, frame, offset)


# --------------------------------------------------------------------------- allocations

# Run under an address-space limit in a child: if anything allocated what a count claims
# (2 GiB and more here), the child would die or raise MemoryError instead of printing.
_LIMITED = textwrap.dedent(
    """
    import resource, struct
    from protocol import MalformedRequest, parse_request_header, decode_request
    resource.setrlimit(resource.RLIMIT_AS, (1536 << 20, 1536 << 20))

    def frame(api_key, version, flexible, body):
        head = struct.pack(">hhih", api_key, version, 1, -1) + (b"\\x00" if flexible else b"")
        return head + body

    produce_v3_head = b"\\xff\\xff" + b"\\xff\\xff" + b"\\x00\\x00\\x03\\xe8"
    produce_v3_head += b"\\x00\\x00\\x00\\x01" + b"\\x00\\x01t" + b"\\x00\\x00\\x00\\x01"
    produce_v9_head = b"\\x00" + b"\\xff\\xff" + b"\\x00\\x00\\x03\\xe8" + b"\\x02\\x02t\\x02"
    cases = {
        # records: int32 length 2**31 - 1 with 4 bytes behind it
        "legacy bytes": frame(0, 3, False, produce_v3_head + b"\\x00\\x00\\x00\\x00"
                              + b"\\x7f\\xff\\xff\\xff" + b"abcd"),
        # records: compact length 2**32 - 2
        "compact bytes": frame(0, 9, True, produce_v9_head + b"\\x00\\x00\\x00\\x00"
                               + b"\\xff\\xff\\xff\\xff\\x0f" + b"abcd"),
        # topic name: int16 length 32767 in 3 bytes
        "legacy string": frame(3, 1, False, b"\\x00\\x00\\x00\\x01\\x7f\\xffabc"),
        # client_software_name: compact string of 2**31 bytes
        "compact string": frame(18, 3, True, b"\\x80\\x80\\x80\\x80\\x08abc"),
        # Metadata v1 topics: 2**28 elements (2 GiB at 8 bytes each) in 4 bytes
        "legacy array": frame(3, 1, False, b"\\x10\\x00\\x00\\x00" + b"abcd"),
        # ListOffsets v1: one topic, 2**28 partitions of 12 bytes in 12 bytes
        "array of structs": frame(2, 1, False, b"\\xff\\xff\\xff\\xff\\x00\\x00\\x00\\x01"
                                  + b"\\x00\\x01t" + b"\\x10\\x00\\x00\\x00" + bytes(12)),
    }
    for name, data in cases.items():
        header, offset = parse_request_header(data)
        try:
            decode_request(header, data, offset)
        except MalformedRequest:
            print(name.replace(" ", "-"), "refused")
        else:
            print(name.replace(" ", "-"), "decoded")
    """
)


def test_oversized_counts_are_refused_before_any_allocation() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _LIMITED],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "RUST_BACKTRACE": "0"},
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == [
        "legacy-bytes",
        "refused",
        "compact-bytes",
        "refused",
        "legacy-string",
        "refused",
        "compact-string",
        "refused",
        "legacy-array",
        "refused",
        "array-of-structs",
        "refused",
    ]
