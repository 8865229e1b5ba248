"""Request/response encoding and decoding: our header handling around kio's bodies.

Frames here are what ``FrameDecoder`` yields: the bytes *after* the 4-byte length.
Everything we *produce* is a full frame, length prefix included, ready for the socket.

Why the header is ours and not kio's: the broker must read the api key, version and
correlation id of *every* request -- including unknown APIs and versions kio has no
schema for -- so it can answer UNSUPPORTED_VERSION (or log and close) with the right
correlation id. So the fixed part is read with ``struct`` first, and only the body goes
through kio's native reader.

``EncodedResponse`` is a response body encoded once and framed per answer (with each
request's correlation id): the broker's cached ApiVersions and Metadata answers.

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

import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields
from typing import Any, Final

from kio.schema.api_versions.v0.response import ApiVersion as ApiVersionV0
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader
from kio.static.constants import EntityType
from kio.static.primitive import i16
from kio.static.protocol import RequestPayload, ResponsePayload

from protocol.api_registry import (
    KIO_VERSIONS,
    ApiSpec,
    request_class,
    request_header_version,
    response_class,
    response_header_version,
)
from protocol.body_guards import check_body, check_tagged_field_count, read_uvarint
from protocol.errors import MalformedRequest, MalformedResponse, UnsupportedApiKey
from protocol.fast_writers import writer_for

__all__ = (
    "EncodedResponse",
    "RequestHeader",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
    "encode_response_body",
    "frame_encoded_response",
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


def _skip_tagged_fields(
    buf: bytes | bytearray | memoryview, pos: int, error: type[Exception]
) -> int:
    """Step over a tagged-field section; no header tag is defined that we need."""
    if pos < len(buf) and buf[pos] == 0:  # the usual case: no tags
        return pos + 1
    count, pos = read_uvarint(buf, pos, error)
    check_tagged_field_count(count, "the header", error)
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos, error)
        size, pos = read_uvarint(buf, pos, error)
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
# Before kio's native reader sees a body, the guard ``protocol.body_guards`` generates
# from the same schema checks it: every array count against the bytes left (kio would
# otherwise reserve memory for whatever count a peer claims, and a failed allocation
# aborts the process), no null where the schema has none, tagged fields filling their
# sizes, the body within the frame. Its docstring tells the whole story.

_guard: Final = check_body


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

_unpack_request_header = _REQUEST_HEADER_FIXED.unpack_from

# (api key, api version) -> request header version, for the pairs kio has a schema of
# (so a peer sending random versions cannot grow it); other pairs take the slow path.
_request_header_versions: dict[tuple[int, int], int] = {}


def _request_header_version_of(api_key: int, api_version: int) -> int:
    try:
        header_version = request_header_version(api_key, api_version)
    except UnsupportedApiKey:
        return 1
    if KIO_VERSIONS[api_key].supports(api_version):
        _request_header_versions[api_key, api_version] = header_version
    return header_version


# ``RequestHeader`` is frozen: its ``__init__`` calls ``object.__setattr__`` per field.
# Setting the slots through their descriptors is what that call does, at less than half
# the cost -- this runs once per request. (The tests compare with the constructor.)
_new_object = object.__new__
_set_api_key, _set_api_version, _set_correlation_id, _set_client_id = (
    RequestHeader.__dict__[field.name].__set__ for field in fields(RequestHeader)
)


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
    api_key, api_version, correlation_id, client_len = _unpack_request_header(frame, 0)
    client_id: str | None
    if client_len < 0:  # Kafka reads any negative length as null
        client_id = None
        pos = 10
    else:
        pos = 10 + client_len
        if pos > size:
            raise MalformedRequest(
                f"client_id truncated: needs {client_len} bytes, {size - 10} left"
            )
        # Java's String(bytes, UTF_8) replaces bad sequences; do the same.
        client_id = str(frame[10:pos], "utf-8", "replace")
    header_version = _request_header_versions.get((api_key, api_version))
    if header_version is None:
        header_version = _request_header_version_of(api_key, api_version)
    if header_version >= 2:
        if pos < size and frame[pos] == 0:  # the usual case: no tags
            pos += 1
        else:
            pos = _skip_tagged_fields(frame, pos, MalformedRequest)
    header = _new_object(RequestHeader)
    _set_api_key(header, api_key)
    _set_api_version(header, api_version)
    _set_correlation_id(header, correlation_id)
    _set_client_id(header, client_id)
    return header, pos


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


@dataclass(frozen=True, slots=True)
class EncodedResponse:
    """A response whose body is already encoded for one API version.

    For the answers a broker gives many times over (ApiVersions per version, Metadata
    until the cluster changes): encoded once, each later answer only puts a header in
    front. ``payload`` stays for whoever reads the answer (capture, the error policy).
    """

    api_key: int
    api_version: int
    payload: ResponsePayload
    body: bytes
    header_tags: bytes


def encode_response_body(
    api_key: int, api_version: int, payload: ResponsePayload
) -> EncodedResponse:
    """Encode ``payload``'s body once, for ``frame_encoded_response`` to reuse."""
    _check_payload(payload, api_key, api_version, EntityType.response)
    body = bytearray()
    writer_for(type(payload))(body, payload)
    tags = _NO_TAGGED_FIELDS if response_header_version(api_key, api_version) else b""
    return EncodedResponse(api_key, api_version, payload, bytes(body), tags)


def frame_encoded_response(correlation_id: int, encoded: EncodedResponse) -> bytes:
    """The full frame of an already encoded body: what ``encode_response`` returns."""
    tags = encoded.header_tags
    body = encoded.body
    return b"".join(
        (_FRAME_AND_CORRELATION.pack(4 + len(tags) + len(body), correlation_id), tags, body)
    )


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
