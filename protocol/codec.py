"""Request/response encoding and decoding: our header handling around kio's bodies.

Frames here are what ``FrameDecoder`` yields: the bytes *after* the 4-byte length.
Everything we *produce* is a full frame, length prefix included, ready for the socket.

Why the header is ours and not kio's: the broker must read the api key, version and
correlation id of *every* request -- including unknown APIs and versions kio has no
schema for -- so it can answer UNSUPPORTED_VERSION (or log and close) with the right
correlation id. So the fixed part is read with ``struct`` first, and only the body goes
through kio's native reader.

Trailing bytes after a request body are tolerated. Kafka's generated message readers
read the fields a version defines and do not check that the frame is used up, so a real
broker accepts such frames too; rejecting them here would only make us stricter than
the system we imitate.

Before kio reads a body, a schema-driven guard checks every array count against the
bytes left (see "body guard" below): kio's native reader would otherwise reserve
memory for whatever count a peer claims, and an allocation it cannot get aborts the
process. The same walk refuses a null (count -1) array where Kafka's schema does not
allow one: kio would hand the handler a ``None`` there.
"""

from __future__ import annotations

import dataclasses
import struct
import types
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final

from kio.schema.api_versions.v0.response import ApiVersion as ApiVersionV0
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader
from kio.static.constants import EntityType
from kio.static.primitive import i16
from kio.static.protocol import RequestPayload, ResponsePayload

from protocol.api_registry import (
    ApiSpec,
    request_class,
    request_header_version,
    response_class,
    response_header_version,
)
from protocol.errors import MalformedRequest, MalformedResponse, UnsupportedApiKey
from protocol.fast_writers import writer_for

__all__ = (
    "RequestHeader",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
    "parse_request_header",
    "unsupported_version_api_versions_response",
)

_REQUEST_HEADER_FIXED = struct.Struct(">hhih")  # api_key, api_version, correlation_id, len
_FRAME_AND_REQUEST_HEADER = struct.Struct(">ihhih")  # length prefix + the above
_FRAME_AND_CORRELATION = struct.Struct(">ii")  # length prefix, correlation_id
_CORRELATION = struct.Struct(">i")
_LENGTH = struct.Struct(">i")
_NO_TAGGED_FIELDS: Final = b"\x00"

_Reader = Callable[[bytes | memoryview, int], tuple[Any, int]]


