"""aiokafka against a real minikafka broker: the first promise to users."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from broker.app import MiniKafka
from testkit.polling import wait_until

pytestmark = pytest.mark.asyncio


async def test_produce_and_consume_with_keys_and_headers(kafka: MiniKafka) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=kafka.bootstrap)
    await producer.start()
    try:
        sent = []
        for i in range(10):
            md = await producer.send_and_wait(
                "basic",
                value=f"v{i}".encode(),
                key=f"k{i}".encode(),
                headers=[("h", b"x")],
                partition=0,
            )
            sent.append(md.offset)
    finally:
        await producer.stop()
    assert sent == list(range(10))

    consumer = AIOKafkaConsumer(
        "basic",
        bootstrap_servers=kafka.bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    try:
        got = []
        while len(got) < 10:
            batch = await consumer.getmany(timeout_ms=2000)
            assert batch, "no records within 2 s"
            for records in batch.values():
                got.extend(records)
    finally:
        await consumer.stop()
    assert [r.value for r in got] == [f"v{i}".encode() for i in range(10)]
    assert [r.key for r in got] == [f"k{i}".encode() for i in range(10)]
    assert all(list(r.headers) == [("h", b"x")] for r in got)
    assert [r.offset for r in got] == list(range(10))


async def test_waiting_fetch_is_answered_by_a_produce(kafka: MiniKafka) -> None:
    """A consumer long-polling with a long max wait gets a record as soon as it lands."""
    producer = AIOKafkaProducer(bootstrap_servers=kafka.bootstrap)
    await producer.start()
    await producer.send_and_wait("waiting", b"first", partition=0)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=kafka.bootstrap,
        fetch_max_wait_ms=20000,
        enable_auto_commit=False,
        request_timeout_ms=40000,
    )
    await consumer.start()
    try:
        tp = TopicPartition("waiting", 0)
        consumer.assign([tp])
        consumer.seek(tp, 1)
        fetch_purgatory = kafka.brokers[0].purgatories["Fetch"]
        getter = asyncio.ensure_future(consumer.getone())
        await wait_until(
            lambda: fetch_purgatory.num_delayed() > 0, "the consumer's fetch parked", step_s=0.01
        )
        await producer.send_and_wait("waiting", b"second", partition=0)
        record = await asyncio.wait_for(getter, timeout=10)
    finally:
        await consumer.stop()
        await producer.stop()
    assert record.value == b"second"
    assert fetch_purgatory.expired_count == 0
