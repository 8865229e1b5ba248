"""The group coordinator's broker stops: the group moves with __consumer_offsets.

The coordinator of a group is the leader of its ``__consumer_offsets`` partition. When
that broker stops, a follower becomes leader, loads the partition it replicated (in
slices, answering COORDINATOR_LOAD_IN_PROGRESS meanwhile), and answers FindCoordinator;
committed offsets are still there.
"""

from __future__ import annotations

import asyncio

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import OFFSETS_TOPIC
from protocol.builders import request_builder
from testkit.polling import wait_until
from testkit.raw_client import RawClient
from tests.integration.conftest import running_cluster

OFFSET_COMMIT = 8
OFFSET_FETCH = 9


async def test_committed_offsets_survive_the_coordinators_broker_stopping() -> None:
    async with running_cluster(brokers=3, **{"default.replication.factor": "3"}) as app:
        tp = TopicPartition("events", 0)
        producer = AIOKafkaProducer(bootstrap_servers=app.bootstrap, acks="all")
        await producer.start()
        for i in range(10):
            await producer.send_and_wait("events", f"e{i}".encode(), partition=0)
        await producer.stop()

        consumer = AIOKafkaConsumer(
            bootstrap_servers=app.bootstrap, group_id="survivors", enable_auto_commit=False
        )
        await consumer.start()
        consumer.assign([tp])
        await consumer.commit({tp: 7})
        await consumer.stop()

        manager = app.brokers[0].services.coordinators.group_metadata_manager
        offsets_tp = (OFFSETS_TOPIC, manager.partition_for("survivors"))
        coordinator = app.cluster.partition_state(*offsets_tp)
        assert coordinator is not None
        old_leader = coordinator.leader
        # No waiting here: the commit was acknowledged only once every in-sync replica
        # of the offsets partition had it (acks=all), so the new leader has it too.
        await app.stop_broker(old_leader)
        new_state = app.cluster.partition_state(*offsets_tp)
        assert new_state is not None and new_state.leader not in (old_leader, -1)

        alive = ",".join(
            f"{b.advertised_host}:{b.port}" for b in app.brokers if b.broker_id != old_leader
        )
        again = AIOKafkaConsumer(
            bootstrap_servers=alive, group_id="survivors", enable_auto_commit=False
        )
        await again.start()
        try:
            again.assign([tp])
            assert await again.committed(tp) == 7
            record = await asyncio.wait_for(again.getone(), 10)
            assert (record.offset, record.value) == (7, b"e7")
        finally:
            await again.stop()


def commit_request(group: str, partitions: int, offset: int) -> dict[str, object]:
    """A simple (generation -1) OffsetCommit v8 of ``partitions`` partitions of "events"."""
    b = request_builder(OFFSET_COMMIT, 8)
    return {
        "group_id": group,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "group_instance_id": None,
        "topics": (
            b.OffsetCommitRequestTopic(
                name="events",
                partitions=tuple(
                    b.OffsetCommitRequestPartition(
                        partition_index=p,
                        committed_offset=offset + p,
                        committed_leader_epoch=-1,
                        committed_metadata=f"m{offset}",
                    )
                    for p in range(partitions)
                ),
            ),
        ),
    }


async def fetch_offsets(raw: RawClient, group: str, partitions: int) -> tuple[ErrorCode, list[int]]:
    b = request_builder(OFFSET_FETCH, 8)
    response = await raw.request(
        OFFSET_FETCH,
        8,
        "OffsetFetchRequest",
        groups=(
            b.OffsetFetchRequestGroup(
                group_id=group,
                topics=(
                    b.OffsetFetchRequestTopics(
                        name="events", partition_indexes=tuple(range(partitions))
                    ),
                ),
            ),
        ),
        require_stable=True,
    )
    answer = response.groups[0]
    return answer.error_code, [int(p.committed_offset) for p in answer.topics[0].partitions]


async def test_the_new_coordinator_serves_thousands_of_commits_after_a_failover() -> None:
    """4,000 commits (200 requests of 20 partitions over 4 groups of one offsets
    partition, pipelined), small segments and a busy cleaner compacting while they
    come in; the leader stops, and the new one serves every group's last commit."""
    groups_count, partitions, requests = 4, 20, 200
    overrides = {
        "offsets.topic.num.partitions": "5",
        "offsets.topic.segment.bytes": "16384",
        "log.cleaner.backoff.ms": "50",
    }
    async with running_cluster(brokers=3, **overrides) as app:
        manager = app.brokers[0].services.coordinators.group_metadata_manager
        manager.ensure_offsets_topic()
        target = manager.partition_for("failover-0")
        groups = [
            g for g in (f"failover-{i}" for i in range(200)) if manager.partition_for(g) == target
        ][:groups_count]
        tp = (OFFSETS_TOPIC, target)

        def loaded_with_full_isr() -> bool:
            state = app.cluster.partition_state(*tp)
            assert state is not None
            coordinator = app.brokers[state.leader].services.coordinators.group_metadata_manager
            return len(state.isr) == 3 and coordinator.check_coordinator(groups[0]) is (
                ErrorCode.none
            )

        await wait_until(loaded_with_full_isr, "the coordinator's load and a full ISR")
        state = app.cluster.partition_state(*tp)
        assert state is not None
        old_leader = app.brokers[state.leader]
        last: dict[str, int] = {}

        async def committer(connection: int) -> None:
            raw = await RawClient.connect(old_leader.advertised_host, old_leader.port)
            try:
                mine = [i for i in range(requests) if i % 4 == connection]
                for start in range(0, len(mine), 10):  # 10 in flight
                    window = mine[start : start + 10]
                    for i in window:
                        group = groups[i % len(groups)]
                        raw.send(
                            OFFSET_COMMIT,
                            8,
                            "OffsetCommitRequest",
                            **commit_request(group, partitions, i),
                        )
                        last[group] = max(last.get(group, -1), i)
                    await raw.drain()
                    for _ in window:
                        response = await raw.response()
                        errors = {p.error_code for p in response.body.topics[0].partitions}
                        assert errors == {ErrorCode.none}
            finally:
                await raw.close()

        await asyncio.gather(*(committer(c) for c in range(4)))
        assert len(last) == groups_count

        await app.stop_broker(old_leader.broker_id)
        state = app.cluster.partition_state(*tp)
        assert state is not None and state.leader not in (old_leader.broker_id, -1)
        new_leader = app.brokers[state.leader]
        raw = await RawClient.connect(new_leader.advertised_host, new_leader.port)
        try:
            answers: list[tuple[ErrorCode, list[int]]] = []
            for group in groups:

                async def loaded(group: str = group) -> bool:
                    answers.append(await fetch_offsets(raw, group, partitions))
                    return answers[-1][0] is not ErrorCode.coordinator_load_in_progress

                await wait_until(loaded, f"{group}'s offsets loaded", attempts=400, step_s=0.01)
                error, offsets = answers[-1]
                assert error is ErrorCode.none
                assert offsets == [last[group] + p for p in range(partitions)]
        finally:
            await raw.close()
