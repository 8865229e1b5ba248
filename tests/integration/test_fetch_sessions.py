"""Incremental fetch sessions (KIP-227) in a running 3-broker cluster.

Followers keep one session with each leader and replicate through it; acks=all produces
are answered as before; a restarted leader's followers open new sessions. kafka-python
consumers open sessions too; aiokafka never does (sessionless fetches, session id 0).
"""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from broker.app import MiniKafka
from testkit.polling import wait_until
from tests.integration.conftest import running_cluster

pytestmark = pytest.mark.asyncio

TOPIC = "sessions"


def follower_sessions(app: MiniKafka) -> dict[tuple[int, int], int]:
    """(follower, leader) -> the session id the follower holds with that leader."""
    return {
        (broker.broker_id, leader_id): fetcher.session.session_id
        for broker in app.brokers
        if broker.broker_id not in app.stopped_brokers
        for leader_id, fetcher in broker.replica_manager.fetcher_manager.fetchers.items()
    }


def sessions_opened(app: MiniKafka, pairs: int) -> bool:
    """Whether ``pairs`` fetchers each hold a session their leader has (a follower's)."""
    held = follower_sessions(app)
    if len(held) != pairs or 0 in held.values():
        return False
    for (_follower, leader_id), session_id in held.items():
        session = app.brokers[leader_id].services.fetch_manager.cache.get(session_id)
        if session is None or not session.privileged:
            return False
    return True


def all_replicated(app: MiniKafka, log_end: int) -> bool:
    return all(
        partition.log_end_offset == log_end
        for broker in app.brokers
        for tp, partition in broker.replica_manager.partitions.items()
        if tp[0] == TOPIC
    )


async def test_followers_replicate_acks_all_through_sessions_and_renew_them() -> None:
    async with running_cluster(3) as app:
        app.cluster.create_topic(TOPIC, 6, 3, {"min.insync.replicas": "2"})
        producer = AIOKafkaProducer(bootstrap_servers=app.bootstrap, acks="all")
        await producer.start()
        try:
            for i in range(60):
                await producer.send_and_wait(TOPIC, f"v{i}".encode(), partition=i % 6)
            await wait_until(lambda: sessions_opened(app, 6), "a session per follower and leader")
            before = follower_sessions(app)
            await wait_until(lambda: all_replicated(app, 10), "the first 60 replicated")
            # Every fetcher went incremental (epochs move on with each fetch).
            for broker in app.brokers:
                for fetcher in broker.replica_manager.fetcher_manager.fetchers.values():
                    assert fetcher.session.epoch > 1

            await app.stop_broker(1)
            await app.start_broker(1)
            # Broker 1 comes back leading nothing: it follows 0 and 2, which follow each
            # other. Its fetchers start new sessions.
            await wait_until(lambda: sessions_opened(app, 4), "sessions again after a restart")
            after = follower_sessions(app)
            assert set(after) == {(1, 0), (1, 2), (0, 2), (2, 0)}
            assert after[(1, 0)] != before[(1, 0)] and after[(1, 2)] != before[(1, 2)]
            for i in range(60, 120):
                await producer.send_and_wait(TOPIC, f"v{i}".encode(), partition=i % 6)
            await wait_until(lambda: all_replicated(app, 20), "the second 60 replicated")
        finally:
            await producer.stop()


async def test_aiokafka_fetches_without_a_session_and_kafka_python_with_one() -> None:
    async with running_cluster(1) as app:
        app.cluster.create_topic(TOPIC, 2, 1, {})
        producer = AIOKafkaProducer(bootstrap_servers=app.bootstrap)
        await producer.start()
        try:
            for i in range(10):
                await producer.send_and_wait(TOPIC, f"v{i}".encode(), partition=i % 2)
        finally:
            await producer.stop()
        cache = app.brokers[0].services.fetch_manager.cache
        consumer = AIOKafkaConsumer(
            TOPIC, bootstrap_servers=app.bootstrap, auto_offset_reset="earliest"
        )
        await consumer.start()
        try:
            got = 0
            for _ in range(20):
                batch = await consumer.getmany(timeout_ms=200)
                got += sum(len(records) for records in batch.values())
                if got >= 10:
                    break
            assert got == 10
        finally:
            await consumer.stop()
        assert cache.size == 0

        def kafka_python_consume() -> int:
            from kafka import KafkaConsumer, KafkaProducer

            consumer = KafkaConsumer(
                TOPIC,
                bootstrap_servers=app.bootstrap,
                auto_offset_reset="earliest",
                consumer_timeout_ms=5000,
            )
            producer = KafkaProducer(bootstrap_servers=app.bootstrap)
            try:
                count = 0
                for _ in consumer:  # the first 10, then 10 more produced meanwhile
                    count += 1
                    if count == 10:
                        for i in range(10, 20):
                            producer.send(TOPIC, f"v{i}".encode(), partition=i % 2)
                        producer.flush()
                    if count == 20:
                        break
                return count
            finally:
                producer.close()
                consumer.close()

        assert await asyncio.to_thread(kafka_python_consume) == 20
        (session,) = cache.sessions.values()
        assert not session.privileged and session.size == 2 and session.epoch > 1
