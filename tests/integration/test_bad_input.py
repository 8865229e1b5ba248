"""Hostile and odd input on raw TCP connections: the broker refuses it and lives on.

A peer's bad bytes are that peer's problem: the broker answers with Kafka's error code
where the protocol has one, or closes that one connection, and every other client goes
on working. Each test ends with an aiokafka produce/consume round trip on the same
broker to prove it. Requests are built with our own client connection (``RawClient`` on
``protocol.client``) so that the bytes are exactly what the test means to send, and then
corrupted on purpose; ``write`` sends bytes no client would.

Also here, because they need raw connections too: pipelining (responses leave in
request order even when a later one is ready first, and an acks=0 produce answers
nothing but keeps its place) and many concurrent connections.
"""

from __future__ import annotations

import asyncio
import random
import struct
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from kio.schema.errors import ErrorCode

from broker.app import MiniKafka
from protocol.builders import request_builder
from protocol.record_batch import compute_crc
from testkit.broker_process import BrokerProcess
from testkit.polling import wait_until
from testkit.raw_client import RawClient, answered_later
from testkit.requests import (
    API_VERSIONS_FIELDS,
    batch,
    fetch_fields,
    metadata_fields,
    produce_fields,
)
from tests.integration.conftest import running_cluster

PRODUCE, FETCH, LIST_OFFSETS, METADATA, API_VERSIONS = 0, 1, 2, 3, 18
PRODUCE_V, FETCH_V, LIST_OFFSETS_V, METADATA_V, API_VERSIONS_V = 9, 11, 7, 9, 3
SMALL_REQUEST_LIMIT = 4096  # socket.request.max.bytes for these tests
TIMEOUT = 10.0


async def open_raw(bootstrap: str) -> RawClient:
    """A raw connection whose reads give up after TIMEOUT."""
    return await RawClient.connect(bootstrap, timeout_s=TIMEOUT, client_id="bad-input")


@pytest.fixture
async def small_kafka() -> AsyncIterator[MiniKafka]:
    """A broker that refuses requests above SMALL_REQUEST_LIMIT bytes."""
    limit = {"socket.request.max.bytes": str(SMALL_REQUEST_LIMIT)}
    async with running_cluster(1, None, **limit) as app:
        yield app


@pytest.fixture
async def raw(small_kafka: MiniKafka) -> AsyncIterator[RawClient]:
    connection = await open_raw(small_kafka.bootstrap)
    try:
        yield connection
    finally:
        await connection.close()


