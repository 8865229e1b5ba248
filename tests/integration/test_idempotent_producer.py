"""Idempotent producers against a real minikafka broker.

Through aiokafka (``enable_idempotence=True``: InitProducerId, then sequenced batches)
and through raw protocol bytes, where we control the producer id, epoch and sequence a
batch carries, to see the broker's sequence checks themselves, as Kafka makes them: a
retry of any of a producer's last five batches is answered with success and the offset
it was first written at (written once), a batch overlapping older sequences or leaving
a gap is refused with OUT_OF_ORDER_SEQUENCE_NUMBER, a stale epoch with
INVALID_PRODUCER_EPOCH; the state survives a restart; DescribeProducers shows it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from kio.schema.errors import ErrorCode

from broker.app import MiniKafka
from protocol.builders import request_builder
from protocol.record_builder import build_record_batch
from testkit.raw_client import RawClient
from tests.integration.conftest import running_cluster

pytestmark = pytest.mark.asyncio

PRODUCE, LIST_OFFSETS, CREATE_TOPICS, INIT_PRODUCER_ID = 0, 2, 19, 22
DESCRIBE_PRODUCERS = 61
LATEST = -1


@pytest.fixture
async def raw(kafka: MiniKafka) -> AsyncIterator[RawClient]:
    client = await RawClient.connect(kafka.bootstrap)
    try:
        yield client
    finally:
        await client.close()


async def test_idempotent_producer_writes_each_record_once_in_order(kafka: MiniKafka) -> None:
    kafka.cluster.create_topic("idem", 3, 1, {})
    producer = AIOKafkaProducer(bootstrap_servers=kafka.bootstrap, enable_idempotence=True)
    await producer.start()
    try:
        sends = [
            await producer.send("idem", f"{p}-{i}".encode(), partition=p)
            for i in range(200)
            for p in range(3)
        ]
        await producer.flush()
        metadata = [await s for s in sends]
    finally:
        await producer.stop()
    by_partition: dict[int, list[int]] = {0: [], 1: [], 2: []}
    for md in metadata:
        by_partition[md.partition].append(md.offset)
    assert all(offsets == list(range(200)) for offsets in by_partition.values())

    tps = [TopicPartition("idem", p) for p in range(3)]
    consumer = AIOKafkaConsumer(bootstrap_servers=kafka.bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        consumer.assign(tps)
        await consumer.seek_to_beginning()
        got: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
        while sum(len(v) for v in got.values()) < 600:
            batch = await consumer.getmany(timeout_ms=2000)
            assert batch, "no records within 2 s"
            for tp, records in batch.items():
                got[tp.partition].extend(r.value for r in records if r.value is not None)
        assert await consumer.end_offsets(tps) == {tp: 200 for tp in tps}
    finally:
        await consumer.stop()
    for p in range(3):
        assert got[p] == [f"{p}-{i}".encode() for i in range(200)]


async def test_producer_ids_are_unique_and_increasing(raw: RawClient) -> None:
    ids = []
    for version in (0, 2, 4):
        response = await raw.request(
            INIT_PRODUCER_ID,
            version,
            "InitProducerIdRequest",
            transactional_id=None,
            transaction_timeout=60000,
        )
        assert response.error_code == ErrorCode.none
        assert response.producer_epoch == 0
        ids.append(response.producer_id)
    assert ids == sorted(set(ids))


async def test_producer_ids_continue_after_a_restart(tmp_path: Any) -> None:
    async with running_cluster(data_dir=tmp_path) as app:
        client = await RawClient.connect(app.bootstrap)
        first = await client.request(
            INIT_PRODUCER_ID,
            4,
            "InitProducerIdRequest",
            transactional_id=None,
            transaction_timeout=60000,
        )
        await client.close()
    async with running_cluster(data_dir=tmp_path) as app:
        client = await RawClient.connect(app.bootstrap)
        second = await client.request(
            INIT_PRODUCER_ID,
            4,
            "InitProducerIdRequest",
            transactional_id=None,
            transaction_timeout=60000,
        )
        await client.close()
    assert second.producer_id > first.producer_id


async def _produce(
    raw: RawClient, topic: str, producer_id: int, epoch: int, sequence: int, values: list[bytes]
) -> Any:
    batch = build_record_batch(
        [(None, v, ()) for v in values],
        timestamp_ms=1_700_000_000_000,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
    )
    b = request_builder(PRODUCE, 9)
    response = await raw.request(
        PRODUCE,
        9,
        "ProduceRequest",
        transactional_id=None,
        acks=-1,
        timeout=5000,
        topic_data=(
            b.TopicProduceData(
                name=topic, partition_data=(b.PartitionProduceData(index=0, records=batch),)
            ),
        ),
    )
    (topic_response,) = response.responses
    (partition,) = topic_response.partition_responses
    return partition


async def _latest(raw: RawClient, topic: str) -> int:
    b = request_builder(LIST_OFFSETS, 7)
    response = await raw.request(
        LIST_OFFSETS,
        7,
        "ListOffsetsRequest",
        replica_id=-1,
        isolation_level=0,
        topics=(
            b.ListOffsetsTopic(
                name=topic,
                partitions=(b.ListOffsetsPartition(partition_index=0, timestamp=LATEST),),
            ),
        ),
    )
    partition = response.topics[0].partitions[0]
    assert partition.error_code == ErrorCode.none
    return int(partition.offset)


async def test_duplicate_and_out_of_order_sequences(kafka: MiniKafka, raw: RawClient) -> None:
    kafka.cluster.create_topic("seq", 1, 1, {})
    init = await raw.request(
        INIT_PRODUCER_ID,
        4,
        "InitProducerIdRequest",
        transactional_id=None,
        transaction_timeout=60000,
    )
    pid, epoch = int(init.producer_id), int(init.producer_epoch)

    first = await _produce(raw, "seq", pid, epoch, 0, [b"a", b"b", b"c"])
    assert first.error_code == ErrorCode.none
    assert first.base_offset == 0
    second = await _produce(raw, "seq", pid, epoch, 3, [b"d"])
    assert second.error_code == ErrorCode.none
    assert second.base_offset == 3
    assert await _latest(raw, "seq") == 4

    # The same batch again (a retry whose answer was lost): success with the offset it
    # was written at, and not written twice.
    retry = await _produce(raw, "seq", pid, epoch, 3, [b"d"])
    assert retry.error_code == ErrorCode.none
    assert retry.base_offset == 3
    assert await _latest(raw, "seq") == 4

    # A batch overlapping what was written without being one of its batches.
    overlap = await _produce(raw, "seq", pid, epoch, 2, [b"c", b"d"])
    assert overlap.error_code == ErrorCode.out_of_order_sequence_number
    assert await _latest(raw, "seq") == 4

    # A gap in the sequence (5 after 3): refused, nothing written.
    gap = await _produce(raw, "seq", pid, epoch, 5, [b"f"])
    assert gap.error_code == ErrorCode.out_of_order_sequence_number
    assert await _latest(raw, "seq") == 4

    # The next sequence in order still goes in.
    following = await _produce(raw, "seq", pid, epoch, 4, [b"e"])
    assert following.error_code == ErrorCode.none
    assert following.base_offset == 4
    assert await _latest(raw, "seq") == 5


async def _init_producer(raw: RawClient) -> tuple[int, int]:
    init = await raw.request(
        INIT_PRODUCER_ID,
        4,
        "InitProducerIdRequest",
        transactional_id=None,
        transaction_timeout=60000,
    )
    assert init.error_code == ErrorCode.none
    return int(init.producer_id), int(init.producer_epoch)


async def test_a_retry_of_each_of_the_last_five_batches_gets_its_offset(
    kafka: MiniKafka, raw: RawClient
) -> None:
    kafka.cluster.create_topic("retry", 1, 1, {})
    pid, epoch = await _init_producer(raw)
    written = []
    for i in range(7):
        values = [f"{i}-{j}".encode() for j in range(2)]
        answer = await _produce(raw, "retry", pid, epoch, 2 * i, values)
        assert answer.error_code == ErrorCode.none
        written.append((2 * i, values, int(answer.base_offset)))
    assert [offset for _, _, offset in written] == list(range(0, 14, 2))
    for sequence, values, offset in reversed(written[-5:]):
        retry = await _produce(raw, "retry", pid, epoch, sequence, values)
        assert (retry.error_code, retry.base_offset) == (ErrorCode.none, offset)
    oldest = await _produce(raw, "retry", pid, epoch, 0, written[0][1])
    assert oldest.error_code == ErrorCode.out_of_order_sequence_number
    # A new epoch starts again at sequence 0; the old epoch is fenced from then on.
    restarted = await _produce(raw, "retry", pid, epoch + 1, 3, [b"y"])
    assert restarted.error_code == ErrorCode.out_of_order_sequence_number
    bumped = await _produce(raw, "retry", pid, epoch + 1, 0, [b"y"])
    assert (bumped.error_code, bumped.base_offset) == (ErrorCode.none, 14)
    stale = await _produce(raw, "retry", pid, epoch, 14, [b"x"])
    assert stale.error_code == ErrorCode.invalid_producer_epoch
    assert await _latest(raw, "retry") == 15


async def _describe_producers(raw: RawClient, topic: str) -> Any:
    b = request_builder(DESCRIBE_PRODUCERS, 0)
    response = await raw.request(
        DESCRIBE_PRODUCERS,
        0,
        "DescribeProducersRequest",
        topics=(b.TopicRequest(name=topic, partition_indexes=(0, 7)),),
    )
    (topic_response,) = response.topics
    return {int(p.partition_index): p for p in topic_response.partitions}


async def test_producer_state_survives_a_restart_and_is_described(tmp_path: Any) -> None:
    async with running_cluster(data_dir=tmp_path) as app:
        app.cluster.create_topic("durable-seq", 1, 1, {})
        client = await RawClient.connect(app.bootstrap)
        pid, epoch = await _init_producer(client)
        for i in range(3):
            answer = await _produce(client, "durable-seq", pid, epoch, i, [b"%d" % i])
            assert answer.error_code == ErrorCode.none
        await client.close()
    async with running_cluster(data_dir=tmp_path) as app:
        client = await RawClient.connect(app.bootstrap)
        retry = await _produce(client, "durable-seq", pid, epoch, 1, [b"1"])
        assert (retry.error_code, retry.base_offset) == (ErrorCode.none, 1)
        gap = await _produce(client, "durable-seq", pid, epoch, 4, [b"4"])
        assert gap.error_code == ErrorCode.out_of_order_sequence_number
        partitions = await _describe_producers(client, "durable-seq")
        await client.close()
    assert partitions[7].error_code == ErrorCode.unknown_topic_or_partition
    assert partitions[0].error_code == ErrorCode.none
    (producer,) = partitions[0].active_producers
    assert (producer.producer_id, producer.producer_epoch) == (pid, epoch)
    assert (producer.last_sequence, producer.last_timestamp) == (2, 1_700_000_000_000)
    assert (producer.coordinator_epoch, producer.current_txn_start_offset) == (-1, -1)
