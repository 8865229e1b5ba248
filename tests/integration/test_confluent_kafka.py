"""confluent-kafka (librdkafka) against a real minikafka broker.

librdkafka is the strictest of the clients about protocol details (ApiVersions
negotiation, idempotent producer state, admin request versions), so it is a good
witness that the broker speaks Kafka. Its calls block, so they run in a thread while
the broker runs in the test's event loop.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from broker.app import MiniKafka
from tests.integration.conftest import running_cluster

pytestmark = pytest.mark.asyncio

_QUIET = {"log_level": 3}  # errors only: librdkafka's own logging goes to stderr


def _produce(bootstrap: str, topic: str, count: int, **conf: Any) -> list[tuple[int, int]]:
    delivered: list[tuple[int, int]] = []
    errors: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            errors.append(err)
        else:
            delivered.append((msg.partition(), msg.offset()))

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", **_QUIET, **conf})
    for i in range(count):
        producer.produce(
            topic,
            value=f"v{i}".encode(),
            key=f"k{i}".encode(),
            partition=0,
            on_delivery=on_delivery,
        )
    remaining = producer.flush(15)
    assert remaining == 0, f"{remaining} messages not delivered"
    assert not errors, errors
    return delivered


def _consume(bootstrap: str, topic: str, count: int) -> list[tuple[int | None, bytes | None]]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "confluent-test",  # required by librdkafka; assign() uses no group
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            **_QUIET,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got: list[tuple[int | None, bytes | None]] = []
        for _ in range(100):  # bounded: each poll waits at most 1 s
            for msg in consumer.consume(num_messages=count, timeout=1.0):
                assert msg.error() is None, msg.error()
                got.append((msg.offset(), msg.value()))
            if len(got) >= count:
                break
        return got
    finally:
        consumer.close()


async def test_produce_acks_all_and_consume(kafka: MiniKafka) -> None:
    kafka.cluster.create_topic("ck-basic", 1, 1, {})
    delivered = await asyncio.to_thread(_produce, kafka.bootstrap, "ck-basic", 50)
    assert sorted(offset for _, offset in delivered) == list(range(50))
    got = await asyncio.to_thread(_consume, kafka.bootstrap, "ck-basic", 50)
    assert got == [(i, f"v{i}".encode()) for i in range(50)]


async def test_idempotent_producer(kafka: MiniKafka) -> None:
    kafka.cluster.create_topic("ck-idem", 1, 1, {})
    delivered = await asyncio.to_thread(
        _produce, kafka.bootstrap, "ck-idem", 100, **{"enable.idempotence": True}
    )
    assert sorted(offset for _, offset in delivered) == list(range(100))
    got = await asyncio.to_thread(_consume, kafka.bootstrap, "ck-idem", 100)
    assert [value for _, value in got] == [f"v{i}".encode() for i in range(100)]


def _admin(bootstrap: str) -> dict[str, Any]:
    admin = AdminClient({"bootstrap.servers": bootstrap, **_QUIET})
    created = admin.create_topics(
        [
            NewTopic(
                "ck-admin",
                num_partitions=3,
                replication_factor=1,
                config={"retention.ms": "120000"},
            ),
            NewTopic("ck-defaults"),  # -1/-1: the broker's defaults
        ],
        operation_timeout=10,
    )
    results: dict[str, Any] = {}
    for future in created.values():
        future.result(timeout=15)
    duplicate = admin.create_topics([NewTopic("ck-admin", num_partitions=1)])["ck-admin"]
    try:
        duplicate.result(timeout=15)
        results["duplicate"] = None
    except Exception as exc:  # librdkafka raises KafkaException(KafkaError)
        results["duplicate"] = exc.args[0].code()
    metadata = admin.list_topics(timeout=10)
    results["partitions"] = {name: len(topic.partitions) for name, topic in metadata.topics.items()}
    results["brokers"] = sorted(metadata.brokers)
    return results


async def test_admin_client_creates_and_lists_topics() -> None:
    async with running_cluster(1, None, **{"num.partitions": "2"}) as app:
        results = await asyncio.to_thread(_admin, app.bootstrap)
        assert app.cluster.topics["ck-admin"].configs == {"retention.ms": "120000"}
    assert results["duplicate"] == KafkaError.TOPIC_ALREADY_EXISTS
    assert results["partitions"]["ck-admin"] == 3
    assert results["partitions"]["ck-defaults"] == 2
    assert results["brokers"] == [0]
