"""Leader failover in a 3-broker cluster, and a restarted follower's truncation.

``MiniKafka.stop_broker`` stops a broker as if its process died: the in-process
controller elects a new leader from the ISR (leader epoch + 1), clients see it in the
next Metadata response. ``start_broker`` brings it back on the same port with the same
data; its replicas truncate what the leader's epochs do not prove, catch up and rejoin
the ISR.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from kio.schema.errors import ErrorCode

from broker.app import MiniKafka
from protocol.record_batch import iter_batches
from testkit.polling import wait_until
from tests.helpers.cluster import isr, leader_of, raw_to_leader
from tests.integration.conftest import running_cluster

pytestmark = pytest.mark.asyncio

TOPIC = "fo"
PARTITIONS = 2
RECORDS = 300


async def _produce_all(
    app: MiniKafka, acked: dict[int, list[bytes]], halfway: asyncio.Event
) -> None:
    """acks=all, idempotent (retries without duplicates), one record at a time per key."""
    producer = AIOKafkaProducer(
        bootstrap_servers=app.bootstrap,
        acks="all",
        enable_idempotence=True,
        request_timeout_ms=5000,
        retry_backoff_ms=50,
        metadata_max_age_ms=1000,
    )
    await producer.start()
    try:
        for i in range(RECORDS):
            partition = i % PARTITIONS
            value = f"{partition}-{i}".encode()
            metadata = await producer.send_and_wait(TOPIC, value, partition=partition)
            assert metadata.partition == partition
            acked[partition].append(value)
            if i == RECORDS // 3:
                halfway.set()
    finally:
        await producer.stop()


async def test_leader_stopped_while_producer_and_consumer_run_loses_nothing() -> None:
    async with running_cluster(3) as app:
        app.cluster.create_topic(TOPIC, PARTITIONS, 3, {"min.insync.replicas": "2"})
        old_leader = leader_of(app, TOPIC, 0)
        old_epoch = app.cluster.topics[TOPIC].partitions[0].leader_epoch
        acked: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
        halfway = asyncio.Event()

        consumer = AIOKafkaConsumer(
            bootstrap_servers=app.bootstrap, enable_auto_commit=False, metadata_max_age_ms=1000
        )
        await consumer.start()
        tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        got: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
        producing = asyncio.create_task(_produce_all(app, acked, halfway))
        try:
            await asyncio.wait_for(halfway.wait(), 60)
            await app.stop_broker(old_leader)
            state = app.cluster.partition_state(TOPIC, 0)
            assert state is not None
            assert state.leader != old_leader and state.leader >= 0
            assert state.leader_epoch == old_epoch + 1
            assert old_leader not in state.isr

            for _ in range(400):  # bounded: each poll waits at most 250 ms
                batch = await consumer.getmany(timeout_ms=250)
                for tp, records in batch.items():
                    got[tp.partition].extend(r.value for r in records if r.value is not None)
                if producing.done() and all(
                    len(got[p]) >= len(acked[p]) for p in range(PARTITIONS)
                ):
                    break
            await producing  # re-raises a producer failure
        finally:
            if not producing.done():
                producing.cancel()
            await consumer.stop()

        assert sum(len(v) for v in acked.values()) == RECORDS
        for p in range(PARTITIONS):
            # Every acknowledged record exactly once, in the order it was acknowledged.
            assert got[p] == acked[p]


def _values(app: MiniKafka, broker_id: int, topic: str) -> list[tuple[int, int]]:
    """(base offset, leader epoch) of every batch in a broker's replica of ``topic``-0."""
    partition = app.brokers[broker_id].replica_manager.partitions[(topic, 0)]
    data = partition.log.read(partition.log_start_offset, 1 << 24, max_offset=None)
    return [(h.base_offset, h.partition_leader_epoch) for _, h in iter_batches(data)]


@pytest.mark.parametrize("on_disk", [False, True], ids=["memory", "disk"])
async def test_restarted_old_leader_truncates_its_unreplicated_tail_and_rejoins(
    tmp_path: Path, on_disk: bool
) -> None:
    async with running_cluster(3, tmp_path if on_disk else None) as app:
        app.cluster.create_topic("tr", 1, 3, {})
        old = leader_of(app, "tr")
        followers = [b for b in range(3) if b != old]
        raw = await raw_to_leader(app, "tr", 0)
        try:
            for i in range(3):
                assert (await raw.produce("tr", 0, b"kept%d" % i))[0] is ErrorCode.none
            # The followers stop fetching; acks=1 records reach only the old leader.
            for b in followers:
                app.brokers[b].replica_manager.fetcher_manager.pause_replication()
            for i in range(2):
                error, offset = await raw.produce("tr", 0, b"lost%d" % i, acks=1)
                assert (error, offset) == (ErrorCode.none, 3 + i)
        finally:
            await raw.close()

        await app.stop_broker(old)
        new = leader_of(app, "tr")
        assert new in followers
        for b in followers:
            app.brokers[b].replica_manager.fetcher_manager.resume_replication()
        raw = await raw_to_leader(app, "tr", 0)
        try:
            for i in range(4):
                error, offset = await raw.produce("tr", 0, b"new%d" % i)
                assert (error, offset) == (ErrorCode.none, 3 + i)
        finally:
            await raw.close()

        await app.start_broker(old)
        restarted = app.brokers[old].replica_manager
        assert not restarted.partitions[("tr", 0)].is_leader
        await wait_until(lambda: old in isr(app, "tr"), "the restarted broker to rejoin the ISR")
        # It cut offsets 3-4 (epoch 0, never replicated) and fetched the new epoch's.
        assert restarted.fetcher_manager.truncations >= 1
        assert _values(app, old, "tr") == _values(app, new, "tr")
        assert _values(app, new, "tr") == [(0, 0), (1, 0), (2, 0)] + [(3 + i, 1) for i in range(4)]
        assert app.brokers[new].replica_manager.isr_expands >= 1


def _confluent_produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    from confluent_kafka import Producer

    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "log_level": 0}
    )
    for value in values:
        producer.produce(topic, value=value, partition=0)
    assert producer.flush(20) == 0


def _confluent_consume(bootstrap: str, topic: str, count: int) -> list[bytes]:
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CkTopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "failover-check",
            "enable.auto.commit": False,
            "log_level": 0,
        }
    )
    try:
        consumer.assign([CkTopicPartition(topic, 0, 0)])
        got: list[bytes] = []
        for _ in range(40):  # bounded: each poll waits at most 0.5 s
            for message in consumer.consume(100, 0.5):
                assert message.error() is None, message.error()
                value = message.value()
                assert value is not None
                got.append(value)
            if len(got) >= count:
                break
        return got
    finally:
        consumer.close()


async def test_librdkafka_produces_across_a_failover_and_reads_everything() -> None:
    async with running_cluster(3) as app:
        app.cluster.create_topic("ckfo", 1, 3, {"min.insync.replicas": "2"})
        values = [b"%d" % i for i in range(40)]
        await asyncio.to_thread(_confluent_produce, app.bootstrap, "ckfo", values[:20])
        old = leader_of(app, "ckfo")
        await app.stop_broker(old)
        await asyncio.to_thread(_confluent_produce, app.bootstrap, "ckfo", values[20:])
        assert await asyncio.to_thread(_confluent_consume, app.bootstrap, "ckfo", 40) == values
        await app.start_broker(old)
        await wait_until(lambda: old in isr(app, "ckfo"), "the old leader to rejoin the ISR")
        assert leader_of(app, "ckfo") != old  # no preferred-leader election
