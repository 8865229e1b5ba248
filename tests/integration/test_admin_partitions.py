"""Partition admin: reassignments and leader elections, through the admin clients.

What issue 11 asks of the admin surface Kafka 3.7+ serves: AlterPartitionReassignments
moves a partition's data to other brokers (followers catch up, then the ISR and the
leadership move) with Kafka's errors; ListPartitionReassignments shows the ones in
progress; ElectLeaders runs preferred and unclean elections with Kafka's per-partition
answers. Exact codes through the raw client; kafka-python's and confluent-kafka's admin
clients on top. (DescribeTopicPartitions, DescribeLogDirs and the ACL APIs:
``test_admin_describe.py``.)
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from kio.schema.errors import ErrorCode

from protocol.builders import request_builder
from testkit.polling import wait_until
from testkit.raw_client import RawClient
from tests.integration.conftest import running_cluster

pytestmark = pytest.mark.asyncio

ELECT_LEADERS, ALTER_REASSIGNMENTS, LIST_REASSIGNMENTS = 43, 45, 46
PREFERRED, UNCLEAN = 0, 1


async def _reassign(
    raw: RawClient,
    topic: str,
    *partitions: tuple[int, list[int] | None],
    version: int = 0,
    **kw: Any,
) -> dict[int, tuple[ErrorCode, str | None]]:
    b = request_builder(ALTER_REASSIGNMENTS, version)
    response = await raw.request(
        ALTER_REASSIGNMENTS,
        version,
        "AlterPartitionReassignmentsRequest",
        timeout=30000,
        topics=(
            b.ReassignableTopic(
                name=topic,
                partitions=tuple(
                    b.ReassignablePartition(
                        partition_index=p, replicas=None if r is None else tuple(r)
                    )
                    for p, r in partitions
                ),
            ),
        ),
        **kw,
    )
    assert response.error_code is ErrorCode.none
    (answer,) = response.responses
    return {p.partition_index: (p.error_code, p.error_message) for p in answer.partitions}


async def _ongoing(raw: RawClient, topics: Any = None) -> dict[tuple[str, int], tuple[Any, ...]]:
    response = await raw.request(
        LIST_REASSIGNMENTS, 0, "ListPartitionReassignmentsRequest", timeout=30000, topics=topics
    )
    assert response.error_code is ErrorCode.none
    return {
        (t.name, p.partition_index): (p.replicas, p.adding_replicas, p.removing_replicas)
        for t in response.topics
        for p in t.partitions
    }


async def _elect(
    raw: RawClient, election_type: int, wanted: dict[str, list[int]] | None
) -> dict[tuple[str, int], ErrorCode]:
    b = request_builder(ELECT_LEADERS, 2)
    topic_partitions = (
        None
        if wanted is None
        else tuple(b.TopicPartitions(topic=t, partitions=tuple(p)) for t, p in wanted.items())
    )
    response = await raw.request(
        ELECT_LEADERS,
        2,
        "ElectLeadersRequest",
        election_type=election_type,
        topic_partitions=topic_partitions,
        timeout=30000,
    )
    assert response.error_code is ErrorCode.none
    return {
        (r.topic, p.partition_id): p.error_code
        for r in response.replica_election_results
        for p in r.partition_result
    }


# -- AlterPartitionReassignments / ListPartitionReassignments ---------------------------------


async def test_a_reassignment_moves_the_data_and_the_leadership() -> None:
    async with running_cluster(3) as app:
        app.cluster.create_topic("moved", 1, 1, {}, assignment=[[0]])
        producer = AIOKafkaProducer(bootstrap_servers=app.bootstrap, acks="all")
        await producer.start()
        try:
            for i in range(20):
                await producer.send_and_wait("moved", f"r{i}".encode(), partition=0)
        finally:
            await producer.stop()
        raw = await RawClient.connect(app.bootstrap)
        try:
            assert await _reassign(raw, "moved", (0, [1, 2])) == {0: (ErrorCode.none, None)}
            state = app.cluster.topics["moved"].partitions[0]
            await wait_until(
                lambda: state.replicas == [1, 2],
                "state.replicas == [1, 2]",
                attempts=500,
                step_s=0.02,
            )
            assert await _ongoing(raw) == {}
        finally:
            await raw.close()
        # The removed leader handed over to the first target replica in the ISR.
        assert (state.leader, state.isr, state.adding_replicas) == (1, [1, 2], [])
        assert ("moved", 0) not in app.brokers[0].replica_manager.partitions
        consumer = AIOKafkaConsumer(bootstrap_servers=app.bootstrap, auto_offset_reset="earliest")
        await consumer.start()
        try:
            tp = TopicPartition("moved", 0)
            consumer.assign([tp])
            got: list[bytes] = []
            while len(got) < 20:
                batch = await consumer.getmany(tp, timeout_ms=2000)
                assert batch, "no records from the new replicas within 2 s"
                got.extend(r.value for r in batch[tp])
        finally:
            await consumer.stop()
        assert got == [f"r{i}".encode() for i in range(20)]


async def test_a_reassignment_in_progress_is_listed_and_can_be_cancelled() -> None:
    async with running_cluster(3) as app:
        app.cluster.create_topic("slow", 2, 1, {}, assignment=[[0], [0]])
        app.pause_replication(2)  # broker 2 never catches up: the reassignment waits
        raw = await RawClient.connect(app.bootstrap)
        try:
            assert await _reassign(raw, "slow", (0, [2, 0]), (1, [0])) == {
                0: (ErrorCode.none, None),
                1: (ErrorCode.none, None),  # the current replicas: nothing to do
            }
            ongoing = {("slow", 0): ((2, 0), (2,), ())}
            assert await _ongoing(raw) == ongoing
            b = request_builder(LIST_REASSIGNMENTS, 0)
            only = (b.ListPartitionReassignmentsTopics(name="slow", partition_indexes=(0, 1, 9)),)
            assert await _ongoing(raw, only) == ongoing
            unknown = (b.ListPartitionReassignmentsTopics(name="nope", partition_indexes=(0,)),)
            assert await _ongoing(raw, unknown) == {}

            assert await _reassign(raw, "slow", (0, None)) == {0: (ErrorCode.none, None)}
            state = app.cluster.topics["slow"].partitions[0]
            assert (state.replicas, state.isr, state.leader) == ([0], [0], 0)
            assert await _ongoing(raw) == {}
            error, message = (await _reassign(raw, "slow", (0, None)))[0]
            assert error is ErrorCode.no_reassignment_in_progress
            assert message is not None
        finally:
            await raw.close()
            app.resume_replication(2)


async def test_reassignment_errors_are_kafkas() -> None:
    async with running_cluster(2) as app:
        app.cluster.create_topic("t", 1, 2, {})
        epoch = app.cluster.topics["t"].partitions[0].partition_epoch
        raw = await RawClient.connect(app.bootstrap)
        try:
            assert (await _reassign(raw, "t", (5, [0])))[5][0] is (
                ErrorCode.unknown_topic_or_partition
            )
            for target in ([0, 7], [1, 1], []):
                error, message = (await _reassign(raw, "t", (0, target)))[0]
                assert error is ErrorCode.invalid_replica_assignment, (target, message)
            error, message = (await _reassign(raw, "missing", (0, [0])))[0]
            assert (error, message) == (
                ErrorCode.unknown_topic_or_partition,
                "Unable to find a topic named missing.",
            )
            # the current replicas: NONE, and nothing changes
            current = list(app.cluster.topics["t"].partitions[0].replicas)
            assert await _reassign(raw, "t", (0, current)) == {0: (ErrorCode.none, None)}
            assert app.cluster.topics["t"].partitions[0].partition_epoch == epoch
            # v1: a change of replication factor may be refused
            refused = await _reassign(
                raw, "t", (0, [0]), version=1, allow_replication_factor_change=False
            )
            assert refused[0][0] is ErrorCode.invalid_replication_factor
        finally:
            await raw.close()


def _kafka_python_reassignments(bootstrap: str) -> tuple[Any, Any]:
    from kafka import TopicPartition as KafkaTopicPartition
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        results = admin.alter_partition_reassignments(
            {
                KafkaTopicPartition("kp", 0): [1, 0],
                KafkaTopicPartition("kp", 1): [9],
            }
        )
        return results, admin.list_partition_reassignments()
    finally:
        admin.close()


async def test_kafka_python_alters_and_lists_reassignments() -> None:
    from kafka import TopicPartition as KafkaTopicPartition
    from kafka.errors import InvalidReplicationAssignmentError

    async with running_cluster(2) as app:
        app.cluster.create_topic("kp", 2, 1, {}, assignment=[[0], [0]])
        app.pause_replication(1)
        try:
            results, ongoing = await asyncio.to_thread(_kafka_python_reassignments, app.bootstrap)
        finally:
            app.resume_replication(1)
        assert results == {
            KafkaTopicPartition("kp", 0): None,
            KafkaTopicPartition("kp", 1): InvalidReplicationAssignmentError,
        }
        assert ongoing == {
            KafkaTopicPartition("kp", 0): {
                "replicas": [1, 0],
                "adding_replicas": [1],
                "removing_replicas": [],
            }
        }
        state = app.cluster.topics["kp"].partitions[0]
        await wait_until(
            lambda: not state.adding_replicas,
            "not state.adding_replicas",
            attempts=500,
            step_s=0.02,
        )
        assert (state.replicas, sorted(state.isr), state.leader) == ([1, 0], [0, 1], 0)


# -- ElectLeaders ------------------------------------------------------------------------------


async def test_preferred_elections() -> None:
    async with running_cluster(3) as app:
        app.cluster.create_topic("p", 2, 3, {}, assignment=[[0, 1, 2], [1, 2, 0]])
        state = app.cluster.topics["p"].partitions[0]
        await wait_until(
            lambda: sorted(state.isr) == [0, 1, 2],
            "sorted(state.isr) == [0, 1, 2]",
            attempts=500,
            step_s=0.02,
        )
        await app.stop_broker(0)
        assert state.leader == 1
        raw = await RawClient.connect(app.brokers[1].advertised_host, app.brokers[1].port)
        try:
            answers = await _elect(raw, PREFERRED, {"p": [0, 1], "nope": [0]})
            assert answers == {
                ("p", 0): ErrorCode.preferred_leader_not_available,  # broker 0 is down
                ("p", 1): ErrorCode.election_not_needed,
                ("nope", 0): ErrorCode.unknown_topic_or_partition,
            }
            await app.start_broker(0)
            await wait_until(lambda: 0 in state.isr, "0 in state.isr", attempts=500, step_s=0.02)
            epoch = state.leader_epoch
            assert await _elect(raw, PREFERRED, {"p": [0]}) == {("p", 0): ErrorCode.none}
            assert (state.leader, state.leader_epoch) == (0, epoch + 1)
            # null topics: every partition; the ones needing no election are left out
            assert await _elect(raw, PREFERRED, None) == {}
            assert await _elect(raw, PREFERRED, {"p": [7]}) == {
                ("p", 7): ErrorCode.unknown_topic_or_partition
            }
        finally:
            await raw.close()


async def test_unclean_elections() -> None:
    async with running_cluster(3, None, **{"replica.lag.time.max.ms": "300"}) as app:
        app.cluster.create_topic("u", 1, 2, {}, assignment=[[1, 2]])
        app.cluster.create_topic("lonely", 1, 1, {}, assignment=[[2]])
        state = app.cluster.topics["u"].partitions[0]
        await wait_until(
            lambda: sorted(state.isr) == [1, 2],
            "sorted(state.isr) == [1, 2]",
            attempts=500,
            step_s=0.02,
        )
        raw = await RawClient.connect(app.bootstrap)
        try:
            assert await _elect(raw, UNCLEAN, {"u": [0]}) == {
                ("u", 0): ErrorCode.election_not_needed  # it has a leader
            }
            app.pause_replication(2)  # broker 2 falls out of the ISR
            await wait_until(
                lambda: state.isr == [1], "state.isr == [1]", attempts=500, step_s=0.02
            )
            await app.stop_broker(1)  # the last ISR member: the partition goes offline
            await app.stop_broker(2)
            await app.start_broker(2)
            assert state.leader == -1
            assert await _elect(raw, UNCLEAN, {"u": [0], "lonely": [0]}) == {
                ("u", 0): ErrorCode.none,
                # its only replica was the last ISR member: it leads again on its return
                ("lonely", 0): ErrorCode.election_not_needed,
            }
            assert (state.leader, state.isr) == (2, [2])
        finally:
            await raw.close()
            app.resume_replication(2)


async def test_an_unclean_election_without_a_live_replica() -> None:
    async with running_cluster(2) as app:
        app.cluster.create_topic("gone", 1, 1, {}, assignment=[[1]])
        await app.stop_broker(1)
        raw = await RawClient.connect(app.bootstrap)
        try:
            assert await _elect(raw, UNCLEAN, {"gone": [0]}) == {
                ("gone", 0): ErrorCode.eligible_leaders_not_available
            }
        finally:
            await raw.close()


def _client_elections(bootstrap: str) -> tuple[Any, Any]:
    from confluent_kafka import ElectionType
    from confluent_kafka import TopicPartition as ConfluentTopicPartition
    from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        response = admin.elect_leaders(PREFERRED, {"e": [0, 1]})
        kafka_python = {
            (r.topic, p.partition_id): p.error_code
            for r in response.replica_election_results
            for p in r.partition_result
        }
    finally:
        admin.close()
    confluent = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    # (confluent-kafka 2.16's elect_leaders fails on a request_timeout argument)
    future = confluent.elect_leaders(ElectionType.PREFERRED, [ConfluentTopicPartition("e", 0)])
    results = future.result()
    return kafka_python, {(tp.topic, tp.partition): err for tp, err in results.items()}


async def test_kafka_python_and_confluent_elect_leaders() -> None:
    async with running_cluster(2) as app:
        app.cluster.create_topic("e", 2, 2, {}, assignment=[[0, 1], [1, 0]])
        kafka_python, confluent = await asyncio.to_thread(_client_elections, app.bootstrap)
    assert kafka_python == {("e", 0): 84, ("e", 1): 84}  # ELECTION_NOT_NEEDED
    ((key, error),) = confluent.items()
    assert key == ("e", 0)
    assert error is not None and error.code() == 84