@dataclass(frozen=True, slots=True)
class RequestHeader:
    """The part of every request the broker needs whatever the API: Kafka's request
    header v1/v2 without its (always empty today) tagged fields."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


# --------------------------------------------------------------------------- helpers


def _read_uvarint(
    buf: bytes | bytearray | memoryview, pos: int, error: type[Exception]
) -> tuple[int, int]:
    """Unsigned LEB128 as Kafka writes it (at most 5 bytes for 32 bits)."""
    result = 0
    shift = 0
    end = len(buf)
    while True:
        if pos >= end:
            raise error("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 28:
            raise error("varint longer than 5 bytes")


def _skip_tagged_fields(
    buf: bytes | bytearray | memoryview, pos: int, error: type[Exception]
) -> int:
    """Step over a tagged-field section; no header tag is defined that we need."""
    if pos < len(buf) and buf[pos] == 0:  # the usual case: no tags
        return pos + 1
    count, pos = _read_uvarint(buf, pos, error)
    for _ in range(count):
        _tag, pos = _read_uvarint(buf, pos, error)
        size, pos = _read_uvarint(buf, pos, error)
        pos += size
        if pos > len(buf):
            raise error("truncated tagged field")
    return pos


_readers: dict[type, _Reader] = {}
_Writer = Callable[[bytearray, Any], None]
# (class, api key, version) -> the body writer and the header's tagged-field section,
# stored once ``_check_payload`` has passed for that key (so at most one entry per
# class, and the check runs once per class): one table per direction.
_response_plans: dict[tuple[type, int, int], tuple[_Writer, bytes]] = {}
_request_plans: dict[tuple[type, int, int], tuple[_Writer, bytes]] = {}


def _reader_for(cls: type) -> _Reader:
    reader = _readers.get(cls)
    if reader is None:
        reader = _readers[cls] = entity_reader(cls)
    return reader


def _readonly(frame: bytes | bytearray | memoryview) -> bytes | memoryview:
    # kio's native reader refuses writable buffers.
    if isinstance(frame, bytes):
        return frame
    return memoryview(frame).toreadonly()


# --------------------------------------------------------------------------- body guard
#
# kio's native reader sizes each array's storage from the count on the wire *before*
# reading an element (8 bytes per element). A 15-byte request claiming 2**32 elements in
# a compact array makes it request 32 GiB, and Rust aborts the whole process when an
# allocation fails -- no exception, the broker is gone. (Legacy int32 arrays do the same
# up to 16 GiB, fatal under a memory limit.) So before kio sees a body, a small walker
# compiled from the same schema checks that every array count fits in the bytes left:
# each element takes at least its minimum encoded size (one byte for the smallest), so a
# larger count is malformed anyway. It reads only lengths and counts; fixed-width fields
# are skipped in merged runs. Strings and bytes need no such care: kio checks their
# length against the buffer before it copies (and refuses a null where the schema has
# none), and the walk's final "body runs past the frame" check catches them too.
#
# Null arrays. kio reads an array count of -1 as ``None`` whatever the schema says, so a
# peer could hand a handler ``topic_data=None`` where Kafka's schema has no
# ``nullableVersions``. Kafka's generated readers refuse that ("non-nullable field ... was
# serialized as null"); so does the walker. kio's classes carry the schema's
# nullability per version in their type hints: ``tuple[X, ...] | None`` is nullable
# (Metadata v1+ ``topics``), ``tuple[X, ...]`` is not (Metadata v0). The check costs one
# comparison on a path the walker takes anyway (count <= 0), computed once per class.


class _Bad(Exception):
    pass


_Skip = Callable[[bytes | memoryview, int], int]
_Op = int | _Skip

_FIXED_WIDTH: Final[dict[str, int]] = {
    "bool": 1,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "uuid": 16,
}
_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def _apply(op: _Op, buf: bytes | memoryview, pos: int) -> int:
    return pos + op if isinstance(op, int) else op(buf, pos)


def _skip_compact_bytes(buf: bytes | memoryview, pos: int) -> int:
    size, pos = _read_uvarint(buf, pos, _Bad)
    return pos + size - 1 if size else pos  # 0 is null


def _skip_int16_bytes(buf: bytes | memoryview, pos: int) -> int:
    size: int = _I16.unpack_from(buf, pos)[0]
    return pos + 2 + max(size, 0)


def _skip_int32_bytes(buf: bytes | memoryview, pos: int) -> int:
    size: int = _I32.unpack_from(buf, pos)[0]
    return pos + 4 + max(size, 0)


def _scalar_op(kafka_type: str, flexible: bool) -> tuple[_Op, int]:
    """The step for one scalar, and the fewest bytes it can take on the wire."""
    width = _FIXED_WIDTH.get(kafka_type)
    if width is not None:
        return width, width
    if kafka_type not in ("string", "bytes", "records"):  # pragma: no cover - kio invariant
        raise TypeError(f"no guard for kafka type {kafka_type!r}")
    if flexible:
        return _skip_compact_bytes, 1
    if kafka_type == "string":
        return _skip_int16_bytes, 2
    return _skip_int32_bytes, 4


def _array_op(element: _Op, min_size: int, flexible: bool, nullable: bool, name: str) -> _Skip:
    # An element of no bytes at all exists in no Kafka schema; counting it as one byte
    # keeps the bound (and the walk) finite if one ever appears.
    per_element = max(min_size, 1)

    def skip_array(buf: bytes | memoryview, pos: int) -> int:
        if flexible:
            count, pos = _read_uvarint(buf, pos, _Bad)
            count -= 1  # -1 is null
        else:
            (count,) = _I32.unpack_from(buf, pos)
            pos += 4
        if count <= 0:
            if count == 0 or (count == -1 and nullable):
                return pos
            if count == -1:
                raise _Bad(f"non-nullable array {name} is null")
            raise _Bad(f"negative array length {count} for {name}")
        if count * per_element > len(buf) - pos:
            raise _Bad(
                f"array {name} of {count} elements cannot fit in the "
                f"{max(len(buf) - pos, 0)} bytes left"
            )
        if isinstance(element, int):
            return pos + count * element
        for _ in range(count):
            pos = element(buf, pos)
        return pos

    return skip_array


def _nullable_op(inner: _Skip) -> _Skip:
    def skip_nullable(buf: bytes | memoryview, pos: int) -> int:
        (marker,) = _I8.unpack_from(buf, pos)
        return pos + 1 if marker < 0 else inner(buf, pos + 1)

    return skip_nullable


def _tagged_fields_op(tagged: dict[int, _Op]) -> _Skip:
    def skip_tagged(buf: bytes | memoryview, pos: int) -> int:
        if buf[pos] == 0:
            return pos + 1
        count, pos = _read_uvarint(buf, pos, _Bad)
        for _ in range(count):
            tag, pos = _read_uvarint(buf, pos, _Bad)
            size, pos = _read_uvarint(buf, pos, _Bad)
            end = pos + size
            if end > len(buf):
                raise _Bad("truncated tagged field")
            op = tagged.get(tag)
            if op is not None and _apply(op, buf, pos) != end:
                raise _Bad(f"tagged field {tag} does not fill its {size} bytes")
            pos = end
        return pos

    return skip_tagged


def _field_op(
    owner: type, field: dataclasses.Field[Any], flexible: bool, is_tag: bool
) -> tuple[_Op, int]:
    """The step for one field of ``owner``, and the fewest bytes it can take."""
    tp: Any = field.type
    nullable = False
    if typing.get_origin(tp) in (types.UnionType, typing.Union):
        args = [arg for arg in typing.get_args(tp) if arg is not type(None)]
        nullable = len(args) < len(typing.get_args(tp))
        tp = args[0]
    kafka_type = field.metadata.get("kafka_type", "")
    if typing.get_origin(tp) is tuple:
        inner = typing.get_args(tp)[0]
        if isinstance(inner, type) and dataclasses.is_dataclass(inner):
            element: _Op = _entity_op(inner)
            element_min = _entity_min_size[inner]
        else:
            element, element_min = _scalar_op(kafka_type, flexible)
        name = f"{owner.__qualname__}.{field.name}"
        return _array_op(element, element_min, flexible, nullable, name), 1 if flexible else 4
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        entity = _entity_op(tp)
        # Tagged structs carry no null marker: presence is the tag itself.
        if nullable and not is_tag:
            return _nullable_op(entity), 1
        return entity, _entity_min_size[tp]
    return _scalar_op(kafka_type, flexible)


_entity_ops: dict[type, _Skip] = {}
_entity_min_size: dict[type, int] = {}


def _entity_op(cls: type) -> _Skip:
    """A function ``(buf, pos) -> end`` that walks one ``cls`` or raises."""
    cached = _entity_ops.get(cls)
    if cached is not None:
        return cached
    flexible: bool = getattr(cls, "__flexible__", False)
    ops: list[_Op] = []
    tagged: dict[int, _Op] = {}
    min_size = 1 if flexible else 0  # the tagged-field count
    for field in dataclasses.fields(cls):
        tag = field.metadata.get("tag")
        op, field_min = _field_op(cls, field, flexible, tag is not None)
        if tag is not None:
            tagged[tag] = op
            continue
        min_size += field_min
        if isinstance(op, int) and ops and isinstance(ops[-1], int):
            ops[-1] += op  # merge runs of fixed-width fields
        else:
            ops.append(op)
    if flexible:
        ops.append(_tagged_fields_op(tagged))
    steps = tuple(ops)

    def skip_entity(buf: bytes | memoryview, pos: int) -> int:
        for op in steps:
            pos = pos + op if op.__class__ is int else op(buf, pos)  # type: ignore[operator]
        return pos

    _entity_ops[cls] = skip_entity
    _entity_min_size[cls] = min_size
    return skip_entity


def _guard(cls: type, data: bytes | memoryview, offset: int) -> str | None:
    """None when ``data[offset:]`` is safe to hand to kio, else why not."""
    try:
        end = _entity_op(cls)(data, offset)
    except (_Bad, IndexError, struct.error) as exc:
        return str(exc) or type(exc).__name__
    if end > len(data):
        return f"body needs {end - offset} bytes, {len(data) - offset} present"
    return None


def _check_payload(payload: object, api_key: int, api_version: int, kind: EntityType) -> None:
    # A handler returning the class of another version (or a request for a response)
    # would silently corrupt the stream -- the peer decodes with the version it asked
    # for -- so fail loudly instead. Three attribute reads per message.
    cls = type(payload)
    if (
        getattr(cls, "__api_key__", None) != api_key
        or getattr(cls, "__version__", None) != api_version
        or getattr(cls, "__type__", None) is not kind
    ):
        raise ValueError(
            f"{cls.__module__}.{cls.__qualname__} is not a {kind.name} of api key "
            f"{api_key} version {api_version}"
        )


# --------------------------------------------------------------------------- broker side


def parse_request_header(frame: bytes | bytearray | memoryview) -> tuple[RequestHeader, int]:
    """Read the request header; return it and the offset where the body starts.

    Works for any api key and version: a version outside what kio knows takes the
    header version of the nearest known one (flexibility is monotonic), and an unknown
    api key is read as header v1 -- its body offset is then a best guess, but the
    correlation id needed to answer is always right. Raises ``MalformedRequest`` when
    the header itself is truncated.
    """
    size = len(frame)
    if size < 10:
        raise MalformedRequest(f"request header truncated: {size} bytes")
    api_key, api_version, correlation_id, client_len = _REQUEST_HEADER_FIXED.unpack_from(frame, 0)
    pos = 10
    client_id: str | None
    if client_len < 0:  # Kafka reads any negative length as null
        client_id = None
    else:
        end = pos + client_len
        if end > size:
            raise MalformedRequest(
                f"client_id truncated: needs {client_len} bytes, {size - pos} left"
            )
        # Java's String(bytes, UTF_8) replaces bad sequences; do the same.
        client_id = str(frame[pos:end], "utf-8", "replace")
        pos = end
    try:
        header_version = request_header_version(api_key, api_version)
    except UnsupportedApiKey:
        header_version = 1
    if header_version >= 2:
        pos = _skip_tagged_fields(frame, pos, MalformedRequest)
    return RequestHeader(api_key, api_version, correlation_id, client_id), pos


def decode_request(
    header: RequestHeader, frame: bytes | bytearray | memoryview, body_offset: int
) -> RequestPayload:
    """Decode the body with kio's schema for the header's api key and version.

    Raises ``UnsupportedApiKey`` / ``UnsupportedVersion`` when kio has no schema, and
    ``MalformedRequest`` when the body does not decode. Bytes after the body are
    ignored (see the module docstring).
    """
    cls = request_class(header.api_key, header.api_version)
    data = _readonly(frame)
    problem = _guard(cls, data, body_offset)
    if problem is not None:
        raise MalformedRequest(
            f"cannot decode {cls.__qualname__} v{header.api_version} "
            f"(correlation id {header.correlation_id}): {problem}"
        )
    try:
        payload, _end = _reader_for(cls)(data, body_offset)
    except Exception as exc:  # kio raises DecodeError, ValueError, ... on bad input
        raise MalformedRequest(
            f"cannot decode {cls.__qualname__} v{header.api_version} "
            f"(correlation id {header.correlation_id}): {exc!r}"
        ) from exc
    return payload  # type: ignore[no-any-return]


def encode_response(
    api_key: int, api_version: int, correlation_id: int, payload: ResponsePayload
) -> bytes:
    """The full frame: length, response header (v0 or v1), body.

    The whole frame is written into one buffer and copied out once. The body is
    written by the writer ``protocol.fast_writers`` generates from kio's schema: kio's
    bytes, at a fraction of kio's own writer's cost.
    """
    key = (type(payload), api_key, api_version)
    plan = _response_plans.get(key)
    if plan is None:
        _check_payload(payload, api_key, api_version, EntityType.response)
        tags = _NO_TAGGED_FIELDS if response_header_version(api_key, api_version) else b""
        plan = _response_plans[key] = (writer_for(key[0]), tags)
    writer, header_tags = plan
    out = bytearray(_FRAME_AND_CORRELATION.pack(0, correlation_id))
    out += header_tags
    writer(out, payload)
    _LENGTH.pack_into(out, 0, len(out) - 4)
    return bytes(out)


def unsupported_version_api_versions_response(
    correlation_id: int, apis: Iterable[ApiSpec]
) -> bytes:
    """Kafka's answer to an ApiVersions request of a version the broker lacks.

    The body is an ApiVersionsResponse *v0* with UNSUPPORTED_VERSION, behind response
    header v0, whatever version was asked: v0 is the one layout every client can read,
    and kafka-python and librdkafka use the listed ApiVersions range to retry lower.
    (Kafka itself lists only ApiVersions' own entry; passing the whole list is allowed.)
    """
    payload = ApiVersionsResponseV0(
        error_code=ErrorCode.unsupported_version,
        api_keys=tuple(
            ApiVersionV0(
                api_key=i16(spec.api_key),
                min_version=i16(spec.min_version),
                max_version=i16(spec.max_version),
            )
            for spec in apis
        ),
    )
    out = bytearray(_FRAME_AND_CORRELATION.pack(0, correlation_id))
    writer_for(ApiVersionsResponseV0)(out, payload)
    _LENGTH.pack_into(out, 0, len(out) - 4)
    return bytes(out)


# --------------------------------------------------------------------------- client side


def encode_request(
    api_key: int,
    api_version: int,
    correlation_id: int,
    client_id: str | None,
    payload: RequestPayload,
) -> bytes:
    """The full request frame: length, request header v1 or v2, body."""
    key = (type(payload), api_key, api_version)
    plan = _request_plans.get(key)
    if plan is None:
        _check_payload(payload, api_key, api_version, EntityType.request)
        tags = _NO_TAGGED_FIELDS if request_header_version(api_key, api_version) >= 2 else b""
        plan = _request_plans[key] = (writer_for(key[0]), tags)
    writer, header_tags = plan
    client = None if client_id is None else client_id.encode()
    if client is not None and len(client) > 0x7FFF:
        raise ValueError("client_id longer than 32767 bytes")
    out = bytearray(
        _FRAME_AND_REQUEST_HEADER.pack(
            0, api_key, api_version, correlation_id, -1 if client is None else len(client)
        )
    )
    if client:
        out += client
    out += header_tags
    writer(out, payload)
    _LENGTH.pack_into(out, 0, len(out) - 4)
    return bytes(out)


def decode_response(
    api_key: int, api_version: int, frame: bytes | bytearray | memoryview
) -> tuple[int, ResponsePayload]:
    """Decode a response frame (length prefix removed): ``(correlation_id, payload)``.

    Raises ``MalformedResponse`` when it does not decode.
    """
    cls = response_class(api_key, api_version)
    data = _readonly(frame)
    if len(data) < 4:
        raise MalformedResponse(f"response header truncated: {len(data)} bytes")
    (correlation_id,) = _CORRELATION.unpack_from(data, 0)
    pos = 4
    if response_header_version(api_key, api_version):
        pos = _skip_tagged_fields(data, pos, MalformedResponse)
    problem = _guard(cls, data, pos)
    if problem is not None:
        raise MalformedResponse(
            f"cannot decode {cls.__qualname__} (correlation id {correlation_id}): {problem}"
        )
    try:
        payload, _end = _reader_for(cls)(data, pos)
    except Exception as exc:
        raise MalformedResponse(
            f"cannot decode {cls.__qualname__} (correlation id {correlation_id}): {exc!r}"
        ) from exc
    return correlation_id, payload