async def assert_others_still_served(bootstrap: str, topic: str = "survivor") -> None:
    """Another client's produce and consume on the same broker still work."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        md = await producer.send_and_wait(topic, b"still here", partition=0)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=100
    )
    await consumer.start()
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, md.offset)
        record = await asyncio.wait_for(consumer.getone(), timeout=TIMEOUT)
    finally:
        await consumer.stop()
    assert record.value == b"still here"


# ------------------------------------------------------------------- request builders


async def _produce(raw: RawClient, topic: str, records: bytes | None, **kw: Any) -> Any:
    response = await raw.request(
        PRODUCE, PRODUCE_V, "ProduceRequest", **produce_fields(topic, records, **kw)
    )
    (topic_response,) = response.responses
    (partition,) = topic_response.partition_responses
    return partition


async def _latest(raw: RawClient, topic: str) -> int:
    b = request_builder(LIST_OFFSETS, LIST_OFFSETS_V)
    response = await raw.request(
        LIST_OFFSETS,
        LIST_OFFSETS_V,
        "ListOffsetsRequest",
        replica_id=-1,
        isolation_level=0,
        topics=(
            b.ListOffsetsTopic(
                name=topic, partitions=(b.ListOffsetsPartition(partition_index=0, timestamp=-1),)
            ),
        ),
    )
    partition = response.topics[0].partitions[0]
    assert partition.error_code == ErrorCode.none
    return int(partition.offset)


def _header_only(api_key: int, version: int, correlation_id: int, body: bytes = b"") -> bytes:
    """A framed request with header v1 (no client id) and whatever body we like."""
    payload = struct.pack(">hhih", api_key, version, correlation_id, -1) + body
    return struct.pack(">i", len(payload)) + payload


# ------------------------------------------------------------------------ framing


@pytest.mark.parametrize("seed", range(5))
async def test_random_bytes_do_not_hurt_the_broker(small_kafka: MiniKafka, seed: int) -> None:
    rng = random.Random(seed)
    stream = await open_raw(small_kafka.bootstrap)
    stream.write(rng.randbytes(2000))  # a random "length prefix" and whatever follows
    await stream.close()
    framed = await open_raw(small_kafka.bootstrap)
    body = rng.randbytes(rng.randrange(1, 500))
    framed.write(struct.pack(">i", len(body)) + body)  # a whole frame of garbage
    await framed.close()
    await assert_others_still_served(small_kafka.bootstrap)


async def test_length_prefix_over_the_limit_closes_at_once(
    small_kafka: MiniKafka, raw: RawClient
) -> None:
    # Only the prefix is sent: the broker must not wait for a body it will not take.
    raw.write(struct.pack(">i", SMALL_REQUEST_LIMIT + 1))
    assert await raw.closed_by_broker()
    await assert_others_still_served(small_kafka.bootstrap)


async def test_negative_length_prefix_closes(small_kafka: MiniKafka, raw: RawClient) -> None:
    raw.write(struct.pack(">i", -5) + b"xxxx")
    assert await raw.closed_by_broker()
    await assert_others_still_served(small_kafka.bootstrap)


async def test_requests_before_a_bad_prefix_are_answered(
    small_kafka: MiniKafka, raw: RawClient
) -> None:
    """Whole requests that arrived ahead of the bad frame in the same read get answers."""
    payload = request_builder(API_VERSIONS, API_VERSIONS_V).ApiVersionsRequest(
        **API_VERSIONS_FIELDS
    )
    good = raw.client.send(API_VERSIONS, API_VERSIONS_V, payload)
    raw.write(good.data + struct.pack(">i", SMALL_REQUEST_LIMIT * 10))
    answer = await raw.response()
    assert answer.correlation_id == good.correlation_id
    response: Any = answer.body
    assert response.error_code == ErrorCode.none
    assert await raw.closed_by_broker()


async def test_truncated_frame_then_close(small_kafka: MiniKafka) -> None:
    conn = await open_raw(small_kafka.bootstrap)
    conn.write(struct.pack(">i", 1000) + _header_only(METADATA, 9, 1)[4:])
    await conn.close()
    await assert_others_still_served(small_kafka.bootstrap)


async def test_huge_array_count_is_refused_not_allocated(
    small_kafka: MiniKafka, raw: RawClient
) -> None:
    """A Metadata v1 request claiming 2**31-1 topics in 4 bytes: close, do not allocate."""
    raw.write(_header_only(METADATA, 1, 1, struct.pack(">i", 0x7FFFFFFF)))
    assert await raw.closed_by_broker()
    await assert_others_still_served(small_kafka.bootstrap)


# --------------------------------------------------------------- keys and versions


async def test_unknown_api_key_closes(small_kafka: MiniKafka, raw: RawClient) -> None:
    raw.write(_header_only(9999, 0, 1))
    assert await raw.closed_by_broker()
    await assert_others_still_served(small_kafka.bootstrap)


async def test_unsupported_version_of_a_normal_api_closes(
    small_kafka: MiniKafka, raw: RawClient
) -> None:
    raw.write(_header_only(METADATA, 99, 1))
    assert await raw.closed_by_broker()
    await assert_others_still_served(small_kafka.bootstrap)


async def test_unsupported_api_versions_version_gets_the_v0_answer(
    small_kafka: MiniKafka, raw: RawClient
) -> None:
    # A version kio has no schema of: sent as a ready frame. The client reads the v0
    # answer as Kafka's clients do (see protocol.client).
    asked = raw.client.send_frame(
        _header_only(API_VERSIONS, 99, 4242, b"\x00\x00\x00")[4:], expect_response=True
    )
    raw.write(asked.data)
    answer = await raw.response()
    assert answer.correlation_id == asked.correlation_id
    response: Any = answer.body
    assert response.error_code == ErrorCode.unsupported_version
    listed = {int(a.api_key): (int(a.min_version), int(a.max_version)) for a in response.api_keys}
    expected = {
        s.api_key: (s.min_version, s.max_version) for s in small_kafka.brokers[0].services.api_specs
    }
    assert listed == expected
    assert listed[API_VERSIONS][0] == 0
    # The connection stays open so the client can retry with a version we speak.
    retry = await raw.request(
        API_VERSIONS, API_VERSIONS_V, "ApiVersionsRequest", **API_VERSIONS_FIELDS
    )
    assert retry.error_code == ErrorCode.none
    await assert_others_still_served(small_kafka.bootstrap)


# ------------------------------------------------------------------- produce errors


async def test_wrong_crc_is_corrupt_message_and_nothing_is_appended(
    small_kafka: MiniKafka, raw: RawClient
) -> None:
    small_kafka.cluster.create_topic("crc", 1, 1, {})
    good = await _produce(raw, "crc", batch(b"good"))
    assert (good.error_code, good.base_offset) == (ErrorCode.none, 0)
    bad = bytearray(batch(b"evil"))
    bad[-1] ^= 0xFF  # a flipped bit in the value: the CRC no longer matches
    answer = await _produce(raw, "crc", bytes(bad))
    assert answer.error_code == ErrorCode.corrupt_message
    assert await _latest(raw, "crc") == 1
    await assert_others_still_served(small_kafka.bootstrap)


@pytest.mark.parametrize(
    ("name", "records", "expected"),
    [
        ("truncated batch", batch()[:-3], ErrorCode.corrupt_message),
        (
            "batch length past the end",
            batch()[:8] + struct.pack(">i", 5000) + batch()[12:],
            ErrorCode.corrupt_message,
        ),
        ("old magic", batch()[:16] + b"\x01" + batch()[17:], None),
        ("empty records", b"", None),
        ("null records", None, None),
        ("garbage", b"\x00" * 70, None),
    ],
)
async def test_malformed_records_are_refused_and_nothing_appended(
    small_kafka: MiniKafka,
    raw: RawClient,
    name: str,
    records: bytes | None,
    expected: ErrorCode | None,
) -> None:
    small_kafka.cluster.create_topic("malformed", 1, 1, {})
    answer = await _produce(raw, "malformed", records)
    refused = {ErrorCode.corrupt_message, ErrorCode.invalid_record}
    assert answer.error_code in ({expected} if expected is not None else refused), name
    assert answer.base_offset == -1
    assert await _latest(raw, "malformed") == 0
    await assert_others_still_served(small_kafka.bootstrap)


async def test_inconsistent_record_count_is_invalid_record(
    small_kafka: MiniKafka, raw: RawClient
) -> None:
    """lastOffsetDelta says 1000 records, the batch holds one: Kafka's INVALID_RECORD."""
    forged = bytearray(batch(b"x"))
    struct.pack_into(">i", forged, 23, 999)  # lastOffsetDelta
    struct.pack_into(">I", forged, 17, compute_crc(forged))
    small_kafka.cluster.create_topic("forged", 1, 1, {})
    answer = await _produce(raw, "forged", bytes(forged))
    assert answer.error_code == ErrorCode.invalid_record
    assert await _latest(raw, "forged") == 0


