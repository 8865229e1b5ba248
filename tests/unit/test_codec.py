"""Request/response encoding and decoding: golden bytes, round trips, malformed input.

Golden byte strings are written out by hand from the protocol guide's layouts
(https://kafka.apache.org/protocol), never produced by the code under test.
"""

from __future__ import annotations

import dataclasses
import os
import struct
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol import (
    KIO_VERSIONS,
    ErrorCode,
    FrameDecoder,
    MalformedRequest,
    MalformedResponse,
    ProtocolError,
    RequestHeader,
    UnsupportedApiKey,
    UnsupportedVersion,
    codec,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    parse_request_header,
    request_builder,
    request_header_version,
    response_builder,
    unsupported_version_api_versions_response,
)
from testkit.kio_samples import sample as _sample

# --------------------------------------------------------------------------- golden bytes

# ApiVersions v0 request, header v1, client_id "kafka-python", empty body.
API_VERSIONS_V0_REQUEST = (
    b"\x00\x00\x00\x16"  # frame length 22
    b"\x00\x12"  # api_key 18
    b"\x00\x00"  # api_version 0
    b"\x00\x00\x00\x01"  # correlation_id 1
    b"\x00\x0c" + b"kafka-python"  # client_id: int16 length + bytes
)

# ApiVersions v0 response, header v0: error 0 and two api entries.
API_VERSIONS_V0_RESPONSE = (
    b"\x00\x00\x00\x16"  # frame length 22
    b"\x00\x00\x00\x01"  # correlation_id 1
    b"\x00\x00"  # error_code NONE
    b"\x00\x00\x00\x02"  # api_keys: int32 count 2
    b"\x00\x00\x00\x03\x00\x09"  # Produce 3..9
    b"\x00\x12\x00\x00\x00\x03"  # ApiVersions 0..3
)

# ApiVersions v3 request: flexible, so header v2 (client_id stays a legacy int16
# string, then an empty tagged-field section) and a compact body.
API_VERSIONS_V3_REQUEST = (
    b"\x00\x00\x00\x24"  # frame length 36
    b"\x00\x12\x00\x03"  # api_key 18, api_version 3
    b"\x00\x00\x00\x2a"  # correlation_id 42
    b"\x00\x07"
    + b"rdkafka"  # client_id, legacy string even in header v2
    + b"\x00"  # header tagged fields: none
    + b"\x0b"
    + b"librdkafka"  # client_software_name: compact string, uvarint len+1 = 11
    + b"\x06"
    + b"2.4.0"  # client_software_version: uvarint 6 = 5 + 1
    + b"\x00"  # body tagged fields: none
)

# ApiVersions v3 response: flexible body but still response header v0 (no tag byte).
API_VERSIONS_V3_RESPONSE = (
    b"\x00\x00\x00\x1a"  # frame length 26
    b"\x00\x00\x00\x2a"  # correlation_id 42 -- and no header tagged fields
    b"\x00\x00"  # error_code NONE
    b"\x03"  # api_keys: compact array, uvarint 2 + 1
    b"\x00\x00\x00\x03\x00\x0d\x00"  # Produce 3..13, entry tags
    b"\x00\x12\x00\x00\x00\x04\x00"  # ApiVersions 0..4, entry tags
    b"\x00\x00\x00\x00"  # throttle_time_ms 0
    b"\x00"  # tagged fields: none
)

# Metadata v1 request (not flexible): header v1 with a null client_id, one topic.
METADATA_V1_REQUEST = (
    b"\x00\x00\x00\x12"  # frame length 18
    b"\x00\x03\x00\x01"  # api_key 3, api_version 1
    b"\x00\x00\x00\x07"  # correlation_id 7
    b"\xff\xff"  # client_id null
    b"\x00\x00\x00\x01"  # topics: int32 count 1
    b"\x00\x02" + b"t1"  # name
)

# Heartbeat v3 (not flexible) and v4 (flexible) responses: header v0 vs v1.
HEARTBEAT_V3_RESPONSE = b"\x00\x00\x00\x0a\x00\x00\x00\x09\x00\x00\x00\x00\x00\x1b"
HEARTBEAT_V4_RESPONSE = (
    b"\x00\x00\x00\x0c"  # frame length 12
    b"\x00\x00\x00\x09"  # correlation_id 9
    b"\x00"  # response header v1: tagged fields
    b"\x00\x00\x00\x00"  # throttle_time_ms
    b"\x00\x1b"  # error_code 27 REBALANCE_IN_PROGRESS
    b"\x00"  # body tagged fields
)


