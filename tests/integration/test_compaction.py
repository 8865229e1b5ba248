"""Log compaction as Kafka runs it: the log cleaner keeps the last record of each key.

A real broker with small segments and a short ``log.cleaner.backoff.ms``; aiokafka
produces and consumes. The tests look at the broker's log only to know when a cleaning
has covered everything it may (its first dirty offset reached the active segment).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from broker.app import MiniKafka
from broker.cluster.cluster_metadata import OFFSETS_TOPIC
from broker.log import PartitionLog
from testkit.polling import wait_until
from tests.integration.conftest import running_cluster

CLEANER = {"log.cleaner.backoff.ms": "50"}
Rec = tuple[int, bytes | None, bytes | None]


async def create_topic(app: MiniKafka, name: str, **configs: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=app.bootstrap)
    await admin.start()
    try:
        await admin.create_topics(
            [
                NewTopic(
                    name,
                    num_partitions=1,
                    replication_factor=1,
                    topic_configs={"cleanup.policy": "compact", **configs},
                )
            ]
        )
    finally:
        await admin.close()


def partition_log(app: MiniKafka, topic: str) -> PartitionLog:
    return app.brokers[0].replica_manager.partitions[(topic, 0)].log


async def wait_until_cleaned(plog: PartitionLog, timeout: float = 20.0) -> None:
    """Until the cleaner's first dirty offset is the active segment's base: all that
    may be cleaned is."""
    await wait_until(
        lambda: plog.cleaner_checkpoint.first_dirty_offset >= plog.active_segment_base_offset,
        "the log cleaner to clean the log",
        attempts=int(timeout / 0.02),
        step_s=0.02,
    )


async def consume_all(app: MiniKafka, topic: str) -> list[Rec]:
    tp = TopicPartition(topic, 0)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=app.bootstrap, auto_offset_reset="earliest", enable_auto_commit=False
    )
    await consumer.start()
    try:
        consumer.assign([tp])
        end = (await consumer.end_offsets([tp]))[tp]
        out: list[Rec] = []
        while await consumer.position(tp) < end:
            batch = await consumer.getmany(tp, timeout_ms=1000)
            out.extend((r.offset, r.key, r.value) for r in batch.get(tp, []))
        return out
    finally:
        await consumer.stop()


def compacted(records: list[Rec], end: int) -> list[Rec]:
    last = {key: offset for offset, key, _ in records if offset < end}
    return [r for r in records if r[0] >= end or last[r[1]] == r[0]]


@pytest.mark.parametrize("on_disk", [False, True])
async def test_a_consumer_sees_the_last_value_of_each_key(tmp_path: Path, on_disk: bool) -> None:
    data_dir = tmp_path / "data" if on_disk else None
    async with running_cluster(data_dir=data_dir, **CLEANER) as app:
        await create_topic(app, "latest", **{"segment.bytes": "1024"})
        producer = AIOKafkaProducer(bootstrap_servers=app.bootstrap, linger_ms=0)
        await producer.start()
        produced: list[Rec] = []
        try:
            for i in range(300):
                key, value = b"key-%d" % (i % 10), b"value-%d" % i
                meta = await producer.send_and_wait("latest", value, key=key, partition=0)
                produced.append((meta.offset, key, value))
        finally:
            await producer.stop()
        plog = partition_log(app, "latest")
        await wait_until_cleaned(plog)
        end = plog.cleaner_checkpoint.first_dirty_offset
        assert end > 100
        consumed = await consume_all(app, "latest")
        assert consumed == compacted(produced, end)
        below = [r for r in consumed if r[0] < end]
        assert len(below) == len({r[1] for r in below}) <= 10
        assert len(consumed) < 100


async def test_tombstones_are_kept_for_delete_retention_ms_then_removed() -> None:
    async with running_cluster(**CLEANER) as app:
        # 100 distinct keys: cleaning keeps them all, so a low ratio lets every new
        # segment be cleaned at once (else the tombstone horizon triggers the next one)
        configs = {
            "segment.bytes": "1024",
            "delete.retention.ms": "3000",
            "min.cleanable.dirty.ratio": "0.01",
        }
        await create_topic(app, "tombs", **configs)
        producer = AIOKafkaProducer(bootstrap_servers=app.bootstrap)
        await producer.start()
        try:
            await producer.send_and_wait("tombs", b"doomed", key=b"dead", partition=0)
            await producer.send_and_wait("tombs", None, key=b"dead", partition=0)
            for i in range(100):
                await producer.send_and_wait("tombs", b"x%d" % i, key=b"k%d" % i, partition=0)
        finally:
            await producer.stop()
        await wait_until_cleaned(partition_log(app, "tombs"))
        consumed = await consume_all(app, "tombs")
        assert [r for r in consumed if r[1] == b"dead"] == [(1, b"dead", None)]

        async def tombstone_gone() -> bool:
            return not any(r[1] == b"dead" for r in await consume_all(app, "tombs"))

        await wait_until(tombstone_gone, "the tombstone's removal", attempts=100, step_s=0.2)
        remaining = await consume_all(app, "tombs")
        assert [r[1] for r in remaining] == [b"k%d" % i for i in range(100)]


async def test_consumer_offsets_is_compacted(tmp_path: Path) -> None:
    overrides = {
        **CLEANER,
        # __consumer_offsets has its own segment size (Kafka's), not log.segment.bytes
        "offsets.topic.segment.bytes": "2048",
        "offsets.topic.num.partitions": "1",
        "offsets.topic.replication.factor": "1",
    }
    data_dir = tmp_path / "data"
    tp = TopicPartition("events", 0)
    async with running_cluster(data_dir=data_dir, **overrides) as app:
        producer = AIOKafkaProducer(bootstrap_servers=app.bootstrap)
        await producer.start()
        await producer.send_and_wait("events", b"e", partition=0)
        await producer.stop()
        consumer = AIOKafkaConsumer(
            bootstrap_servers=app.bootstrap, group_id="committer", enable_auto_commit=False
        )
        await consumer.start()
        try:
            consumer.assign([tp])
            for i in range(400):
                await consumer.commit({tp: i})
        finally:
            await consumer.stop()
        plog = app.brokers[0].replica_manager.partitions[(OFFSETS_TOPIC, 0)].log
        await wait_until_cleaned(plog)
        # 400 commits of ~100 bytes each; what stays is one commit in the cleaned part
        # and what the active segment (2048 bytes at most) holds
        assert plog.size_bytes < 2048 + 512
    async with running_cluster(data_dir=data_dir, **overrides) as app:
        again = AIOKafkaConsumer(
            bootstrap_servers=app.bootstrap, group_id="committer", enable_auto_commit=False
        )
        await again.start()
        try:
            again.assign([tp])
            assert await again.committed(tp) == 399  # loaded back from the compacted log
        finally:
            await again.stop()


async def test_followers_clean_their_own_replicas() -> None:
    async with running_cluster(brokers=3, **CLEANER) as app:
        admin = AIOKafkaAdminClient(bootstrap_servers=app.bootstrap)
        await admin.start()
        try:
            topic = NewTopic(
                "replicated",
                num_partitions=1,
                replication_factor=3,
                topic_configs={"cleanup.policy": "compact", "segment.bytes": "1024"},
            )
            await admin.create_topics([topic])
        finally:
            await admin.close()
        producer = AIOKafkaProducer(bootstrap_servers=app.bootstrap, acks="all")
        await producer.start()
        try:
            for i in range(200):
                await producer.send_and_wait("replicated", b"v%d" % i, key=b"k%d" % (i % 5))
        finally:
            await producer.stop()
        logs = [b.replica_manager.partitions[("replicated", 0)].log for b in app.brokers]
        for plog in logs:
            await wait_until_cleaned(plog)
            assert plog.log_end_offset == 200
            assert plog.cleaner_checkpoint.first_dirty_offset > 100
            assert plog.size_bytes < 1024 + 512  # the active segment and one record a key
        consumed = await consume_all(app, "replicated")
        assert len(consumed) < 40 and consumed[-1][0] == 199
