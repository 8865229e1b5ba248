"""Consumer groups from librdkafka and kafka-python, and offsets across a restart."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from pathlib import Path

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from broker.app import MiniKafka
from tests.integration.conftest import running_cluster


async def create_topic(app: MiniKafka, name: str, partitions: int) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=app.bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
    finally:
        await admin.close()


def run_group_members(make_member, count: int, stop: threading.Event) -> list[set[int]]:  # type: ignore[no-untyped-def]
    """Run ``count`` blocking consumers in threads until every one holds partitions."""
    assignments: list[set[int]] = [set() for _ in range(count)]
    threads = [
        threading.Thread(target=make_member, args=(i, assignments, stop), daemon=True)
        for i in range(count)
    ]
    for t in threads:
        t.start()
    return assignments


async def wait_split(assignments: list[set[int]], total: int) -> None:
    for _ in range(1200):  # 60 s: members in their own processes start slowly on a busy machine
        if (
            all(assignments)
            and sum(len(a) for a in assignments) == total
            and len(set().union(*assignments)) == total
        ):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"no split: {assignments}")


async def test_two_confluent_consumers_split_partitions() -> None:
    from confluent_kafka import Consumer

    async with running_cluster() as app:
        await create_topic(app, "ck", 4)
        stop = threading.Event()

        def member(i: int, assignments: list[set[int]], stop: threading.Event) -> None:
            c = Consumer(
                {
                    "bootstrap.servers": app.bootstrap,
                    "group.id": "ck-group",
                    "session.timeout.ms": 6000,
                    "heartbeat.interval.ms": 300,
                    "auto.offset.reset": "earliest",
                }
            )
            c.subscribe(["ck"])
            try:
                while not stop.is_set():
                    c.poll(0.1)
                    assignments[i] = {tp.partition for tp in c.assignment()}
            finally:
                c.close()

        assignments = run_group_members(member, 2, stop)
        try:
            await wait_split(assignments, 4)
            assert sorted(len(a) for a in assignments) == [2, 2]
        finally:
            stop.set()
            await asyncio.sleep(0.5)


async def test_two_kafka_python_consumers_split_partitions() -> None:
    async with running_cluster() as app:
        await create_topic(app, "kp", 4)
        member = Path(__file__).with_name("kafka_python_member.py")
        procs = [
            await asyncio.create_subprocess_exec(
                sys.executable,
                str(member),
                app.bootstrap,
                "kp",
                "kp-group",
                f"kp-{i}",
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
            )
            for i in range(2)
        ]
        assignments: list[set[int]] = [set(), set()]

        async def follow(i: int, proc: asyncio.subprocess.Process) -> None:
            assert proc.stdout is not None
            async for line in proc.stdout:
                assignments[i] = set(json.loads(line))

        readers = [asyncio.ensure_future(follow(i, p)) for i, p in enumerate(procs)]
        try:
            await wait_split(assignments, 4)
            assert sorted(len(a) for a in assignments) == [2, 2]
        finally:
            for proc in procs:
                assert proc.stdin is not None
                proc.stdin.close()
            for proc in procs:
                try:
                    await asyncio.wait_for(proc.wait(), 20)
                except TimeoutError:
                    proc.kill()
                    await proc.wait()
            for reader in readers:
                reader.cancel()


async def test_committed_offsets_survive_a_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with running_cluster(data_dir=data) as app:
        producer = AIOKafkaProducer(bootstrap_servers=app.bootstrap)
        await producer.start()
        for i in range(5):
            await producer.send_and_wait("kept", f"{i}".encode(), partition=0)
        await producer.stop()
        consumer = AIOKafkaConsumer(
            bootstrap_servers=app.bootstrap, group_id="keeper", enable_auto_commit=False
        )
        await consumer.start()
        tp = TopicPartition("kept", 0)
        consumer.assign([tp])
        await consumer.commit({tp: 3})
        await consumer.stop()
    async with running_cluster(data_dir=data) as again:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=again.bootstrap, group_id="keeper", enable_auto_commit=False
        )
        await consumer.start()
        try:
            consumer.assign([tp])
            assert await consumer.committed(tp) == 3
            record = await asyncio.wait_for(consumer.getone(), 10)
            assert record.offset == 3
        finally:
            await consumer.stop()