def _only_frame(data: bytes) -> bytes:
    (frame,) = FrameDecoder().feed(data)
    return frame


def test_api_versions_v0_request_golden() -> None:
    frame = _only_frame(API_VERSIONS_V0_REQUEST)
    header, offset = parse_request_header(frame)
    assert header == RequestHeader(18, 0, 1, "kafka-python")
    assert offset == len(frame)
    payload = decode_request(header, frame, offset)
    assert payload == request_builder(18, 0).ApiVersionsRequest()
    assert encode_request(18, 0, 1, "kafka-python", payload) == API_VERSIONS_V0_REQUEST


def test_api_versions_v0_response_golden() -> None:
    b = response_builder(18, 0)
    payload = b.ApiVersionsResponse(
        error_code=0,
        api_keys=(
            b.ApiVersion(api_key=0, min_version=3, max_version=9),
            b.ApiVersion(api_key=18, min_version=0, max_version=3),
        ),
        throttle_time=0,  # not in v0: dropped
    )
    assert encode_response(18, 0, 1, payload) == API_VERSIONS_V0_RESPONSE
    assert decode_response(18, 0, API_VERSIONS_V0_RESPONSE[4:]) == (1, payload)


def test_api_versions_v3_request_golden() -> None:
    frame = _only_frame(API_VERSIONS_V3_REQUEST)
    header, offset = parse_request_header(frame)
    assert header == RequestHeader(18, 3, 42, "rdkafka")
    assert offset == 2 + 2 + 4 + 2 + 7 + 1
    payload = decode_request(header, frame, offset)
    assert payload.client_software_name == "librdkafka"  # type: ignore[union-attr]
    assert payload.client_software_version == "2.4.0"  # type: ignore[union-attr]
    assert encode_request(18, 3, 42, "rdkafka", payload) == API_VERSIONS_V3_REQUEST


def test_api_versions_v3_response_uses_header_v0_golden() -> None:
    b = response_builder(18, 3)
    payload = b.ApiVersionsResponse(
        error_code=ErrorCode.none,
        api_keys=(
            b.ApiVersion(api_key=0, min_version=3, max_version=13),
            b.ApiVersion(api_key=18, min_version=0, max_version=4),
        ),
        throttle_time=0,
    )
    assert encode_response(18, 3, 42, payload) == API_VERSIONS_V3_RESPONSE
    assert decode_response(18, 3, API_VERSIONS_V3_RESPONSE[4:]) == (42, payload)


def test_our_api_versions_v3_response_reads_in_kafka_python() -> None:
    old_api = pytest.importorskip("kafka.protocol.old.api_versions")
    parsed = old_api.ApiVersionsResponse_v3.decode(
        API_VERSIONS_V3_RESPONSE, header=True, framed=True
    )
    assert parsed.error_code == 0
    assert [tuple(entry)[:3] for entry in parsed.api_keys] == [(0, 3, 13), (18, 0, 4)]


def test_metadata_v1_request_golden() -> None:
    frame = _only_frame(METADATA_V1_REQUEST)
    header, offset = parse_request_header(frame)
    assert header == RequestHeader(3, 1, 7, None)
    assert offset == 10
    b = request_builder(3, 1)
    expected = b.MetadataRequest(topics=(b.MetadataRequestTopic(name="t1"),))
    assert decode_request(header, frame, offset) == expected
    assert encode_request(3, 1, 7, None, expected) == METADATA_V1_REQUEST


def test_metadata_v1_null_topics_means_all_topics() -> None:
    frame = METADATA_V1_REQUEST[4:14] + b"\xff\xff\xff\xff"
    header, offset = parse_request_header(frame)
    assert decode_request(header, frame, offset) == request_builder(3, 1).MetadataRequest(
        topics=None
    )


@pytest.mark.parametrize(
    ("version", "golden"), [(3, HEARTBEAT_V3_RESPONSE), (4, HEARTBEAT_V4_RESPONSE)]
)
def test_response_header_follows_flexibility(version: int, golden: bytes) -> None:
    b = response_builder(12, version)
    payload = b.HeartbeatResponse(throttle_time=0, error_code=27)
    assert encode_response(12, version, 9, payload) == golden
    assert decode_response(12, version, golden[4:]) == (9, payload)