async def test_batch_over_max_message_bytes_is_message_too_large(
    small_kafka: MiniKafka, raw: RawClient
) -> None:
    small_kafka.cluster.create_topic("capped", 1, 1, {"max.message.bytes": "1000"})
    fits = await _produce(raw, "capped", batch(b"s" * 500))
    assert fits.error_code == ErrorCode.none
    answer = await _produce(raw, "capped", batch(b"L" * 2000))
    assert answer.error_code == ErrorCode.message_too_large
    assert await _latest(raw, "capped") == 1
    await assert_others_still_served(small_kafka.bootstrap)


@pytest.mark.parametrize("topic", ["bad topic", "..", "a" * 250, "slash/name", ""])
async def test_invalid_topic_name(small_kafka: MiniKafka, raw: RawClient, topic: str) -> None:
    answer = await _produce(raw, topic, batch())
    assert answer.error_code == ErrorCode.invalid_topic_exception
    await assert_others_still_served(small_kafka.bootstrap)


@pytest.mark.parametrize("acks", [2, -2, 5])
async def test_invalid_acks(small_kafka: MiniKafka, raw: RawClient, acks: int) -> None:
    small_kafka.cluster.create_topic("acks", 1, 1, {})
    answer = await _produce(raw, "acks", batch(), acks=acks)
    assert answer.error_code == ErrorCode.invalid_required_acks
    assert await _latest(raw, "acks") == 0
    await assert_others_still_served(small_kafka.bootstrap)


async def test_unknown_partition_and_unknown_topic(small_kafka: MiniKafka, raw: RawClient) -> None:
    small_kafka.cluster.create_topic("one-partition", 1, 1, {})
    answer = await _produce(raw, "one-partition", batch(), partition=5)
    assert answer.error_code == ErrorCode.unknown_topic_or_partition
    # Produce never creates topics (only Metadata does, with auto-create).
    missing = await _produce(raw, "never-created", batch())
    assert missing.error_code == ErrorCode.unknown_topic_or_partition
    assert "never-created" not in small_kafka.cluster.topics
    await assert_others_still_served(small_kafka.bootstrap)


