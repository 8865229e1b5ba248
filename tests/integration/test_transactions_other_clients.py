"""Transactions with confluent-kafka (librdkafka) and kafka-python, on 3 brokers.

The same scenario as ``test_transactions.py`` with the other two clients: a
transactional producer commits and aborts, a read_committed consumer sees the committed
records only; with librdkafka also consume-transform-produce
(``send_offsets_to_transaction`` with the consumer's group metadata, so TxnOffsetCommit
v3 carries the member id and generation the group coordinator validates). The clients
block, so they run in threads while the brokers run in the test's event loop.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition

from tests.integration.conftest import running_cluster

pytestmark = pytest.mark.asyncio

_QUIET = {"log_level": 3}


def _ck_read_committed(bootstrap: str, topic: str, partitions: int, expect: int) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "ck-reader",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            **_QUIET,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        got: list[bytes] = []
        extra_polls = 1  # one short poll past the expected count: nothing more may come
        for _ in range(10):  # bounded: at most ~5 s
            for msg in consumer.consume(num_messages=100, timeout=0.5):
                value = msg.value()
                if msg.error() is None and value is not None:
                    got.append(value)
            if len(got) >= expect:
                if extra_polls == 0:
                    break
                extra_polls -= 1
        return sorted(got)
    finally:
        consumer.close()


def _ck_commit_and_abort(bootstrap: str, topic: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "ck-tx", **_QUIET})
    producer.init_transactions(20)
    producer.begin_transaction()
    for i in range(4):
        producer.produce(topic, value=f"ck-committed-{i}".encode(), partition=i % 2)
    producer.commit_transaction(20)
    producer.begin_transaction()
    for i in range(4):
        producer.produce(topic, value=f"ck-aborted-{i}".encode(), partition=i % 2)
    producer.flush(10)
    producer.abort_transaction(20)


async def test_confluent_kafka_commit_and_abort() -> None:
    async with running_cluster(3) as app:
        app.cluster.create_topic("ck-txn", 2, 3, {})
        await asyncio.to_thread(_ck_commit_and_abort, app.bootstrap, "ck-txn")
        got = await asyncio.to_thread(_ck_read_committed, app.bootstrap, "ck-txn", 2, 4)
        assert got == [f"ck-committed-{i}".encode() for i in range(4)]


def _ck_consume_transform_produce(bootstrap: str, source: str, sink: str, count: int) -> int:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "ck-eos",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            **_QUIET,
        }
    )
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "ck-eos-tx", **_QUIET})
    producer.init_transactions(20)
    consumer.subscribe([source])
    processed = 0
    try:
        for _ in range(40):
            messages = [m for m in consumer.consume(num_messages=100, timeout=0.5) if not m.error()]
            if not messages:
                if processed >= count:
                    break
                continue
            producer.begin_transaction()
            for m in messages:
                producer.produce(
                    sink, value=b"ck-" + (m.value() or b""), partition=m.partition() or 0
                )
            producer.send_offsets_to_transaction(
                consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 20
            )
            producer.commit_transaction(20)
            processed += len(messages)
            if processed >= count:
                break
        return processed
    finally:
        consumer.close()


def _ck_committed(bootstrap: str, topic: str, partitions: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ck-eos", **_QUIET})
    try:
        parts = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], 10)
        return [tp.offset for tp in parts]
    finally:
        consumer.close()


def _ck_plain_produce(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", **_QUIET})
    for i in range(count):
        producer.produce(topic, value=f"{i}".encode(), partition=i % 2)
    assert producer.flush(10) == 0


async def test_confluent_kafka_consume_transform_produce() -> None:
    async with running_cluster(3) as app:
        app.cluster.create_topic("ck-in", 2, 3, {})
        app.cluster.create_topic("ck-out", 2, 3, {})
        await asyncio.to_thread(_ck_plain_produce, app.bootstrap, "ck-in", 10)
        processed = await asyncio.to_thread(
            _ck_consume_transform_produce, app.bootstrap, "ck-in", "ck-out", 10
        )
        assert processed == 10
        got = await asyncio.to_thread(_ck_read_committed, app.bootstrap, "ck-out", 2, 10)
        assert got == sorted(f"ck-{i}".encode() for i in range(10))
        assert await asyncio.to_thread(_ck_committed, app.bootstrap, "ck-in", 2) == [5, 5]


def _kp_commit_and_abort(bootstrap: str, topic: str) -> None:
    producer: Any = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kp-tx")
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for i in range(4):
            producer.send(topic, f"kp-committed-{i}".encode(), partition=i % 2)
        producer.commit_transaction()
        producer.begin_transaction()
        for i in range(4):
            producer.send(topic, f"kp-aborted-{i}".encode(), partition=i % 2)
        producer.flush()
        producer.abort_transaction()
    finally:
        producer.close(timeout=5)


def _kp_read_committed(bootstrap: str, topic: str, expect: int) -> list[bytes]:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        isolation_level="read_committed",
        enable_auto_commit=False,
        consumer_timeout_ms=1500,
    )
    try:
        consumer.assign([KpTopicPartition(topic, p) for p in range(2)])
        consumer.seek_to_beginning()
        got = [m.value for m in consumer]
        return sorted(got)
    finally:
        consumer.close()


async def test_kafka_python_commit_and_abort() -> None:
    async with running_cluster(3) as app:
        app.cluster.create_topic("kp-txn", 2, 3, {})
        await asyncio.to_thread(_kp_commit_and_abort, app.bootstrap, "kp-txn")
        got = await asyncio.to_thread(_kp_read_committed, app.bootstrap, "kp-txn", 4)
        assert got == [f"kp-committed-{i}".encode() for i in range(4)]