# --------------------------------------------------------------------------- round trips

# Every API and version kio has: besides the round trip itself, this proves the body
# guard (see codec.py) never rejects a well-formed message of any schema.
ROUND_TRIP_CASES = [
    (key, version)
    for key, spec in KIO_VERSIONS.items()
    for version in range(spec.min_version, spec.max_version + 1)
]


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize(("api_key", "api_version"), ROUND_TRIP_CASES)
def test_request_round_trip(api_key: int, api_version: int, sparse: bool) -> None:
    b = request_builder(api_key, api_version)
    payload = _sample(b, b.payload_class, sparse)
    data = encode_request(api_key, api_version, 12345, "client-1", payload)
    frame = _only_frame(data)
    header, offset = parse_request_header(frame)
    assert header == RequestHeader(api_key, api_version, 12345, "client-1")
    assert decode_request(header, frame, offset) == payload


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize(("api_key", "api_version"), ROUND_TRIP_CASES)
def test_response_round_trip(api_key: int, api_version: int, sparse: bool) -> None:
    b = response_builder(api_key, api_version)
    payload = _sample(b, b.payload_class, sparse)
    frame = _only_frame(encode_response(api_key, api_version, -7, payload))
    assert decode_response(api_key, api_version, frame) == (-7, payload)


def test_request_header_tagged_fields_are_skipped() -> None:
    # Header v2 with one (unknown) tagged field: tag 0, size 2, "hi".
    frame = bytearray(API_VERSIONS_V3_REQUEST[4:])
    at = 2 + 2 + 4 + 2 + 7
    frame[at : at + 1] = b"\x01\x00\x02hi"
    header, offset = parse_request_header(bytes(frame))
    assert offset == at + 5
    payload = decode_request(header, frame, offset)  # a bytearray is accepted too
    assert payload.client_software_name == "librdkafka"  # type: ignore[union-attr]


def test_non_ascii_client_id_and_trailing_bytes() -> None:
    client = "clïent-ü"
    payload = request_builder(12, 4).HeartbeatRequest(
        group_id="g", generation_id=1, member_id="m", group_instance_id=None
    )
    frame = _only_frame(encode_request(12, 4, 1, client, payload)) + b"trailing"
    header, offset = parse_request_header(frame)
    assert header.client_id == client
    # Kafka's readers stop at the last field; so do we.
    assert decode_request(header, frame, offset) == payload


def test_encode_refuses_a_payload_of_another_version() -> None:
    payload = response_builder(12, 3).HeartbeatResponse(throttle_time=0, error_code=0)
    with pytest.raises(ValueError, match="version 4"):
        encode_response(12, 4, 1, payload)
    with pytest.raises(ValueError):
        encode_request(12, 3, 1, None, payload)


# --------------------------------------------------------------------------- malformed


@pytest.mark.parametrize("size", range(10))
def test_truncated_fixed_header(size: int) -> None:
    with pytest.raises(MalformedRequest):
        parse_request_header(METADATA_V1_REQUEST[4 : 4 + size])


def test_truncated_client_id() -> None:
    frame = API_VERSIONS_V0_REQUEST[4:-1]
    with pytest.raises(MalformedRequest, match="client_id"):
        parse_request_header(frame)


def test_truncated_tagged_fields_of_header_v2() -> None:
    end_of_client_id = 2 + 2 + 4 + 2 + 7
    frame = API_VERSIONS_V3_REQUEST[4 : 4 + end_of_client_id]
    with pytest.raises(MalformedRequest):
        parse_request_header(frame)
    with pytest.raises(MalformedRequest):
        parse_request_header(frame + b"\x01\x00\x05ab")  # tag claims 5 bytes, 2 left


def test_truncated_body() -> None:
    frame = METADATA_V1_REQUEST[4:-1]
    header, offset = parse_request_header(frame)
    with pytest.raises(MalformedRequest) as info:
        decode_request(header, frame, offset)
    assert "correlation id 7" in str(info.value)
    assert isinstance(info.value, ProtocolError)


def test_negative_array_length_is_malformed() -> None:
    frame = METADATA_V1_REQUEST[4:14] + b"\xff\xff\xff\xf0"
    header, offset = parse_request_header(frame)
    with pytest.raises(MalformedRequest):
        decode_request(header, frame, offset)


