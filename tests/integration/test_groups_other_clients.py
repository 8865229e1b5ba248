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
from testkit.polling import wait_until
from tests.integration.conftest import running_cluster


async def create_topic(app: MiniKafka, name: str, partitions: int) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=app.bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
    finally:
        await admin.close()


def run_group_members(
    make_member, count: int, stop: threading.Event
) -> tuple[list[set[int]], list[threading.Thread]]:  # type: ignore[no-untyped-def]
    """Run ``count`` blocking consumers in threads until ``stop``; their assignments, and
    the threads (gone once each has closed its consumer)."""
    assignments: list[set[int]] = [set() for _ in range(count)]
    threads = [
        threading.Thread(target=make_member, args=(i, assignments, stop), daemon=True)
        for i in range(count)
    ]
    for t in threads:
        t.start()
    return assignments, threads


async def wait_split(assignments: list[set[int]], total: int) -> None:
    await wait_until(
        lambda: (
            all(assignments)
            and sum(len(a) for a in assignments) == total
            and len(set().union(*assignments)) == total
        ),
        f"{total} partitions split between the members",
        attempts=1200,  # 60 s: members in their own processes start slowly on a busy machine
    )


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

        assignments, threads = run_group_members(member, 2, stop)
        try:
            await wait_split(assignments, 4)
            assert sorted(len(a) for a in assignments) == [2, 2]
        finally:
            stop.set()  # each member closes its consumer (LeaveGroup) before the cluster stops
            await wait_until(
                lambda: not any(t.is_alive() for t in threads), "the members' threads to end"
            )


async def test_two_kafka_python_consumers_split_partitions() -> None:
    """Two kafka-python members, each in its own process, split a 4-partition topic 2/2.

    Each member waits until its metadata holds the topic before its first ``poll``
    (``kafka_python_member.py``), to keep clear of a kafka-python 3.0.x fault that made
    this test flake on loaded machines (a member left the group for good):

    1. ``KafkaConsumer.__init__`` subscribes and only asks for the topic's metadata; the
       first ``poll`` may join before it arrives. The leader's
       ``ConsumerCoordinator._perform_assignment`` then assigns nothing ("No partition
       metadata for topic") and records ``_assignment_snapshot = _metadata_snapshot``
       (``{}``).
    2. The metadata arrives; ``_handle_metadata_update`` changes ``_metadata_snapshot``,
       so ``need_rejoin()`` is true through ``_assignment_snapshot !=
       _metadata_snapshot`` while the base ``rejoin_needed`` stays False.
    3. ``poll(timeout_ms=100)`` -> ``ConsumerCoordinator.poll`` -> ``ensure_active_group``
       -> ``BaseCoordinator.join_group_async`` disables heartbeats and starts
       ``_do_join_and_sync_async`` as ``_join_task`` (state REBALANCING). When the poll's
       timer runs out first, ``wait_for`` raises ``KafkaTimeoutError`` and it returns
       False, leaving the task in flight to be awaited by the next poll.
    4. The task goes on: JoinGroup, the leader's ``_perform_assignment`` — which sets
       ``_assignment_snapshot`` to the now equal metadata snapshot — SyncGroup.
    5. The next ``poll`` finds ``need_rejoin()`` False and never calls
       ``ensure_active_group``: the completed task's assignment is never applied
       (``join_group_async``'s success block — ``rejoin_needed = False``, STABLE,
       ``_enable_heartbeat``, ``_on_join_complete_async`` — never runs). The member stays
       REBALANCING with heartbeats disabled (``_heartbeat_loop`` waits on its wakeup for
       good), sends nothing more to the coordinator, and its assignment stays empty; the
       broker evicts it after its session and gives the other member everything.

    The broker's part was Kafka's throughout (MEMBER_ID_REQUIRED, then a rebalance when
    the leader of a Stable group rejoins, in-order answers on each connection). With the
    topic's metadata known before the first join, the snapshots agree from the start, so
    ``need_rejoin()`` is only ever true through ``rejoin_needed``, which stays True until
    the join's result is applied: a join that outlives a poll is awaited by the next one.
    The assertions are unchanged — if the broker stopped splitting the partitions between
    two kafka-python members, the 2/2 split would not come.
    """
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
