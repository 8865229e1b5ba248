"""kafka-python (a blocking client) against a real minikafka broker.

kafka-python opens with a newer ApiVersions than some brokers speak and relies on
Kafka's answer (a v0 response with UNSUPPORTED_VERSION and the supported ranges) to
settle on a version. Its calls block, so they run in a thread while the broker runs in
the test's event loop.
"""

from __future__ import annotations

import asyncio

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewPartitions, NewTopic
from kafka.errors import TopicAlreadyExistsError

from broker.app import MiniKafka

pytestmark = pytest.mark.asyncio


def _produce(bootstrap: str, topic: str, count: int) -> list[int]:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    try:
        futures = [
            producer.send(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=0)
            for i in range(count)
        ]
        producer.flush(timeout=10)
        return [f.get(timeout=10).offset for f in futures]
    finally:
        producer.close(timeout=5)


def _consume(bootstrap: str, topic: str, count: int) -> list[tuple[int, bytes | None]]:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=10000
    )
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        got: list[tuple[int, bytes | None]] = []
        for _ in range(100):  # bounded: each poll waits at most 1 s
            for records in consumer.poll(timeout_ms=1000).values():
                got.extend((r.offset, r.value) for r in records)
            if len(got) >= count:
                break
        return got
    finally:
        consumer.close()


async def test_produce_and_consume(kafka: MiniKafka) -> None:
    offsets = await asyncio.to_thread(_produce, kafka.bootstrap, "kp-basic", 20)
    assert offsets == list(range(20))
    got = await asyncio.to_thread(_consume, kafka.bootstrap, "kp-basic", 20)
    assert got == [(i, f"v{i}".encode()) for i in range(20)]


def _admin_round_trip(bootstrap: str) -> dict[str, object]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    try:
        admin.create_topics([NewTopic("kp-admin", num_partitions=2, replication_factor=1)])
        try:
            admin.create_topics([NewTopic("kp-admin", num_partitions=2, replication_factor=1)])
            duplicate_error = None
        except TopicAlreadyExistsError as exc:
            duplicate_error = exc
        admin.create_partitions({"kp-admin": NewPartitions(total_count=4)})
        topics_after_create = set(admin.list_topics())
        described = admin.describe_topics(["kp-admin"])
        admin.delete_topics(["kp-admin"])
        topics_after_delete = set(admin.list_topics())
        return {
            "duplicate_error": duplicate_error,
            "created": "kp-admin" in topics_after_create,
            "partitions": len(described[0]["partitions"]),
            "deleted": "kp-admin" not in topics_after_delete,
        }
    finally:
        admin.close()


async def test_admin_client(kafka: MiniKafka) -> None:
    result = await asyncio.to_thread(_admin_round_trip, kafka.bootstrap)
    assert isinstance(result["duplicate_error"], TopicAlreadyExistsError)
    assert result["created"]
    assert result["partitions"] == 4
    assert result["deleted"]
    assert "kp-admin" not in kafka.cluster.topics
