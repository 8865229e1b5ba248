"""Retention as Kafka runs it: a periodic check deletes what retention.ms allows."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from testkit.polling import wait_until
from tests.integration.conftest import running_cluster


@pytest.mark.parametrize("on_disk", [False, True])
async def test_retention_ms_deletes_old_records(tmp_path: Path, on_disk: bool) -> None:
    data_dir = tmp_path / "data" if on_disk else None
    overrides = {"log.retention.check.interval.ms": "50"}
    async with running_cluster(data_dir=data_dir, **overrides) as app:
        admin = AIOKafkaAdminClient(bootstrap_servers=app.bootstrap)
        await admin.start()
        try:
            # Small segments so that whole segments can go on disk.
            await admin.create_topics(
                [
                    NewTopic(
                        "short-lived",
                        num_partitions=1,
                        replication_factor=1,
                        topic_configs={"retention.ms": "60000", "segment.bytes": "1024"},
                    )
                ]
            )
        finally:
            await admin.close()
        producer = AIOKafkaProducer(bootstrap_servers=app.bootstrap)
        await producer.start()
        try:
            old = 0  # epoch ms: far older than retention.ms allows
            for i in range(20):
                await producer.send_and_wait(
                    "short-lived", b"x" * 200, partition=0, timestamp_ms=old + i
                )
            await producer.send_and_wait("short-lived", b"fresh", partition=0)
        finally:
            await producer.stop()
        tp = TopicPartition("short-lived", 0)
        consumer = AIOKafkaConsumer(bootstrap_servers=app.bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:

            async def deleted() -> bool:
                return bool((await consumer.beginning_offsets([tp]))[tp] > 0)

            await wait_until(deleted, "retention to delete the old segments")
            assert (await consumer.end_offsets([tp]))[tp] == 21
            consumer.assign([tp])
            consumer.seek(tp, 20)
            record = await asyncio.wait_for(consumer.getone(), 10)
            assert record.value == b"fresh"
        finally:
            await consumer.stop()
