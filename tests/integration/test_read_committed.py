"""read_committed consumers against a real broker.

First with a real transactional producer (aiokafka, through the transaction
coordinator). Then the transactions are written the way the log sees them, without the
coordinator: transactional batches produced over the wire by raw producers (producer
ids from InitProducerId), and COMMIT/ABORT markers appended on the partition leader
through ``ReplicaManager.append_records(..., origin=AppendOrigin.COORDINATOR)`` — the
call the coordinator's WriteTxnMarkers makes. Real clients then read: aiokafka and
kafka-python with ``isolation_level="read_committed"`` see committed records only once
their marker is written and never see aborted ones; read_uncommitted sees everything
but the markers. ListOffsets answers the LSO for read_committed, Fetch carries it, and
the followers of a replicated topic hold the same transactions (a failover keeps them).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition
from kio.schema.errors import ErrorCode

from broker.app import MiniKafka
from broker.replica.append_origin import AppendOrigin
from broker.replica.delayed_produce import ProduceStatuses
from protocol.builders import request_builder
from protocol.control_batch import build_control_batch
from protocol.record_builder import build_record_batch
from testkit.polling import wait_until
from testkit.raw_client import RawClient
from tests.helpers.cluster import leader_of
from tests.integration.conftest import running_cluster

pytestmark = pytest.mark.asyncio

PRODUCE, FETCH, LIST_OFFSETS, INIT_PRODUCER_ID = 0, 1, 2, 22
TOPIC = "txn"


class TxnProducer:
    """A producer id and epoch from InitProducerId and its next sequence."""

    def __init__(self, raw: RawClient, producer_id: int, epoch: int) -> None:
        self.raw = raw
        self.producer_id = producer_id
        self.epoch = epoch
        self.sequence = 0

    @classmethod
    async def init(cls, raw: RawClient) -> TxnProducer:
        init = await raw.request(
            INIT_PRODUCER_ID,
            4,
            "InitProducerIdRequest",
            transactional_id=None,
            transaction_timeout=60000,
        )
        assert init.error_code == ErrorCode.none
        return cls(raw, int(init.producer_id), int(init.producer_epoch))

    async def send(self, *values: bytes, transactional: bool = True) -> int:
        batch = build_record_batch(
            [(None, v, ()) for v in values],
            timestamp_ms=int(time.time() * 1000),
            producer_id=self.producer_id,
            producer_epoch=self.epoch,
            base_sequence=self.sequence,
            is_transactional=transactional,
        )
        self.sequence += len(values)
        return await produce(self.raw, batch)


async def produce(raw: RawClient, batch: bytes) -> int:
    b = request_builder(PRODUCE, 9)
    response = await raw.request(
        PRODUCE,
        9,
        "ProduceRequest",
        transactional_id=None,
        acks=-1,
        timeout=10000,
        topic_data=(
            b.TopicProduceData(
                name=TOPIC, partition_data=(b.PartitionProduceData(index=0, records=batch),)
            ),
        ),
    )
    part = response.responses[0].partition_responses[0]
    assert part.error_code == ErrorCode.none, part.error_code
    return int(part.base_offset)


async def write_marker(app: MiniKafka, producer: TxnProducer, commit: bool) -> None:
    """What WriteTxnMarkers does on the leader: an acks=all COORDINATOR append."""
    leader = app.brokers[leader_of(app, TOPIC)].replica_manager
    done: asyncio.Future[ProduceStatuses] = asyncio.get_running_loop().create_future()
    marker = build_control_batch(
        producer.producer_id, producer.epoch, 0, commit, int(time.time() * 1000)
    )
    leader.append_records(
        10000,
        -1,
        {(TOPIC, 0): marker},
        done.set_result,
        None,
        origin=AppendOrigin.COORDINATOR,
    )
    statuses = await asyncio.wait_for(done, 10)
    assert statuses[(TOPIC, 0)].result.error is ErrorCode.none


async def plain(raw: RawClient, value: bytes) -> int:
    return await produce(raw, build_record_batch([(None, value, ())], timestamp_ms=1))


async def list_latest(raw: RawClient, isolation_level: int) -> int:
    b = request_builder(LIST_OFFSETS, 7)
    response = await raw.request(
        LIST_OFFSETS,
        7,
        "ListOffsetsRequest",
        replica_id=-1,
        isolation_level=isolation_level,
        topics=(
            b.ListOffsetsTopic(
                name=TOPIC, partitions=(b.ListOffsetsPartition(partition_index=0, timestamp=-1),)
            ),
        ),
    )
    partition = response.topics[0].partitions[0]
    assert partition.error_code == ErrorCode.none
    return int(partition.offset)


async def raw_fetch(raw: RawClient, isolation_level: int) -> Any:
    b = request_builder(FETCH, 11)
    response = await raw.request(
        FETCH,
        11,
        "FetchRequest",
        replica_id=-1,
        max_wait=0,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=isolation_level,
        session_id=0,
        session_epoch=-1,
        topics=(
            b.FetchTopic(
                topic=TOPIC,
                partitions=(
                    b.FetchPartition(
                        partition=0,
                        current_leader_epoch=-1,
                        fetch_offset=0,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )
    return response.responses[0].partitions[0]


async def aiokafka_values(app: MiniKafka, isolation_level: str, expected: int) -> list[bytes]:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=app.bootstrap,
        isolation_level=isolation_level,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        metadata_max_age_ms=500,
    )
    await consumer.start()
    try:
        tp = TopicPartition(TOPIC, 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        values: list[bytes] = []
        for _ in range(20):
            batch = await consumer.getmany(tp, timeout_ms=300)
            values.extend(r.value for r in batch.get(tp, []) if r.value is not None)
            if len(values) >= expected:
                break
        # nothing more comes (a record the consumer should not see would show up here)
        batch = await consumer.getmany(tp, timeout_ms=300)
        values.extend(r.value for r in batch.get(tp, []) if r.value is not None)
        return values
    finally:
        await consumer.stop()


def kafka_python_values(bootstrap: str, expected: int) -> list[bytes]:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        isolation_level="read_committed",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        consumer_timeout_ms=3000,
    )
    try:
        tp = KpTopicPartition(TOPIC, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        values: list[bytes] = []
        for record in consumer:
            values.append(record.value)
        return values
    finally:
        consumer.close()


def values_of(items: Iterable[str]) -> list[bytes]:
    return [v.encode() for v in items]


async def test_aiokafka_transactions_are_read_only_once_committed() -> None:
    async with running_cluster() as app:
        app.cluster.create_topic(TOPIC, 1, 1, {})
        producer = AIOKafkaProducer(
            bootstrap_servers=app.bootstrap, transactional_id="rc-1", request_timeout_ms=5000
        )
        reader = AIOKafkaConsumer(
            bootstrap_servers=app.bootstrap,
            isolation_level="read_committed",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        await producer.start()
        await reader.start()
        tp = TopicPartition(TOPIC, 0)
        try:
            reader.assign([tp])
            await producer.begin_transaction()
            await producer.send_and_wait(TOPIC, b"c1", partition=0)
            # written and replicated (acks=all), but undecided: not for this reader
            assert (await reader.getmany(tp, timeout_ms=500)).get(tp, []) == []
            assert await reader.end_offsets([tp]) == {tp: 0}
            await producer.commit_transaction()
            got = await reader.getmany(tp, timeout_ms=2000)
            assert [r.value for r in got.get(tp, [])] == [b"c1"]

            await producer.begin_transaction()
            await producer.send_and_wait(TOPIC, b"a1", partition=0)
            await producer.send_and_wait(TOPIC, b"a2", partition=0)
            await producer.abort_transaction()
            async with producer.transaction():
                await producer.send_and_wait(TOPIC, b"c2", partition=0)
        finally:
            await producer.stop()
            await reader.stop()
        committed = values_of(["c1", "c2"])
        assert await aiokafka_values(app, "read_committed", 2) == committed
        assert await asyncio.to_thread(kafka_python_values, app.bootstrap, 2) == committed
        assert await aiokafka_values(app, "read_uncommitted", 4) == values_of(
            ["c1", "a1", "a2", "c2"]
        )


async def _interleaved(app: MiniKafka, raw: RawClient) -> tuple[TxnProducer, TxnProducer]:
    """a1 a2 | p1 | b1 | ABORT(a) | a3 | COMMIT(b) -- a's second transaction stays open."""
    a, b = await TxnProducer.init(raw), await TxnProducer.init(raw)
    assert await a.send(b"a1", b"a2") == 0
    assert await plain(raw, b"p1") == 2
    assert await b.send(b"b1") == 3
    await write_marker(app, a, commit=False)  # 4
    assert await a.send(b"a3") == 5
    await write_marker(app, b, commit=True)  # 6
    return a, b


