"""Consumer groups with aiokafka against a real broker: join, split, leave, die, commit."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from broker.app import MiniKafka
from testkit.polling import wait_until
from tests.integration.conftest import running_cluster

TOPIC = "orders"


@pytest.fixture
async def six_partitions() -> AsyncIterator[MiniKafka]:
    async with running_cluster() as app:
        admin = AIOKafkaAdminClient(bootstrap_servers=app.bootstrap)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(TOPIC, num_partitions=6, replication_factor=1)])
        finally:
            await admin.close()
        yield app


def consumer(app: MiniKafka, group: str = "g1", **kw: object) -> AIOKafkaConsumer:
    options: dict[str, object] = {
        "bootstrap_servers": app.bootstrap,
        "group_id": group,
        "auto_offset_reset": "earliest",
        "session_timeout_ms": 6000,
        "heartbeat_interval_ms": 300,
        "enable_auto_commit": False,
    }
    options.update(kw)
    return AIOKafkaConsumer(TOPIC, **options)  # type: ignore[arg-type]


async def wait_for_assignments(consumers: list[AIOKafkaConsumer], total: int) -> list[bytes]:
    """Poll (bounded) until the group has settled with ``total`` partitions assigned.

    Returns the values consumed while polling, so that no record is lost to the wait.
    """
    values: list[bytes] = []

    async def settled() -> bool:
        batches = await asyncio.gather(*(c.getmany(timeout_ms=50) for c in consumers))
        for batch in batches:
            for records in batch.values():
                values.extend(r.value for r in records if r.value is not None)
        sizes = [len(c.assignment()) for c in consumers]
        all_tps = set().union(*(c.assignment() for c in consumers))
        return sum(sizes) == total and all(sizes) and len(all_tps) == total

    # The consumers' own polls (50 ms each) pace the attempts.
    await wait_until(
        settled, f"the group to settle with {total} partitions", attempts=300, step_s=0
    )
    return values


async def produce(app: MiniKafka, count: int, prefix: str = "m") -> None:
    producer = AIOKafkaProducer(bootstrap_servers=app.bootstrap)
    await producer.start()
    try:
        for i in range(count):
            await producer.send(TOPIC, f"{prefix}{i}".encode(), partition=i % 6)
        await producer.flush()
    finally:
        await producer.stop()


async def drain(
    consumers: list[AIOKafkaConsumer], expected: int, values: list[bytes] | None = None
) -> list[bytes]:
    values = list(values or [])
    for _ in range(200):
        batches = await asyncio.gather(*(c.getmany(timeout_ms=100) for c in consumers))
        for batch in batches:
            for records in batch.values():
                values.extend(r.value for r in records if r.value is not None)
        if len(values) >= expected:
            break
    return values


async def test_three_consumers_split_six_partitions(six_partitions: MiniKafka) -> None:
    app = six_partitions
    consumers = [consumer(app) for _ in range(3)]
    await asyncio.gather(*(c.start() for c in consumers))
    try:
        await wait_for_assignments(consumers, 6)
        assert sorted(len(c.assignment()) for c in consumers) == [2, 2, 2]
        await produce(app, 60)
        values = await drain(consumers, 60)
        assert sorted(values) == sorted(f"m{i}".encode() for i in range(60))
    finally:
        await asyncio.gather(*(c.stop() for c in consumers))


async def test_closing_consumer_hands_over_its_partitions(six_partitions: MiniKafka) -> None:
    app = six_partitions
    consumers = [consumer(app) for _ in range(3)]
    await asyncio.gather(*(c.start() for c in consumers))
    try:
        await wait_for_assignments(consumers, 6)
        leaving = consumers.pop()
        await leaving.stop()  # sends LeaveGroup
        await wait_for_assignments(consumers, 6)
        assert sorted(len(c.assignment()) for c in consumers) == [3, 3]
        # The handover came from the LeaveGroup, not from a session expiry.
        assert app.brokers[0].purgatories["Heartbeat"].expired_count == 0
    finally:
        await asyncio.gather(*(c.stop() for c in consumers))


async def test_dead_member_is_removed_after_session_timeout(
    six_partitions: MiniKafka, caplog: pytest.LogCaptureFixture
) -> None:
    app = six_partitions
    await produce(app, 30, prefix="before")
    survivors = [consumer(app, session_timeout_ms=6000) for _ in range(2)]
    frozen = consumer(app, session_timeout_ms=6000)
    everyone = [*survivors, frozen]
    await asyncio.gather(*(c.start() for c in everyone))
    try:
        early = await wait_for_assignments(everyone, 6)
        consumed = await drain(everyone, 30, early)
        assert len(consumed) == 30
        await asyncio.gather(*(c.commit() for c in everyone))
        frozen_member = frozen._coordinator.member_id
        # Freeze the client without a LeaveGroup: stop its heartbeat task and fetcher.
        frozen._coordinator._heartbeat_task.cancel()
        frozen._fetcher._fetch_task.cancel()
        with caplog.at_level(logging.INFO, logger="broker.group"):
            for _ in range(600):
                await asyncio.gather(*(c.getmany(timeout_ms=50) for c in survivors))
                if sum(len(c.assignment()) for c in survivors) == 6:
                    break
        assert sum(len(c.assignment()) for c in survivors) == 6
        assert (
            f"Member {frozen_member} in group g1 has failed, removing it from the group"
            in caplog.text
        )
        # Nothing committed is consumed again.
        await produce(app, 12, prefix="after")
        again = await drain(survivors, 12)
        assert sorted(again) == sorted(f"after{i}".encode() for i in range(12))
    finally:
        for c in everyone:
            # The frozen one may complain about its cancelled tasks.
            with contextlib.suppress(Exception):
                await asyncio.wait_for(c.stop(), 10)


async def test_manual_and_auto_commit_and_assign(six_partitions: MiniKafka) -> None:
    app = six_partitions
    await produce(app, 12)
    c = consumer(app, group="manual")
    await c.start()
    try:
        early = await wait_for_assignments([c], 6)
        got = await drain([c], 12, early)
        assert len(got) == 12
        await c.commit()  # sync
        positions = {tp: await c.position(tp) for tp in c.assignment()}
        for tp, pos in positions.items():
            assert await c.committed(tp) == pos
    finally:
        await c.stop()

    # A consumer that uses assign() commits and fetches its offsets (generation -1).
    simple = AIOKafkaConsumer(
        bootstrap_servers=app.bootstrap, group_id="simple", enable_auto_commit=False
    )
    await simple.start()
    try:
        tp = TopicPartition(TOPIC, 3)
        simple.assign([tp])
        await simple.commit({tp: 2})
        assert await simple.committed(tp) == 2
    finally:
        await simple.stop()

    auto = consumer(app, group="auto", enable_auto_commit=True, auto_commit_interval_ms=100)
    await auto.start()
    try:
        early = await wait_for_assignments([auto], 6)
        assert len(await drain([auto], 12, early)) == 12
    finally:
        await auto.stop()  # commits on close
    check = consumer(app, group="auto")
    await check.start()
    try:
        await wait_for_assignments([check], 6)
        total = 0
        for tp in check.assignment():
            total += await check.committed(tp) or 0
        assert total == 12
    finally:
        await check.stop()