def test_unknown_api_key_header_is_still_parsed() -> None:
    frame = struct.pack(">hhih", 9999, 0, 77, 3) + b"abc" + b"body"
    header, offset = parse_request_header(frame)
    assert header == RequestHeader(9999, 0, 77, "abc")  # enough to answer or log
    assert offset == 13
    with pytest.raises(UnsupportedApiKey) as info:
        decode_request(header, frame, offset)
    assert info.value.api_key == 9999


def test_unsupported_version_header_is_still_parsed() -> None:
    frame = struct.pack(">hhih", 0, 0, 78, -1) + b"\x00\x01"  # Produce v0: gone from Kafka 4
    header, offset = parse_request_header(frame)
    assert header == RequestHeader(0, 0, 78, None)
    with pytest.raises(UnsupportedVersion) as info:
        decode_request(header, frame, offset)
    assert (info.value.api_key, info.value.api_version) == (0, 0)


def test_future_api_versions_request_header_is_read_as_v2() -> None:
    # A client newer than kio asks ApiVersions v9 (flexible): the body offset must
    # account for the header's tagged fields so the broker can answer properly.
    frame = struct.pack(">hhih", 18, 9, 5, 1) + b"x" + b"\x00" + b"\x01\x00"
    header, offset = parse_request_header(frame)
    assert header == RequestHeader(18, 9, 5, "x")
    assert offset == 12
    with pytest.raises(UnsupportedVersion):
        decode_request(header, frame, offset)


def test_parsed_header_is_a_plain_frozen_request_header() -> None:
    # parse_request_header fills the slots without calling __init__: the result must be
    # indistinguishable from the constructor's.
    header, _ = parse_request_header(METADATA_V1_REQUEST[4:])
    expected = RequestHeader(3, 1, 7, None)
    assert type(header) is RequestHeader
    assert header == expected
    assert hash(header) == hash(expected)
    assert repr(header) == repr(expected)
    assert dataclasses.replace(header, correlation_id=8) == RequestHeader(3, 1, 8, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        header.api_key = 4  # type: ignore[misc]


def test_header_version_cache_holds_only_versions_kio_has() -> None:
    known = {
        (key, version)
        for key, spec in KIO_VERSIONS.items()
        for version in range(spec.min_version, spec.max_version + 1)
    }
    for api_key, api_version in [(18, 3), (18, 99), (18, -5), (3, 1000), (30000, 1), (-1, 0)]:
        frame = struct.pack(">hhih", api_key, api_version, 1, -1) + b"\x00"
        header, _ = parse_request_header(frame)
        assert (header.api_key, header.api_version) == (api_key, api_version)
    assert set(codec._request_header_versions) <= known
    assert (18, 3) in codec._request_header_versions


@settings(max_examples=300, deadline=None)
@given(
    api_key=st.sampled_from([0, 3, 12, 18, 68, 9999, -1]),
    api_version=st.integers(-3, 20),
    correlation_id=st.integers(-(2**31), 2**31 - 1),
    client=st.none() | st.binary(max_size=12),
    tags=st.sampled_from([b"\x00", b"\x01\x00\x02hi", b"\x02\x00\x00\x05\x01x"]),
    body=st.binary(max_size=4),
)
def test_header_fields_and_body_offset(
    api_key: int,
    api_version: int,
    correlation_id: int,
    client: bytes | None,
    tags: bytes,
    body: bytes,
) -> None:
    length = -1 if client is None else len(client)
    frame = struct.pack(">hhih", api_key, api_version, correlation_id, length) + (client or b"")
    try:
        flexible = request_header_version(api_key, api_version) >= 2
    except UnsupportedApiKey:
        flexible = False  # an unknown api key is read as header v1
    offset = len(frame) + (len(tags) if flexible else 0)
    frame += (tags if flexible else b"") + body
    client_id = None if client is None else client.decode("utf-8", "replace")
    for data in (frame, bytearray(frame), memoryview(frame)):
        assert parse_request_header(data) == (
            RequestHeader(api_key, api_version, correlation_id, client_id),
            offset,
        )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=st.sampled_from([(0, 9), (0, 3), (1, 12), (1, 4), (3, 1), (3, 12), (11, 5), (18, 3)]),
    body=st.binary(max_size=200),
)
def test_random_body_decodes_or_raises_malformed(case: tuple[int, int], body: bytes) -> None:
    """Whatever a peer sends after a valid header, the broker gets a payload or a
    MalformedRequest -- never another exception that could take it down."""
    api_key, api_version = case
    header_bytes = struct.pack(">hhih", api_key, api_version, 1, -1)
    if api_version >= {0: 9, 1: 12, 3: 9, 11: 6, 18: 3}[api_key]:
        header_bytes += b"\x00"
    frame = header_bytes + body
    header, offset = parse_request_header(frame)
    try:
        payload = decode_request(header, frame, offset)
    except MalformedRequest:
        return
    assert type(payload).__api_key__ == api_key


