"""Clients that behave badly on purpose: what they cost the broker is bounded.

Kafka's answers: a connection has one request in progress (the channel is muted until
its answer is sent), idle connections are closed after ``connections.max.idle.ms``,
and nothing a client sent after a frame that closes its connection is processed.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.app import MiniKafka
from protocol.builders import request_builder
from protocol.client import ClientConnection
from protocol.compression import compress
from protocol.record_batch import compute_crc
from protocol.record_builder import build_record_batch
from testkit.polling import wait_until
from testkit.raw_client import RawClient
from testkit.requests import (
    FETCH,
    FETCH_V,
    PRODUCE,
    PRODUCE_V,
    batch,
    fetch_fields,
    produce_fields,
)
from tests.integration.conftest import running_cluster

API_VERSIONS = 18


@pytest.fixture
async def idle_kafka() -> AsyncIterator[MiniKafka]:
    async with running_cluster(1, None, **{"connections.max.idle.ms": "300"}) as app:
        yield app


async def _api_versions_round_trip_ms(bootstrap: str) -> float:
    start = time.perf_counter()
    client = await RawClient.connect(bootstrap, timeout_s=5.0, client_id="probe")
    try:
        await client.request(
            API_VERSIONS,
            3,
            "ApiVersionsRequest",
            client_software_name="probe",
            client_software_version="1",
        )
    finally:
        await client.close()
    return (time.perf_counter() - start) * 1000


async def test_a_client_that_pipelines_long_polls_and_never_reads_parks_one(
    kafka: MiniKafka,
) -> None:
    """Thousands of Fetches at the log end, never read: one is parked, the rest wait
    in the socket, and other clients are served meanwhile."""
    kafka.cluster.create_topic("quiet", 1, 1, {})
    fetch_purgatory = kafka.brokers[0].purgatories["Fetch"]
    host, port = kafka.bootstrap.split(":")
    client = ClientConnection("hog")
    fetch = request_builder(FETCH, FETCH_V).FetchRequest(**fetch_fields("quiet", 0, 30_000))
    one = client.send(FETCH, FETCH_V, fetch).data
    sock = socket.create_connection((host, int(port)))
    sock.setblocking(False)
    sent = 0
    try:
        payload = one * 2000  # the same bytes: correlation ids do not matter here
        deadline = time.monotonic() + 2.0
        view = memoryview(payload)
        while view and time.monotonic() < deadline:
            try:
                n = sock.send(view)
            except BlockingIOError:
                await asyncio.sleep(0.01)
                continue
            view = view[n:]
            sent += n
        await wait_until(lambda: fetch_purgatory.num_delayed() == 1, "the first fetch parked")
        # Another client served after the hog's bytes were on its socket: the broker had
        # its turn to read more of them, and parked no second fetch.
        round_trip_ms = await _api_versions_round_trip_ms(kafka.bootstrap)
        assert fetch_purgatory.num_delayed() == 1
        assert fetch_purgatory.watched() <= 1
        assert round_trip_ms < 1000
    finally:
        sock.close()
    assert sent >= len(one)


async def test_an_idle_connection_is_closed_after_connections_max_idle_ms(
    idle_kafka: MiniKafka,
) -> None:
    client = await RawClient.connect(idle_kafka.bootstrap, timeout_s=5.0, client_id="idle")
    try:
        assert await asyncio.wait_for(client.closed_by_broker(), timeout=5.0)
    finally:
        await client.close()


async def test_a_connection_waiting_on_a_long_poll_is_not_idle(idle_kafka: MiniKafka) -> None:
    idle_kafka.cluster.create_topic("poll", 1, 1, {})
    client = await RawClient.connect(idle_kafka.bootstrap, timeout_s=5.0, client_id="poll")
    try:
        response = await client.request(
            FETCH, FETCH_V, "FetchRequest", **fetch_fields("poll", 0, 1000)
        )
        assert response.responses[0].partitions[0].records in (None, b"")
    finally:
        await client.close()


async def test_nothing_after_a_fatal_frame_is_processed(kafka: MiniKafka) -> None:
    """[unknown API key][a Produce][a negative length] in one write: closed, and the
    Produce is not appended."""
    kafka.cluster.create_topic("after-fatal", 1, 1, {})
    raw = await RawClient.connect(kafka.bootstrap, timeout_s=5.0, client_id="fatal")
    try:
        client = ClientConnection("fatal")
        versions = request_builder(API_VERSIONS, 3).ApiVersionsRequest(
            client_software_name="t", client_software_version="1"
        )
        probe = bytearray(client.send(API_VERSIONS, 3, versions).data)
        probe[4:6] = (999).to_bytes(2, "big")  # unknown API key
        body = request_builder(PRODUCE, PRODUCE_V).ProduceRequest(
            **produce_fields("after-fatal", batch(b"must not land"))
        )
        produce = client.send(PRODUCE, PRODUCE_V, body).data
        raw.write(bytes(probe) + produce + (-5).to_bytes(4, "big", signed=True))
        assert await raw.closed_by_broker()
    finally:
        await raw.close()
    log = kafka.brokers[0].replica_manager.partitions[("after-fatal", 0)].log
    assert log.log_end_offset == 0


# ------------------------------------------------------- records inside a valid batch

ZSTD = 4


def _with_payload(records_payload: bytes, count: int) -> bytes:
    """A zstd batch header (right CRC) around ``records_payload``."""
    template = bytearray(build_record_batch([(None, b"x", ())], timestamp_ms=1_700_000_000_000))
    header = template[:61]
    struct.pack_into(">h", header, 21, ZSTD)  # attributes: zstd
    struct.pack_into(">i", header, 23, count - 1)  # lastOffsetDelta
    struct.pack_into(">i", header, 57, count)  # records count
    forged = header + records_payload
    struct.pack_into(">i", forged, 8, len(forged) - 12)  # batchLength
    struct.pack_into(">I", forged, 17, compute_crc(forged))
    return bytes(forged)


async def _produce_raw(kafka: MiniKafka, topic: str, records: bytes) -> Any:
    client = await RawClient.connect(kafka.bootstrap, timeout_s=10.0, client_id="records")
    try:
        response = await client.request(
            PRODUCE, PRODUCE_V, "ProduceRequest", **produce_fields(topic, records)
        )
    finally:
        await client.close()
    return response.responses[0].partition_responses[0]


async def test_a_compressed_batch_of_garbage_is_corrupt_message(kafka: MiniKafka) -> None:
    kafka.cluster.create_topic("garbage", 1, 1, {})
    answer = await _produce_raw(kafka, "garbage", _with_payload(b"\x28\xb5\x2f\xfd" + b"junk", 1))
    assert answer.error_code == ErrorCode.corrupt_message
    assert kafka.brokers[0].replica_manager.partitions[("garbage", 0)].log_end_offset == 0


async def test_a_decompression_bomb_is_refused_without_inflating_it(kafka: MiniKafka) -> None:
    kafka.cluster.create_topic("bomb", 1, 1, {})
    bomb = compress(ZSTD, bytes(256 * 1024 * 1024))  # 256 MiB of zeros, a few KiB packed
    answer = await _produce_raw(kafka, "bomb", _with_payload(bomb, 1))
    assert answer.error_code == ErrorCode.message_too_large
    assert kafka.brokers[0].replica_manager.partitions[("bomb", 0)].log_end_offset == 0


async def test_a_good_compressed_batch_is_still_accepted(kafka: MiniKafka) -> None:
    kafka.cluster.create_topic("zipped", 1, 1, {})
    records = [(None, f"v{i}".encode(), ()) for i in range(10)]
    good = build_record_batch(records, timestamp_ms=1_700_000_000_000, compression=ZSTD)
    answer = await _produce_raw(kafka, "zipped", good)
    assert answer.error_code == ErrorCode.none
    assert kafka.brokers[0].replica_manager.partitions[("zipped", 0)].log_end_offset == 10


# ------------------------------------------------------------- every advertised version


@pytest.mark.parametrize("version", [4, 5, 6, 7, 11, 12])
async def test_fetch_is_served_at_every_advertised_version(kafka: MiniKafka, version: int) -> None:
    kafka.cluster.create_topic("versions", 1, 1, {})
    await _produce_raw(kafka, "versions", batch(b"old client"))
    client = await RawClient.connect(kafka.bootstrap, timeout_s=10.0, client_id="old")
    try:
        response = await client.request(
            FETCH, version, "FetchRequest", **fetch_fields("versions", 0, 100, version)
        )
    finally:
        await client.close()
    partition = response.responses[0].partitions[0]
    assert partition.error_code == ErrorCode.none
    assert b"old client" in bytes(partition.records)


# ------------------------------------------------------------------ partition counts

CREATE_TOPICS, CREATE_PARTITIONS = 19, 37


async def test_create_topics_refuses_more_than_10000_partitions_at_once(kafka: MiniKafka) -> None:
    b = request_builder(CREATE_TOPICS, 7)
    client = await RawClient.connect(kafka.bootstrap, timeout_s=10.0, client_id="greedy")
    try:
        response = await client.request(
            CREATE_TOPICS,
            7,
            "CreateTopicsRequest",
            topics=(
                b.CreatableTopic(
                    name="huge",
                    num_partitions=2**31 - 1,
                    replication_factor=1,
                    assignments=(),
                    configs=(),
                ),
            ),
            timeout=5000,
            validate_only=True,
        )
    finally:
        await client.close()
    (topic,) = response.topics
    assert topic.error_code == ErrorCode.policy_violation
    assert topic.error_message == "Excessively large number of partitions per request."
    assert "huge" not in kafka.cluster.topics


async def test_create_partitions_refuses_more_than_10000_new_partitions(kafka: MiniKafka) -> None:
    kafka.cluster.create_topic("grow", 1, 1, {})
    b = request_builder(CREATE_PARTITIONS, 3)
    client = await RawClient.connect(kafka.bootstrap, timeout_s=10.0, client_id="greedy")
    try:
        response = await client.request(
            CREATE_PARTITIONS,
            3,
            "CreatePartitionsRequest",
            topics=(b.CreatePartitionsTopic(name="grow", count=2**31 - 1, assignments=None),),
            timeout=5000,
            validate_only=False,
        )
    finally:
        await client.close()
    (result,) = response.results
    assert result.error_code == ErrorCode.policy_violation
    assert len(kafka.cluster.topics["grow"].partitions) == 1


@pytest.mark.parametrize("version", [10, 11, 12])
async def test_metadata_naming_a_topic_by_a_null_name_is_answered(
    kafka: MiniKafka, version: int
) -> None:
    """A topic asked for with a null name and no id: INVALID_REQUEST for that topic, and
    the answer can be encoded at every version (v10-v11 names are not nullable)."""
    b = request_builder(3, version)
    client = await RawClient.connect(kafka.bootstrap, timeout_s=10.0, client_id="nulls")
    try:
        response = await client.request(
            3,
            version,
            "MetadataRequest",
            topics=(b.MetadataRequestTopic(name=None, topic_id=uuid.UUID(int=0)),),
            allow_auto_topic_creation=False,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False,
        )
        again = await client.request(
            API_VERSIONS,
            3,
            "ApiVersionsRequest",
            client_software_name="t",
            client_software_version="1",
        )
    finally:
        await client.close()
    assert response.topics[0].error_code == ErrorCode.invalid_request
    assert again.error_code == ErrorCode.none
