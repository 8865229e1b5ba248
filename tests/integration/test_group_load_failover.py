"""Consumer groups read through a coordinator failover whose load takes its time.

The coordinator of a group is the leader of its ``__consumer_offsets`` partition. When
that broker stops, a follower takes the partition over and loads it; until it is loaded
the group's requests meet a coordinator that is loading. Kafka answers them per API:
Heartbeat NONE ("the group is still loading, so respond blindly"), OffsetCommit and
JoinGroup COORDINATOR_LOAD_IN_PROGRESS (the clients retry), SyncGroup a rejoin. A
Heartbeat answered COORDINATOR_LOAD_IN_PROGRESS killed aiokafka's heartbeat task and
wedged the group for good (every ``getmany()`` raised from then on).

Here every coordinator load is held (``LoadGate``) from just before the coordinator's
broker stops until the clients have met the loading coordinator several times, then
released. An aiokafka group and a kafka-python group (two members each, committing after
every batch) read one topic throughout. What a user relies on: no error reaches the
application, no member is thrown out (the group's generation does not move: Kafka keeps a
Stable group Stable across a failover), and every record is delivered.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from kafka import KafkaConsumer
from kio.schema.errors import ErrorCode

from broker.app import MiniKafka
from broker.cluster.cluster_metadata import OFFSETS_TOPIC
from broker.server.context import RequestContext
from testkit.polling import wait_until
from tests.helpers.load_gate import LoadGate
from tests.integration.conftest import running_cluster

TOPIC = "orders"
PARTITIONS = 4
HEARTBEAT, OFFSET_COMMIT = 12, 8
AIO_GROUP, KP_GROUP = "aio-readers", "kp-readers"


class LoadingAnswers:
    """A request observer: what each coordinator answered while its load was held."""

    def __init__(self, gate: LoadGate) -> None:
        self.gate = gate
        self.counts: Counter[tuple[int, ErrorCode]] = Counter()

    def request_received(self, ctx: RequestContext, request: Any, frame: bytes) -> None:
        pass

    def request_completed(self, ctx: RequestContext, response: Any, size: int) -> None:
        key = ctx.header.api_key
        if key not in (HEARTBEAT, OFFSET_COMMIT) or not self.gate.holding(OFFSETS_TOPIC):
            return
        if key == HEARTBEAT:
            self.counts[(key, ErrorCode(response.error_code))] += 1
        else:
            for topic in response.topics:
                for partition in topic.partitions:
                    self.counts[(key, ErrorCode(partition.error_code))] += 1


async def produce(app: MiniKafka, first: int, count: int) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=app.bootstrap, acks="all")
    await producer.start()
    try:
        batch = [producer.send(TOPIC, str(i).encode()) for i in range(first, first + count)]
        await asyncio.gather(*(await asyncio.gather(*batch)))
    finally:
        await producer.stop()


@contextlib.asynccontextmanager
async def aiokafka_members(
    app: MiniKafka, seen: set[int], errors: list[str]
) -> AsyncIterator[list[AIOKafkaConsumer]]:
    """Two aiokafka members reading, committing after each batch, noting every error."""

    async def member(consumer: AIOKafkaConsumer) -> None:
        while True:
            try:
                batches = await consumer.getmany(timeout_ms=100)
                for records in batches.values():
                    seen.update(int(r.value) for r in records)
                if batches:
                    await consumer.commit()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # what the application would see
                errors.append(f"{type(exc).__name__}: {exc}")

    consumers = [
        AIOKafkaConsumer(
            TOPIC,
            bootstrap_servers=app.bootstrap,
            group_id=AIO_GROUP,
            session_timeout_ms=10000,
            heartbeat_interval_ms=200,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        for _ in range(2)
    ]
    for consumer in consumers:
        await consumer.start()
    tasks = [asyncio.create_task(member(c)) for c in consumers]
    try:
        yield consumers
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for consumer in consumers:
            await consumer.stop()


@contextlib.asynccontextmanager
async def kafka_python_members(
    app: MiniKafka, seen: set[int], errors: list[str]
) -> AsyncIterator[list[KafkaConsumer]]:
    """Two kafka-python members, each on its own thread, committing after each batch.
    kafka-python blocks: it is built, run and closed off this loop, where the brokers run.
    """
    stop = threading.Event()

    def new_consumer() -> KafkaConsumer:
        consumer = KafkaConsumer(
            TOPIC,
            bootstrap_servers=app.bootstrap,
            group_id=KP_GROUP,
            session_timeout_ms=10000,
            heartbeat_interval_ms=200,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        # The topic's metadata before the first poll: kafka-python 3.0 drops a rejoin
        # begun because its leader assigned without it (tests/integration/
        # kafka_python_member.py says how), and the member would never come back.
        while TOPIC not in consumer.topics():
            pass
        return consumer

    def member(consumer: KafkaConsumer) -> None:
        while not stop.is_set():
            try:
                batches = consumer.poll(timeout_ms=100)
                for records in batches.values():
                    seen.update(int(r.value) for r in records)
                if batches:
                    consumer.commit()
            except Exception as exc:
                errors.append(f"{type(exc).__name__}: {exc}")

    consumers = [await asyncio.to_thread(new_consumer) for _ in range(2)]
    threads = [threading.Thread(target=member, args=(c,), daemon=True) for c in consumers]
    for thread in threads:
        thread.start()
    try:
        yield consumers
    finally:
        stop.set()
        for thread in threads:
            await asyncio.to_thread(thread.join, 30)
        for consumer in consumers:
            await asyncio.to_thread(consumer.close, autocommit=False)


def generation(app: MiniKafka, group_id: str) -> int:
    """The group's generation at its coordinator (-1 while no coordinator has it)."""
    for broker in app.brokers:
        if broker.broker_id in app.stopped_brokers:
            continue
        group = broker.services.coordinators.group.get_group(group_id)
        if group is not None:
            return int(group.generation_id)
    return -1


