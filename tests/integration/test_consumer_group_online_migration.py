"""Kafka 4's online migration with real clients: a rolling upgrade of a running group from
the classic protocol (aiokafka) to the consumer protocol (confluent-kafka,
``group.protocol=consumer``), one member at a time while records keep coming, and the
rolling downgrade back. No record is lost, each new owner goes on from the committed
offsets, and ConsumerGroupDescribe shows the group as a consumer group with classic
(member type 0) and consumer (1) members during the roll. Waits are for states (bounded
polls), never for times."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import uuid
from collections import Counter
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import KafkaError as AIOKafkaError
from confluent_kafka import Consumer, KafkaException

from broker.app import MiniKafka
from kafka_tools.admin_consumer_groups import ConsumerGroupView, describe_consumer_group
from kafka_tools.client import KafkaClient
from testkit.polling import wait_until
from tests.integration.conftest import running_cluster
from tests.integration.test_consumer_group_protocol import FAST_CONSUMER_GROUPS

pytestmark = pytest.mark.asyncio

WAIT = {"attempts": 1800, "step_s": 0.05}  # 90 s at most, on a loaded machine
PARTITIONS = 6
PER_STEP = 5  # records per partition produced before each step
BATCH = 10  # records an aiokafka member reads between two commits


class Seen:
    """Every record any member consumed: (partition, offset) -> times seen."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[int, int]] = Counter()
        self.lock = threading.Lock()
        # How far back a read went from the furthest read of its partition so far: a
        # new owner starting from the committed offset re-reads at most what the last
        # owner read but could not commit (one batch).
        self.furthest: dict[int, int] = {}
        self.rewind: dict[int, int] = {}

    def add(self, partition: int, offset: int) -> None:
        with self.lock:
            self.counts[(partition, offset)] += 1
            furthest = self.furthest.get(partition, -1)
            if offset <= furthest:
                back = furthest - offset + 1
                self.rewind[partition] = max(self.rewind.get(partition, 0), back)
            self.furthest[partition] = max(furthest, offset)


class Classic:
    """An aiokafka consumer (classic protocol, eager) committing after every batch."""

    def __init__(self, app: MiniKafka, group: str, topic: str, seen: Seen) -> None:
        self.consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=app.bootstrap,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            heartbeat_interval_ms=300,
            session_timeout_ms=10_000,
            max_poll_interval_ms=60_000,
        )
        self.seen = seen
        self.task: asyncio.Task[None] | None = None
        self.running = True

    async def start(self) -> None:
        await self.consumer.start()
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while self.running:
            batch = await self.consumer.getmany(timeout_ms=50, max_records=BATCH)
            for tp, records in batch.items():
                for r in records:
                    self.seen.add(tp.partition, r.offset)
            if batch:
                # A commit refused by a rebalance: the next owner reads them again.
                with contextlib.suppress(AIOKafkaError):
                    await self.consumer.commit()

    @property
    def assignment(self) -> frozenset[int]:
        return frozenset(tp.partition for tp in self.consumer.assignment())

    async def stop(self) -> None:
        self.running = False
        assert self.task is not None
        await asyncio.wait_for(self.task, 30)
        await self.consumer.stop()  # LeaveGroup


class Modern:
    """A confluent-kafka consumer with ``group.protocol=consumer`` in its own thread,
    committing after every record it processed."""

    def __init__(self, app: MiniKafka, group: str, topic: str, seen: Seen) -> None:
        self.consumer = Consumer(
            {
                "bootstrap.servers": app.bootstrap,
                "group.id": group,
                "group.protocol": "consumer",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "log_level": 3,
            }
        )
        self.topic = topic
        self.seen = seen
        self.assignment: frozenset[int] = frozenset()
        self._stop = threading.Event()
        self.task: asyncio.Future[None] | None = None

    def _run(self) -> None:
        self.consumer.subscribe([self.topic])
        try:
            while not self._stop.is_set():
                msg = self.consumer.poll(0.05)
                if msg is not None and msg.error() is None:
                    self.seen.add(msg.partition(), msg.offset())
                    # Its partition moved meanwhile: the next owner reads it again.
                    with contextlib.suppress(KafkaException):
                        self.consumer.commit(message=msg, asynchronous=False)
                self.assignment = frozenset(tp.partition for tp in self.consumer.assignment())
        finally:
            self.consumer.close()  # leaves with epoch -1

    async def start(self) -> None:
        self.task = asyncio.ensure_future(asyncio.to_thread(self._run))

    async def stop(self) -> None:
        self._stop.set()
        assert self.task is not None
        await asyncio.wait_for(self.task, 30)


Member = Classic | Modern


