"""The group coordinator's broker stops: the group moves with __consumer_offsets.

The coordinator of a group is the leader of its ``__consumer_offsets`` partition. When
that broker stops, a follower becomes leader, loads the partition it replicated, and
answers FindCoordinator; committed offsets are still there.
"""

from __future__ import annotations

import asyncio

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from broker.cluster_metadata import OFFSETS_TOPIC
from tests.integration.conftest import running_cluster


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

        manager = app.brokers[0].services.group_metadata_manager
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
