"""The sans-IO client connection: ids, pairing, acks=0, chunking, headers, re-framing.

No sockets and no sleeping: responses are encoded with the broker's own codec and fed
to the connection as bytes.
"""

from __future__ import annotations

import random
import struct
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from protocol.builders import request_builder, response_builder
from protocol.client import MAX_CORRELATION_ID, ClientConnection, InFlightRequest, Response
from protocol.codec import encode_request, encode_response, parse_request_header
from protocol.errors import (
    ConnectionClosed,
    FrameTooLarge,
    MalformedResponse,
    ProtocolError,
    UnexpectedResponse,
)
from protocol.record_builder import build_record_batch

PRODUCE, METADATA, API_VERSIONS = 0, 3, 18


def _metadata_request(version: int) -> Any:
    return request_builder(METADATA, version).MetadataRequest(
        topics=(),
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )


def _metadata_response(version: int, cluster_id: str = "c", port: int = 9092) -> Any:
    b = response_builder(METADATA, version)
    return b.MetadataResponse(
        throttle_time=0,
        brokers=(b.MetadataResponseBroker(node_id=1, host="h", port=port, rack=None),),
        cluster_id=cluster_id,
        controller_id=1,
        topics=(),
    )


def _api_versions_request(version: int) -> Any:
    return request_builder(API_VERSIONS, version).ApiVersionsRequest(
        client_software_name="t", client_software_version="1"
    )


def _api_versions_response(version: int) -> Any:
    b = response_builder(API_VERSIONS, version)
    return b.ApiVersionsResponse(
        error_code=0,
        api_keys=(b.ApiVersion(api_key=METADATA, min_version=0, max_version=12),),
        throttle_time=0,
    )


def _produce_request(acks: int) -> Any:
    b = request_builder(PRODUCE, 9)
    return b.ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout=1000,
        topic_data=(
            b.TopicProduceData(
                name="t",
                partition_data=(
                    b.PartitionProduceData(
                        index=0, records=build_record_batch([(None, b"v", ())], timestamp_ms=1)
                    ),
                ),
            ),
        ),
    )


def _answer(correlation_id: int, api_key: int, version: int, payload: Any) -> bytes:
    return encode_response(api_key, version, correlation_id, payload)


# -------------------------------------------------------------------- correlation ids


def test_correlation_ids_count_up_per_connection_and_the_header_carries_them() -> None:
    conn = ClientConnection("me")
    sent = [conn.send(METADATA, 4, _metadata_request(4)) for _ in range(3)]
    assert [o.correlation_id for o in sent] == [0, 1, 2]
    for outgoing in sent:
        (size,) = struct.unpack_from(">i", outgoing.data)
        assert size == len(outgoing.data) - 4
        header, _ = parse_request_header(outgoing.data[4:])
        assert (header.api_key, header.api_version) == (METADATA, 4)
        assert header.correlation_id == outgoing.correlation_id
        assert header.client_id == "me"
    assert conn.in_flight == 3
    assert ClientConnection().next_correlation_id == 0  # another connection starts over


def test_correlation_ids_wrap_within_int32() -> None:
    conn = ClientConnection()
    conn._next_correlation_id = MAX_CORRELATION_ID
    assert conn.send(METADATA, 4, _metadata_request(4)).correlation_id == MAX_CORRELATION_ID
    assert conn.send(METADATA, 4, _metadata_request(4)).correlation_id == 0


def test_a_body_of_another_version_is_refused_and_takes_no_id() -> None:
    conn = ClientConnection()
    with pytest.raises(ValueError):
        conn.send(METADATA, 9, _metadata_request(4))
    assert (conn.next_correlation_id, conn.in_flight) == (0, 0)


# -------------------------------------------------------------------- pairing


def test_responses_are_paired_in_order_and_decoded_with_their_request_version() -> None:
    conn = ClientConnection()
    a = conn.send(METADATA, 4, _metadata_request(4))
    b = conn.send(API_VERSIONS, 3, _api_versions_request(3))
    c = conn.send(METADATA, 9, _metadata_request(9))
    data = (
        _answer(a.correlation_id, METADATA, 4, _metadata_response(4, "first"))
        + _answer(b.correlation_id, API_VERSIONS, 3, _api_versions_response(3))
        + _answer(c.correlation_id, METADATA, 9, _metadata_response(9, "third"))
    )
    responses = conn.receive(data)
    assert [(r.correlation_id, r.api_key, r.api_version) for r in responses] == [
        (0, METADATA, 4),
        (1, API_VERSIONS, 3),
        (2, METADATA, 9),
    ]
    assert conn.in_flight == 0
    first: Any = responses[0].body
    versions: Any = responses[1].body
    third: Any = responses[2].body
    assert first.cluster_id == "first"
    assert third.cluster_id == "third"
    assert [int(k.api_key) for k in versions.api_keys] == [METADATA]