async def _produce(app: MiniKafka, topic: str, step: int) -> int:
    """``PER_STEP`` records to every partition; the number produced so far."""
    producer = AIOKafkaProducer(bootstrap_servers=app.bootstrap, acks="all")
    await producer.start()
    try:
        for p in range(PARTITIONS):
            for i in range(PER_STEP):
                await producer.send_and_wait(topic, f"{step}-{p}-{i}".encode(), partition=p)
    finally:
        await producer.stop()
    return (step + 1) * PER_STEP * PARTITIONS


async def _describe(app: MiniKafka, group: str) -> ConsumerGroupView | None:
    async with KafkaClient(app.bootstrap) as client:
        coordinator = await client.find_coordinator(group)
        return await describe_consumer_group(client, group, coordinator)


def _split(members: list[Member]) -> bool:
    """Each partition owned by exactly one member (as the clients see it), each member
    owning some."""
    owned = [m.assignment for m in members]
    every = [p for a in owned for p in a]
    return all(owned) and len(every) == len(set(every)) == PARTITIONS


def _all_seen(seen: Seen, produced: int) -> bool:
    with seen.lock:
        per_partition = Counter(p for p, _ in seen.counts)
    return all(per_partition[p] >= produced // PARTITIONS for p in range(PARTITIONS))


async def _settled(app: MiniKafka, members: list[Member], seen: Seen, produced: int) -> None:
    await wait_until(
        lambda: _split(members) and _all_seen(seen, produced),
        f"{len(members)} members splitting the topic, {produced} records read",
        **WAIT,
    )


def _coordinator_group(app: MiniKafka, group: str) -> Any:
    for broker in app.brokers:
        found = broker.services.coordinators.consumer_group.group(group)
        if found is not None:
            return found
    return None


async def _committed(app: MiniKafka, group: str, topic: str) -> dict[int, int]:
    async with KafkaClient(app.bootstrap) as client:
        coordinator = await client.find_coordinator(group)
        offsets = await client.committed_offsets(group, coordinator)
    return {p: o for (t, p), o in offsets.items() if t == topic}


async def _check_describe(app: MiniKafka, group: str, classic: int, consumer: int) -> None:
    async def matches() -> bool:
        view = await _describe(app, group)
        if view is None:
            return False
        types = Counter(m.member_type for m in view.members)
        return types == Counter({0: classic, 1: consumer}) if classic else types[1] == consumer

    await wait_until(
        matches, f"ConsumerGroupDescribe showing {classic} classic, {consumer} consumer", **WAIT
    )


async def test_a_rolling_upgrade_and_downgrade_lose_no_record() -> None:
    group, topic = f"roll-{uuid.uuid4().hex[:8]}", f"roll-{uuid.uuid4().hex[:6]}"
    seen = Seen()
    async with running_cluster(**FAST_CONSUMER_GROUPS) as app:
        app.cluster.create_topic(topic, PARTITIONS, 1, {})
        step = 0
        produced = await _produce(app, topic, step)
        members: list[Member] = [Classic(app, group, topic, seen) for _ in range(3)]
        try:
            for m in members:
                await m.start()
            await _settled(app, members, seen, produced)
            assert _coordinator_group(app, group) is None  # a classic group

            # Rolling upgrade: each aiokafka member replaced by a KIP-848 one.
            for i in range(3):
                step += 1
                produced = await _produce(app, topic, step)
                await members[i].stop()
                members[i] = Modern(app, group, topic, seen)
                await members[i].start()
                await _settled(app, members, seen, produced)
                found = _coordinator_group(app, group)
                assert found is not None, "the group is a consumer group now"
                await _check_describe(app, group, classic=2 - i, consumer=i + 1)

            # Rolling downgrade: back to aiokafka, one at a time.
            for i in range(3):
                step += 1
                produced = await _produce(app, topic, step)
                await members[i].stop()
                members[i] = Classic(app, group, topic, seen)
                await members[i].start()
                await _settled(app, members, seen, produced)
                if i < 2:
                    await _check_describe(app, group, classic=i + 1, consumer=2 - i)
            assert _coordinator_group(app, group) is None, "a classic group again"

            # Committed offsets reach the end of every partition.
            end = produced // PARTITIONS
            await wait_until_committed(app, group, topic, end)
        finally:
            for m in members:
                await m.stop()
    # No record lost; each new owner went on from the committed offsets: what is read
    # again is at most a batch whose commit a rebalance refused, never a partition from 0.
    assert len(seen.counts) == produced
    assert all(back <= BATCH for back in seen.rewind.values()), seen.rewind


async def wait_until_committed(app: MiniKafka, group: str, topic: str, end: int) -> None:
    async def reached() -> bool:
        committed = await _committed(app, group, topic)
        return all(committed.get(p, -1) == end for p in range(PARTITIONS))

    await wait_until(reached, f"committed offsets at {end}", **WAIT)