async def test_error_in_an_acks_0_produce_closes_the_connection(
    small_kafka: MiniKafka, raw: RawClient
) -> None:
    """The client reads no answer to an acks=0 produce: Kafka closes to tell it."""
    small_kafka.cluster.create_topic("noack", 1, 1, {})
    bad = bytearray(batch())
    bad[-1] ^= 1
    raw.send(PRODUCE, PRODUCE_V, "ProduceRequest", **produce_fields("noack", bytes(bad), acks=0))
    assert await raw.closed_by_broker()
    await assert_others_still_served(small_kafka.bootstrap)


# -------------------------------------------------------- the process stays alive


def test_broker_process_survives_a_barrage(broker_process: type[BrokerProcess]) -> None:
    """The same abuse against ``minikafka serve``: the process is alive afterwards."""
    proc = broker_process(["--override", f"socket.request.max.bytes={SMALL_REQUEST_LIMIT}"])

    async def barrage() -> None:
        rng = random.Random(7)
        attacks = [
            rng.randbytes(5000),
            struct.pack(">i", SMALL_REQUEST_LIMIT + 1),
            struct.pack(">i", 1000) + b"short",
            _header_only(9999, 0, 1),
            _header_only(METADATA, 99, 1),
            _header_only(METADATA, 1, 1, struct.pack(">i", 0x7FFFFFFF)),
            _header_only(METADATA, 12, 1, b"\x00\xff\xff\xff\xff\x0f"),  # compact count 2**32
        ]
        for attack in attacks:
            conn = await open_raw(proc.bootstrap)
            conn.write(attack)
            await conn.close()
        await assert_others_still_served(proc.bootstrap)

    asyncio.run(barrage())
    assert proc.proc.poll() is None, "the broker process died"


# ------------------------------------------------------------------------ pipelining


async def test_pipelined_responses_leave_in_request_order(kafka: MiniKafka) -> None:
    """One request in progress per connection (Kafka mutes the channel): requests
    pipelined behind a parked Fetch wait, unhandled, until it is answered; then all are
    answered in request order, and an acks=0 produce among them answers nothing."""
    kafka.cluster.create_topic("pipe-wait", 1, 1, {})
    kafka.cluster.create_topic("pipe-noack", 1, 1, {})
    fetch_purgatory = kafka.brokers[0].purgatories["Fetch"]
    conn = await open_raw(kafka.bootstrap)
    try:
        sent = [
            (
                FETCH,
                FETCH_V,
                conn.send(FETCH, FETCH_V, "FetchRequest", **fetch_fields("pipe-wait", 0, 30_000)),
            ),
            (
                METADATA,
                METADATA_V,
                conn.send(METADATA, METADATA_V, "MetadataRequest", **metadata_fields("pipe-wait")),
            ),
            (
                API_VERSIONS,
                API_VERSIONS_V,
                conn.send(
                    API_VERSIONS, API_VERSIONS_V, "ApiVersionsRequest", **API_VERSIONS_FIELDS
                ),
            ),
        ]
        conn.send(
            PRODUCE,
            PRODUCE_V,
            "ProduceRequest",
            **produce_fields("pipe-noack", batch(b"fire and forget"), acks=0),
        )
        sent.append(
            (
                API_VERSIONS,
                API_VERSIONS_V,
                conn.send(
                    API_VERSIONS, API_VERSIONS_V, "ApiVersionsRequest", **API_VERSIONS_FIELDS
                ),
            )
        )
        # While the fetch waits, nothing behind it runs: the acks=0 record is not in
        # the log (Kafka reads a connection's next request only after answering).
        noack_log = kafka.brokers[0].replica_manager.partitions[("pipe-noack", 0)].log
        await wait_until(
            lambda: fetch_purgatory.num_delayed() == 1, "the fetch parked", step_s=0.01
        )
        # A request on another connection, answered after the acks=0 bytes were on this
        # one's socket: the broker has had its turn to read them, and did not.
        await answered_later(kafka.bootstrap)
        assert fetch_purgatory.num_delayed() == 1
        assert noack_log.log_end_offset == 0

        # Now a record for the fetch, from another client: it completes the fetch.
        producer = AIOKafkaProducer(bootstrap_servers=kafka.bootstrap)
        await producer.start()
        try:
            await producer.send_and_wait("pipe-wait", b"wake up", partition=0)
        finally:
            await producer.stop()

        answers = [await conn.response() for _ in sent]
        assert noack_log.log_end_offset == 1  # handled after the fetch was answered
    finally:
        await conn.close()
    assert [(a.api_key, a.api_version, a.correlation_id) for a in answers] == sent
    fetch_response: Any = answers[0].body
    partition = fetch_response.responses[0].partitions[0]
    assert partition.error_code == ErrorCode.none
    assert b"wake up" in bytes(partition.records)
    metadata: Any = answers[1].body
    assert metadata.topics[0].name == "pipe-wait"
    assert fetch_purgatory.expired_count == 0