def test_a_response_out_of_order_is_an_error_and_closes_the_connection() -> None:
    conn = ClientConnection()
    first = conn.send(METADATA, 4, _metadata_request(4))
    second = conn.send(METADATA, 4, _metadata_request(4))
    good = _answer(first.correlation_id, METADATA, 4, _metadata_response(4))
    stray = _answer(second.correlation_id, METADATA, 4, _metadata_response(4))
    with pytest.raises(UnexpectedResponse, match="does not match"):
        conn.receive(stray + good)
    assert conn.closed
    # Nothing of that call was delivered: both requests are still unanswered.
    assert conn.connection_lost() == [
        InFlightRequest(first.correlation_id, METADATA, 4),
        InFlightRequest(second.correlation_id, METADATA, 4),
    ]
    with pytest.raises(ConnectionClosed):
        conn.send(METADATA, 4, _metadata_request(4))
    with pytest.raises(ConnectionClosed):
        conn.receive(good)


def test_a_good_response_before_a_bad_one_in_the_same_data_is_not_delivered() -> None:
    conn = ClientConnection()
    first = conn.send(METADATA, 4, _metadata_request(4))
    conn.send(METADATA, 4, _metadata_request(4))
    good = _answer(first.correlation_id, METADATA, 4, _metadata_response(4))
    with pytest.raises(UnexpectedResponse):
        conn.receive(good + _answer(99, METADATA, 4, _metadata_response(4)))
    assert len(conn.connection_lost()) == 2


def test_a_response_with_nothing_in_flight_is_an_error() -> None:
    conn = ClientConnection()
    with pytest.raises(UnexpectedResponse, match="no request in flight"):
        conn.receive(_answer(0, METADATA, 4, _metadata_response(4)))
    assert conn.closed


def test_a_frame_too_short_for_a_correlation_id_is_an_error() -> None:
    conn = ClientConnection()
    conn.send(METADATA, 4, _metadata_request(4))
    with pytest.raises(MalformedResponse):
        conn.receive(b"\x00\x00\x00\x02\x00\x00")
    assert conn.closed


def test_a_framing_error_closes_the_connection() -> None:
    conn = ClientConnection(max_frame_bytes=100)
    conn.send(METADATA, 4, _metadata_request(4))
    with pytest.raises(FrameTooLarge):
        conn.receive(struct.pack(">i", 101))
    assert conn.closed
    assert len(conn.connection_lost()) == 1


def test_connection_lost_returns_the_unanswered_requests_once() -> None:
    conn = ClientConnection()
    a = conn.send(METADATA, 4, _metadata_request(4))
    b = conn.send(API_VERSIONS, 0, request_builder(API_VERSIONS, 0).ApiVersionsRequest())
    conn.receive(_answer(a.correlation_id, METADATA, 4, _metadata_response(4)))
    assert conn.connection_lost() == [InFlightRequest(b.correlation_id, API_VERSIONS, 0)]
    assert conn.connection_lost() == []
    assert conn.closed


# -------------------------------------------------------------------- acks=0


def test_an_acks_0_produce_takes_no_slot_and_later_answers_pair_by_order() -> None:
    conn = ClientConnection()
    before = conn.send(METADATA, 4, _metadata_request(4))
    fire = conn.send(PRODUCE, 9, _produce_request(acks=0))
    after = conn.send(METADATA, 4, _metadata_request(4))
    assert not fire.expects_response and before.expects_response and after.expects_response
    assert fire.correlation_id == 1  # it still takes an id
    assert conn.in_flight == 2
    responses = conn.receive(
        _answer(before.correlation_id, METADATA, 4, _metadata_response(4))
        + _answer(after.correlation_id, METADATA, 4, _metadata_response(4))
    )
    assert [r.correlation_id for r in responses] == [0, 2]


def test_an_acks_1_produce_is_in_flight_and_the_default_can_be_overridden() -> None:
    conn = ClientConnection()
    assert conn.send(PRODUCE, 9, _produce_request(acks=1)).expects_response
    assert conn.send(PRODUCE, 9, _produce_request(acks=-1)).expects_response
    assert not conn.send(METADATA, 4, _metadata_request(4), expect_response=False).expects_response
    assert conn.in_flight == 2


# -------------------------------------------------------------------- chunking


@pytest.mark.parametrize("seed", range(10))
def test_responses_fed_in_random_chunks_come_out_whole_and_in_order(seed: int) -> None:
    rng = random.Random(seed)
    conn = ClientConnection()
    expected: list[tuple[int, str]] = []
    stream = bytearray()
    for i in range(40):
        version = rng.choice((4, 9))
        outgoing = conn.send(METADATA, version, _metadata_request(version))
        cluster_id = f"cluster-{i}-" + "x" * rng.randrange(0, 300)
        stream += _answer(
            outgoing.correlation_id, METADATA, version, _metadata_response(version, cluster_id)
        )
        expected.append((outgoing.correlation_id, cluster_id))
    got: list[Response] = []
    pos = 0
    while pos < len(stream):
        size = rng.choice((0, 1, 2, 3, 5, rng.randrange(1, 600)))
        got.extend(conn.receive(stream[pos : pos + size]))
        pos += size
    bodies: list[Any] = [r.body for r in got]
    assert [(r.correlation_id, b.cluster_id) for r, b in zip(got, bodies, strict=True)] == expected
    assert conn.in_flight == 0


