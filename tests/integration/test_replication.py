"""Replication in a 3-broker cluster: followers fetch over TCP, acks=all waits for the ISR.

Every test runs real brokers on 127.0.0.1 in the test's event loop and drives them with
real clients (aiokafka, confluent-kafka, kafka-python) or with raw protocol bytes where
the exact error code matters. State changes that take time (a follower catching up, the
ISR shrinking after ``replica.lag.time.max.ms``) are awaited by bounded polling.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from kio.schema.errors import ErrorCode

from broker.app import MiniKafka
from broker.server.context import RequestContext
from testkit.polling import wait_until
from tests.helpers.cluster import isr, leader_of, raw_to_leader
from tests.integration.conftest import running_cluster

pytestmark = pytest.mark.asyncio

PRODUCE = 0


class ProduceObserver:
    """A broker observer that keeps the timing of every Produce it answered."""

    def __init__(self) -> None:
        self.produces: list[RequestContext] = []

    def request_received(self, ctx: RequestContext, request: Any, frame: bytes) -> None:
        pass

    def request_completed(self, ctx: RequestContext, response: Any, size: int) -> None:
        if ctx.header.api_key == PRODUCE:
            self.produces.append(ctx)


async def consume_values(app: MiniKafka, topic: str, partition: int, count: int) -> list[bytes]:
    consumer = AIOKafkaConsumer(bootstrap_servers=app.bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        got: list[bytes] = []
        for _ in range(50):
            batch = await consumer.getmany(tp, timeout_ms=500)
            got.extend(r.value for r in batch.get(tp, []) if r.value is not None)
            if len(got) >= count:
                break
        return got
    finally:
        await consumer.stop()


async def test_acks_all_is_answered_only_once_both_followers_have_the_batch() -> None:
    observer = ProduceObserver()
    async with running_cluster(3, observers=[observer]) as app:
        app.cluster.create_topic("rep3", 1, 3, {})
        leader = app.brokers[leader_of(app, "rep3")]
        followers = [b for b in app.brokers if b is not leader]
        producer = AIOKafkaProducer(bootstrap_servers=app.bootstrap, acks="all")
        await producer.start()
        try:
            for i in range(5):
                metadata = await producer.send_and_wait("rep3", f"v{i}".encode(), partition=0)
                # The answer came: both followers hold the batch, and the leader knew it.
                for follower in followers:
                    replica = follower.replica_manager.partitions[("rep3", 0)]
                    assert replica.log_end_offset > metadata.offset
                    assert not replica.is_leader
                    leader_view = leader.replica_manager.partitions[("rep3", 0)]
                    assert leader_view.followers[follower.broker_id].log_end_offset > (
                        metadata.offset
                    )
        finally:
            await producer.stop()
        # Every produce waited in the leader's Produce purgatory and completed there.
        assert leader.replica_manager.delayed_produces >= 5
        parked = [
            c
            for c in observer.produces
            if c.services.broker_id == leader.broker_id and c.timing.purgatory == "Produce"
        ]
        assert len(parked) >= 5
        assert all(c.timing.purgatory_outcome == "completed" for c in parked)
        assert all(c.timing.breakdown_ms()["remote_ms"] > 0 for c in parked)
        assert isr(app, "rep3") == [0, 1, 2]
        assert await consume_values(app, "rep3", 0, 5) == [f"v{i}".encode() for i in range(5)]


async def test_paused_follower_times_out_acks_all_until_it_leaves_the_isr() -> None:
    async with running_cluster(3, None, **{"replica.lag.time.max.ms": "2000"}) as app:
        app.cluster.create_topic("lag", 1, 3, {"min.insync.replicas": "2"})
        leader_id = leader_of(app, "lag")
        leader = app.brokers[leader_id]
        lagging = app.brokers[(leader_id + 1) % 3]
        raw = await raw_to_leader(app, "lag", 0)
        try:
            assert await raw.produce("lag", 0, b"before") == (ErrorCode.none, 0)
            lagging.replica_manager.fetcher_manager.pause_replication()
            # A timeout shorter than replica.lag.time.max.ms: the follower is still in
            # the ISR, so the produce waits for it and times out.
            error, _ = await raw.produce("lag", 0, b"timed-out", timeout_ms=200)
            assert error is ErrorCode.request_timed_out
            assert lagging.broker_id in isr(app, "lag")

            await wait_until(lambda: lagging.broker_id not in isr(app, "lag"), "ISR shrink")
            assert leader.replica_manager.isr_shrinks >= 1
            assert app.controller.isr_shrinks >= 1
            error, offset = await raw.produce("lag", 0, b"after-shrink")
            assert error is ErrorCode.none
            assert offset == 2

            lagging.replica_manager.fetcher_manager.resume_replication()
            await wait_until(lambda: lagging.broker_id in isr(app, "lag"), "ISR expand")
            assert leader.replica_manager.isr_expands >= 1
            replica = lagging.replica_manager.partitions[("lag", 0)]
            assert replica.log_end_offset == 3
        finally:
            await raw.close()


async def test_not_enough_replicas_with_followers_stopped_or_dropping_out() -> None:
    async with running_cluster(3, None, **{"replica.lag.time.max.ms": "1000"}) as app:
        app.cluster.create_topic("few", 1, 3, {"min.insync.replicas": "2"})
        app.cluster.create_topic("shrinking", 1, 3, {"min.insync.replicas": "2"})
        leader_id = leader_of(app, "shrinking")
        followers = [b for b in app.brokers if b.broker_id != leader_id]
        raw = await raw_to_leader(app, "shrinking", 0)
        try:
            # Both followers stop fetching while an acks=all produce waits: once the ISR
            # shrinks to the leader alone it is below min.insync.replicas and, as in Kafka 4
            # (KIP-966's strict min ISR), the HW no longer moves: the batch is written but
            # never committed, and the produce times out.
            for follower in followers:
                follower.replica_manager.fetcher_manager.pause_replication()
            error, _ = await raw.produce("shrinking", 0, b"alone", timeout_ms=3000)
            assert error is ErrorCode.request_timed_out
            assert isr(app, "shrinking") == [leader_id]
            # Now the ISR is too small before the append: refused at once, not written.
            error, _ = await raw.produce("shrinking", 0, b"refused")
            assert error is ErrorCode.not_enough_replicas
            assert (
                app.brokers[leader_id].replica_manager.partitions[("shrinking", 0)].log_end_offset
                == 1
            )
        finally:
            await raw.close()

        # Followers stopped outright: the controller drops them from the ISR at once.
        few_leader = leader_of(app, "few")
        for broker_id in range(3):
            if broker_id != few_leader:
                await app.stop_broker(broker_id)
        assert isr(app, "few") == [few_leader]
        raw = await raw_to_leader(app, "few", 0)
        try:
            error, _ = await raw.produce("few", 0, b"x")
            assert error is ErrorCode.not_enough_replicas
            assert await raw.produce("few", 0, b"acks-1", acks=1) == (ErrorCode.none, 0)
        finally:
            await raw.close()


async def test_replication_delay_hook_slows_a_follower_without_stopping_it() -> None:
    async with running_cluster(3) as app:
        app.cluster.create_topic("slow", 1, 3, {})
        leader_id = leader_of(app, "slow")
        slow = app.brokers[(leader_id + 1) % 3]
        manager = slow.replica_manager.fetcher_manager
        manager.set_replication_delay_ms(50, ("slow", 0))
        producer = AIOKafkaProducer(bootstrap_servers=app.bootstrap, acks="all")
        await producer.start()
        try:
            sent = [await producer.send_and_wait("slow", b"%d" % i, partition=0) for i in range(3)]
        finally:
            await producer.stop()
        assert [m.offset for m in sent] == [0, 1, 2]
        assert manager.delay_ms(("slow", 0)) == 50
        manager.set_replication_delay_ms(0, ("slow", 0))
        assert manager.delay_ms(("slow", 0)) == 0
        assert slow.replica_manager.partitions[("slow", 0)].log_end_offset == 3


# -- other clients ---------------------------------------------------------------------


def _confluent_metadata_and_produce(bootstrap: str, topic: str) -> dict[str, Any]:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient

    quiet = {"log_level": 0}
    admin = AdminClient({"bootstrap.servers": bootstrap, **quiet})
    metadata = admin.list_topics(topic=topic, timeout=10)
    part = metadata.topics[topic].partitions[0]
    result: dict[str, Any] = {
        "brokers": sorted(metadata.brokers),
        "leader": part.leader,
        "replicas": sorted(part.replicas),
        "isr": sorted(part.isrs),
    }
    delivered: list[int] = []
    errors: list[Any] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err)
        else:
            delivered.append(msg.offset())

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", **quiet})
    for i in range(10):
        producer.produce(topic, value=b"ck%d" % i, partition=0, on_delivery=on_delivery)
    assert producer.flush(20) == 0
    result["delivered"] = delivered
    result["errors"] = errors
    return result


def _kafka_python_metadata_and_produce(bootstrap: str, topic: str) -> dict[str, Any]:
    from kafka import KafkaAdminClient, KafkaProducer

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        described = admin.describe_topics([topic])[0]
        brokers = sorted(b["broker_id"] for b in admin.describe_cluster()["brokers"])
    finally:
        admin.close()
    part = described["partitions"][0]
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        offsets = [
            producer.send(topic, b"kp%d" % i, partition=0).get(timeout=20).offset for i in range(10)
        ]
    finally:
        producer.close()
    return {
        "brokers": brokers,
        "leader": part["leader_id"],
        "replicas": sorted(part["replica_nodes"]),
        "isr": sorted(part["isr_nodes"]),
        "offsets": offsets,
    }


@pytest.mark.parametrize(
    "client",
    [_confluent_metadata_and_produce, _kafka_python_metadata_and_produce],
    ids=["confluent-kafka", "kafka-python"],
)
async def test_blocking_clients_see_the_cluster_and_produce_acks_all(
    client: Callable[[str, str], dict[str, Any]],
) -> None:
    async with running_cluster(3) as app:
        app.cluster.create_topic("others", 1, 3, {"min.insync.replicas": "2"})
        leader = app.brokers[leader_of(app, "others")]
        result = await asyncio.to_thread(client, app.bootstrap, "others")
        assert result["brokers"] == [0, 1, 2]
        assert result["leader"] == leader.broker_id
        assert result["replicas"] == [0, 1, 2]
        assert result["isr"] == [0, 1, 2]
        assert not result.get("errors")
        offsets = result["delivered"] if "delivered" in result else result["offsets"]
        assert sorted(offsets) == list(range(10))
        assert leader.replica_manager.delayed_produces >= 1
        for broker in app.brokers:
            assert broker.replica_manager.partitions[("others", 0)].log_end_offset == 10