# ------------------------------------------------------------------ many connections


async def test_fifty_concurrent_connections(kafka: MiniKafka) -> None:
    kafka.cluster.create_topic("crowd", 1, 1, {})
    clients = 50

    async def one(i: int) -> int:
        conn = await open_raw(kafka.bootstrap)
        try:
            metadata = await conn.request(
                METADATA, METADATA_V, "MetadataRequest", **metadata_fields("crowd")
            )
            assert metadata.topics[0].error_code == ErrorCode.none
            answer = await _produce(conn, "crowd", batch(f"client-{i}".encode()))
            assert answer.error_code == ErrorCode.none
            return int(answer.base_offset)
        finally:
            await conn.close()

    offsets = await asyncio.gather(*(one(i) for i in range(clients)))
    assert sorted(offsets) == list(range(clients))

    consumer = AIOKafkaConsumer(bootstrap_servers=kafka.bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        tp = TopicPartition("crowd", 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        values: list[bytes] = []
        for _ in range(100):
            fetched = await consumer.getmany(timeout_ms=200)
            values.extend(r.value for records in fetched.values() for r in records)
            if len(values) >= clients:
                break
    finally:
        await consumer.stop()
    assert sorted(values) == sorted(f"client-{i}".encode() for i in range(clients))


# ------------------------------------------------------------- fetch and list offsets


@pytest.mark.parametrize(
    ("topic", "offset", "expected"),
    [
        ("nope", 0, ErrorCode.unknown_topic_or_partition),
        ("fetched", -1, ErrorCode.offset_out_of_range),
        ("fetched", 10, ErrorCode.offset_out_of_range),
        ("fetched", 1, ErrorCode.none),
    ],
)
async def test_fetch_errors_are_per_partition(
    small_kafka: MiniKafka, raw: RawClient, topic: str, offset: int, expected: ErrorCode
) -> None:
    small_kafka.cluster.create_topic("fetched", 1, 1, {})
    for i in range(3):
        await _produce(raw, "fetched", batch(f"f{i}".encode()))
    response = await raw.request(FETCH, FETCH_V, "FetchRequest", **fetch_fields(topic, offset, 0))
    assert response.error_code == ErrorCode.none
    partition = response.responses[0].partitions[0]
    assert partition.error_code == expected
    if expected is ErrorCode.none:
        assert b"f1" in bytes(partition.records) and b"f0" not in bytes(partition.records)
    else:
        assert not partition.records
    assert "nope" not in small_kafka.cluster.topics  # Fetch never creates topics


async def test_fetch_naming_an_unknown_session_is_refused(
    small_kafka: MiniKafka, raw: RawClient
) -> None:
    fields = fetch_fields("fetched", 0, 0)
    fields["session_id"] = 1234
    fields["session_epoch"] = 1  # an incremental fetch in a session the broker never opened
    response = await raw.request(FETCH, FETCH_V, "FetchRequest", **fields)
    assert response.error_code == ErrorCode.fetch_session_id_not_found
    assert response.session_id == 0 and response.responses == ()
    # Epoch -1 closes the session named, if any, and is answered without one (Kafka's).
    fields["session_epoch"] = -1
    response = await raw.request(FETCH, FETCH_V, "FetchRequest", **fields)
    assert response.error_code == ErrorCode.none and response.session_id == 0
    assert [t.topic for t in response.responses] == ["fetched"]


async def test_list_offsets_of_an_unknown_partition(small_kafka: MiniKafka, raw: RawClient) -> None:
    small_kafka.cluster.create_topic("listed", 1, 1, {})
    b = request_builder(LIST_OFFSETS, LIST_OFFSETS_V)
    response = await raw.request(
        LIST_OFFSETS,
        LIST_OFFSETS_V,
        "ListOffsetsRequest",
        replica_id=-1,
        isolation_level=0,
        topics=tuple(
            b.ListOffsetsTopic(
                name=name, partitions=(b.ListOffsetsPartition(partition_index=p, timestamp=-1),)
            )
            for name, p in (("listed", 3), ("nope", 0), ("listed", 0))
        ),
    )
    errors = [t.partitions[0].error_code for t in response.topics]
    assert errors == [
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.none,
    ]