# -------------------------------------------------------------------- header versions


def test_header_v0_and_v1_responses_decode_with_the_right_header() -> None:
    conn = ClientConnection()
    old = conn.send(METADATA, 4, _metadata_request(4))  # not flexible: response header v0
    new = conn.send(METADATA, 9, _metadata_request(9))  # flexible: response header v1
    versions = conn.send(API_VERSIONS, 3, _api_versions_request(3))  # flexible, header v0
    old_frame = _answer(old.correlation_id, METADATA, 4, _metadata_response(4, port=1))
    new_frame = _answer(new.correlation_id, METADATA, 9, _metadata_response(9, port=2))
    versions_frame = _answer(versions.correlation_id, API_VERSIONS, 3, _api_versions_response(3))
    # Header v1 adds one (empty) tagged-fields byte after the correlation id.
    assert new_frame[8] == 0
    responses = conn.receive(old_frame + new_frame + versions_frame)
    bodies: list[Any] = [r.body for r in responses]
    assert bodies[0].brokers[0].port == 1
    assert bodies[1].brokers[0].port == 2
    assert bodies[2].error_code == ErrorCode.none
    assert [int(k.max_version) for k in bodies[2].api_keys] == [12]


def test_an_api_versions_answer_in_v0_is_read_as_kafka_reads_it() -> None:
    """A broker without the version asked answers ApiVersions with a v0 body."""
    from protocol.api_registry import KIO_VERSIONS
    from protocol.codec import unsupported_version_api_versions_response

    conn = ClientConnection()
    # A version kio has no schema of can only be sent as a ready frame.
    frame = struct.pack(">hhih", API_VERSIONS, 99, 0, -1) + b"\x00\x00\x00"
    asked = conn.send_frame(frame, expect_response=True)
    flexible = conn.send(API_VERSIONS, 3, _api_versions_request(3))
    specs = [KIO_VERSIONS[METADATA]]
    responses = conn.receive(
        unsupported_version_api_versions_response(asked.correlation_id, specs)
        + unsupported_version_api_versions_response(flexible.correlation_id, specs)
    )
    for response in responses:
        body: Any = response.body
        assert body.error_code == ErrorCode.unsupported_version
        assert [int(k.api_key) for k in body.api_keys] == [METADATA]


# -------------------------------------------------------------------- lazy bodies


def test_a_body_that_does_not_decode_fails_on_access_and_the_stream_goes_on() -> None:
    conn = ClientConnection()
    bad = conn.send(METADATA, 4, _metadata_request(4))
    good = conn.send(METADATA, 4, _metadata_request(4))
    truncated = struct.pack(">ii", 8, bad.correlation_id) + b"\x00\x00\x00\x00"
    responses = conn.receive(
        truncated + _answer(good.correlation_id, METADATA, 4, _metadata_response(4, "ok"))
    )
    assert responses[0].frame == truncated[4:]
    with pytest.raises(ProtocolError):
        _ = responses[0].body
    body: Any = responses[1].body
    assert body.cluster_id == "ok"
    assert responses[1].body is body  # decoded once
    assert not conn.closed


# -------------------------------------------------------------------- send_frame


def test_send_frame_rewrites_only_the_correlation_id() -> None:
    conn = ClientConnection("not-used-for-frames")
    conn.send(METADATA, 4, _metadata_request(4))
    captured = encode_request(METADATA, 9, 777, "captured-client", _metadata_request(9))[4:]
    outgoing = conn.send_frame(captured, expect_response=True)
    assert outgoing.correlation_id == 1
    assert outgoing.data == encode_request(METADATA, 9, 1, "captured-client", _metadata_request(9))
    assert conn.in_flight == 2
    conn.receive(_answer(0, METADATA, 4, _metadata_response(4)))
    (response,) = conn.receive(_answer(1, METADATA, 9, _metadata_response(9, "framed")))
    assert (response.api_key, response.api_version) == (METADATA, 9)
    body: Any = response.body
    assert body.cluster_id == "framed"


def test_send_frame_of_an_acks_0_produce_takes_no_slot() -> None:
    conn = ClientConnection()
    frame = encode_request(PRODUCE, 9, 5, "c", _produce_request(acks=0))[4:]
    outgoing = conn.send_frame(memoryview(frame), expect_response=False)
    assert outgoing.correlation_id == 0
    assert struct.unpack_from(">i", outgoing.data, 8) == (0,)
    assert outgoing.data[12:] == frame[8:]
    assert conn.in_flight == 0


def test_send_frame_needs_a_header() -> None:
    with pytest.raises(ValueError):
        ClientConnection().send_frame(b"\x00\x03\x00", expect_response=True)