async def test_read_committed_consumers_see_committed_records_only_after_the_marker() -> None:
    async with running_cluster() as app:
        app.cluster.create_topic(TOPIC, 1, 1, {})
        raw = await RawClient.connect(app.bootstrap)
        try:
            a, _b = await _interleaved(app, raw)
            # a3 (offset 5) is undecided: the LSO stops there
            assert await list_latest(raw, 1) == 5
            assert await list_latest(raw, 0) == 7
            fetched = await raw_fetch(raw, 1)
            assert (fetched.high_watermark, fetched.last_stable_offset) == (7, 5)
            assert [(t.producer_id, t.first_offset) for t in fetched.aborted_transactions] == [
                (a.producer_id, 0)
            ]
            assert (await raw_fetch(raw, 0)).aborted_transactions is None
            assert await aiokafka_values(app, "read_committed", 2) == values_of(["p1", "b1"])

            await write_marker(app, a, commit=True)  # 7
            assert await plain(raw, b"p2") == 8
            assert await list_latest(raw, 1) == 9
            committed = values_of(["p1", "b1", "a3", "p2"])
            assert await aiokafka_values(app, "read_committed", 4) == committed
            assert await asyncio.to_thread(kafka_python_values, app.bootstrap, 4) == committed
            everything = values_of(["a1", "a2", "p1", "b1", "a3", "p2"])
            assert await aiokafka_values(app, "read_uncommitted", 6) == everything
        finally:
            await raw.close()