def both_members_assigned(consumers: list[Any]) -> bool:
    return all(consumer.assignment() for consumer in consumers)


async def test_groups_read_through_a_failover_while_the_new_coordinator_loads() -> None:
    gate = LoadGate()
    answers = LoadingAnswers(gate)
    async with running_cluster(
        brokers=3,
        load_scheduler=gate.scheduler,
        observers=[answers],
        **{
            "default.replication.factor": "3",
            "num.partitions": str(PARTITIONS),
            # Both groups in one __consumer_offsets partition: one failover moves both.
            "offsets.topic.num.partitions": "1",
            "offsets.topic.replication.factor": "3",
        },
    ) as app:
        await produce(app, 0, 200)
        aio_seen: set[int] = set()
        kp_seen: set[int] = set()
        errors: list[str] = []
        async with (
            aiokafka_members(app, aio_seen, errors) as aio,
            kafka_python_members(app, kp_seen, errors) as kp,
        ):
            await wait_until(
                lambda: (
                    len(aio_seen) == len(kp_seen) == 200
                    and both_members_assigned(aio)
                    and both_members_assigned(kp)
                ),
                "both groups stable, two members each, every record read",
                attempts=1200,
            )
            generations = (generation(app, AIO_GROUP), generation(app, KP_GROUP))

            gate.close()
            coordinator = app.cluster.partition_state(OFFSETS_TOPIC, 0)
            assert coordinator is not None
            await app.stop_broker(coordinator.leader)
            await produce(app, 200, 200)
            # Both groups meet the loading coordinator: heartbeats answered blindly,
            # commits told to retry.
            await wait_until(
                lambda: (
                    answers.counts[(HEARTBEAT, ErrorCode.none)] >= 8
                    and answers.counts[(OFFSET_COMMIT, ErrorCode.coordinator_load_in_progress)] >= 1
                ),
                "heartbeats and commits at the loading coordinator",
                attempts=1200,
            )
            gate.open()

            await wait_until(
                lambda: len(aio_seen) == len(kp_seen) == 400,
                "every record read by both groups after the failover",
                attempts=1200,
            )
            assert errors == []
            assert answers.counts[(HEARTBEAT, ErrorCode.coordinator_load_in_progress)] == 0
            # Nobody was thrown out: the loaded groups went on at their generations.
            assert (generation(app, AIO_GROUP), generation(app, KP_GROUP)) == generations
            assert both_members_assigned(aio) and both_members_assigned(kp)
