"""A group changes protocol when its members restart with the other one (offline, as
Kafka's empty-group conversion): aiokafka's classic members commit, stop; confluent-kafka
members with ``group.protocol=consumer`` take the id and go on from the committed
offsets, commit, stop; classic members come back and go on from theirs. Waits are for
states (bounded), never for times."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as CTopicPartition

from broker.app import MiniKafka
from testkit.polling import wait_until
from tests.integration.conftest import running_cluster
from tests.integration.test_consumer_group_protocol import FAST_CONSUMER_GROUPS

WAIT = {"attempts": 1200, "step_s": 0.05}  # 60 s at most, past a 45 s session

pytestmark = pytest.mark.asyncio

_QUIET = {"log_level": 3}


async def _produce(app: MiniKafka, topic: str, values: list[bytes]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=app.bootstrap, acks="all")
    await producer.start()
    try:
        for value in values:
            await producer.send_and_wait(topic, value, partition=0)
    finally:
        await producer.stop()


async def _classic_round(app: MiniKafka, group: str, topic: str, count: int) -> list[bytes]:
    """A classic aiokafka member reads ``count`` records from its group's offset and
    commits after them."""
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=app.bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    await consumer.start()
    got: list[bytes] = []
    try:
        for _ in range(600):  # 30 s at most
            batch = await consumer.getmany(timeout_ms=50, max_records=count - len(got))
            got.extend(r.value for records in batch.values() for r in records if r.value)
            if len(got) >= count:
                break
        assert len(got) == count, got
        await consumer.commit()
        assert await consumer.committed(TopicPartition(topic, 0)) is not None
    finally:
        await consumer.stop()
    return got


def _consumer_round(bootstrap: str, group: str, topic: str, count: int) -> list[bytes]:
    """The same with a ``group.protocol=consumer`` member (librdkafka)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **_QUIET,
        }
    )
    consumer.subscribe([topic])
    got: list[bytes] = []
    last = -1
    try:
        for _ in range(600):  # 30 s at most
            msg = consumer.poll(0.05)
            if msg is None or msg.error() is not None:
                continue
            got.append(msg.value())
            last = msg.offset()
            if len(got) >= count:
                break
        assert len(got) == count, got
        consumer.commit(offsets=[CTopicPartition(topic, 0, last + 1)], asynchronous=False)
    finally:
        consumer.close()
    return got


async def test_a_group_moves_from_classic_to_consumer_and_back_keeping_its_offsets() -> None:
    group, topic = f"migrate-{uuid.uuid4().hex[:8]}", f"migrate-{uuid.uuid4().hex[:6]}"
    async with running_cluster(**FAST_CONSUMER_GROUPS) as app:
        app.cluster.create_topic(topic, 1, 1, {})
        await _produce(app, topic, [f"v{i}".encode() for i in range(9)])
        assert await _classic_round(app, group, topic, 3) == [b"v0", b"v1", b"v2"]
        got = await asyncio.to_thread(_consumer_round, app.bootstrap, group, topic, 3)
        assert got == [b"v3", b"v4", b"v5"]
        coordinator = next(
            b.services.coordinators.consumer_group
            for b in app.brokers
            if b.services.coordinators.consumer_group.is_consumer_group(group)
        )
        found = coordinator.group(group)
        assert found is not None
        # The member left on close (epoch -1): the group is Empty before the classic join.
        await wait_until(lambda: found.num_members == 0, "the consumer group to be empty", **WAIT)
        assert await _classic_round(app, group, topic, 3) == [b"v6", b"v7", b"v8"]
        assert not coordinator.is_consumer_group(group)  # converted back