async def test_replicas_keep_the_transactions_across_a_failover() -> None:
    async with running_cluster(3) as app:
        app.cluster.create_topic(TOPIC, 1, 3, {"min.insync.replicas": "2"})
        old_leader = leader_of(app, TOPIC)
        endpoint = app.cluster.brokers[old_leader]
        raw = await RawClient.connect(endpoint.host, endpoint.port)
        try:
            a, _b = await _interleaved(app, raw)
        finally:
            await raw.close()
        # every replica has the markers (acks=all) and the same aborted index
        for broker in app.brokers:
            partition = broker.replica_manager.online_partition((TOPIC, 0))
            assert partition is not None
            assert [
                (t.producer_id, t.first_offset, t.last_offset)
                for t in partition.txn_index.entries()
            ] == [(a.producer_id, 0, 4)]
        await app.stop_broker(old_leader)
        await wait_until(lambda: leader_of(app, TOPIC) not in (old_leader, -1), "a new leader")
        assert await aiokafka_values(app, "read_committed", 2) == values_of(["p1", "b1"])
        await write_marker(app, a, commit=False)
        assert await aiokafka_values(app, "read_committed", 2) == values_of(["p1", "b1"])
        assert await aiokafka_values(app, "read_uncommitted", 5) == values_of(
            ["a1", "a2", "p1", "b1", "a3"]
        )