@settings(max_examples=300, deadline=None)
@given(frame=st.binary(max_size=40))
def test_random_frames_never_escape_protocol_errors(frame: bytes) -> None:
    try:
        header, offset = parse_request_header(frame)
        decode_request(header, frame, offset)
    except ProtocolError:
        pass


def test_malformed_response() -> None:
    with pytest.raises(MalformedResponse):
        decode_response(12, 4, b"\x00\x00")
    with pytest.raises(MalformedResponse):
        decode_response(12, 4, HEARTBEAT_V4_RESPONSE[4:-3])


# --------------------------------------------------------------------------- ApiVersions fallback


def test_unsupported_version_api_versions_response() -> None:
    apis = [KIO_VERSIONS[0], KIO_VERSIONS[18]]
    data = unsupported_version_api_versions_response(33, apis)
    # Hand-written: header v0 + ApiVersionsResponse v0 body.
    assert data == (
        b"\x00\x00\x00\x16"  # frame length 22
        b"\x00\x00\x00\x21"  # correlation_id 33
        b"\x00\x23"  # error_code 35 UNSUPPORTED_VERSION
        b"\x00\x00\x00\x02"
        b"\x00\x00\x00\x03\x00\x0d"
        b"\x00\x12\x00\x00\x00\x04"
    )
    correlation_id, payload = decode_response(18, 0, _only_frame(data))
    assert correlation_id == 33
    assert payload.error_code is ErrorCode.unsupported_version  # type: ignore[union-attr]
    assert int(ErrorCode.unsupported_version) == 35
    assert [
        (a.api_key, a.min_version, a.max_version)
        for a in payload.api_keys  # type: ignore[union-attr]
    ] == [(0, 3, 13), (18, 0, 4)]


def test_kafka_python_falls_back_to_v0_on_our_unsupported_version_answer() -> None:
    old_api = pytest.importorskip("kafka.protocol.old.api_versions")
    data = unsupported_version_api_versions_response(5, [KIO_VERSIONS[18]])
    # kafka-python sent v3 and parses the reply as v3; it must see error 35 and the range.
    parsed = old_api.ApiVersionsResponse_v3.decode(data, header=True, framed=True)
    assert parsed.error_code == 35
    assert [tuple(entry)[:3] for entry in parsed.api_keys] == [(18, 0, 4)]


# --------------------------------------------------------------------------- allocation bombs

_BOMB_SCRIPT = """
import struct
from protocol import MalformedRequest, parse_request_header, decode_request

def frame(api_key, version, flexible, body):
    head = struct.pack(">hhih", api_key, version, 1, -1) + (b"\\x00" if flexible else b"")
    return head + body

bombs = [
    frame(3, 12, True, b"\\xff\\xff\\xff\\xff\\x0f"),  # compact array of 2**32 - 2 topics
    frame(3, 12, True, b"\\xff\\xff\\xff\\xff\\x7f"),  # the largest uvarint kio accepts
    frame(3, 1, False, b"\\x7f\\xff\\xff\\xff"),  # legacy array of 2**31 - 1 topics
    frame(0, 9, True, b"\\x00\\x01\\x00\\x00\\x00\\x00\\xff\\xff\\xff\\xff\\x0f"),  # nested
]
for data in bombs:
    header, offset = parse_request_header(data)
    try:
        decode_request(header, data, offset)
    except MalformedRequest:
        print("MalformedRequest")
"""


def test_huge_array_counts_are_rejected_before_kio_allocates() -> None:
    """kio's native reader reserves 8 bytes per claimed element before reading any, and
    a failed allocation aborts the process. Run in a child so a regression shows up as
    a failed test instead of a dead test run (or a dead broker)."""
    result = subprocess.run(
        [sys.executable, "-c", _BOMB_SCRIPT],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "RUST_BACKTRACE": "0"},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["MalformedRequest"] * 4
