"""A KIP-848 consumer group survives its coordinator's broker stopping, or restarting.

Three brokers, ``__consumer_offsets`` and the topic replicated three times. Two
confluent-kafka consumers (``group.protocol=consumer``) split a topic and commit; the
broker leading the group's ``__consumer_offsets`` partition stops. A follower becomes
the leader, loads the partition (its copy of the group's records, written acks=all) and
coordinates the group from there: the same members at the same epochs with the same
assignment, their next heartbeats accepted. Nothing reaches the application through the
consumers' error callbacks but the dropped connections of the stopped broker, nobody's
partitions are revoked, the consumers keep consuming new records, and the committed
offsets are where they were.

The new coordinator's load is held (``LoadGate``) long enough to see a heartbeat answered
COORDINATOR_LOAD_IN_PROGRESS meanwhile. A broker with a data directory restarted on its
port loads the group from its own log the same way. Each consumer polls in its own
thread; the tests wait for states (bounded), never for fixed times.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from kio.schema.errors import ErrorCode

from broker.app import MiniKafka
from broker.cluster.cluster_metadata import OFFSETS_TOPIC
from broker.group.consumer import ConsumerGroupState
from testkit.polling import wait_until
from testkit.raw_client import RawClient
from tests.helpers.load_gate import LoadGate
from tests.integration.conftest import running_cluster

pytestmark = pytest.mark.asyncio

PARTITIONS = 4
FAST: dict[str, Any] = {
    "group.consumer.heartbeat.interval.ms": "300",
    "group.consumer.min.heartbeat.interval.ms": "100",
}
CLUSTER: dict[str, Any] = {
    "offsets.topic.replication.factor": "3",
    "default.replication.factor": "3",
    **FAST,
}
WAIT: dict[str, Any] = {"attempts": 800, "step_s": 0.05}  # 40 s at most, on a loaded machine
# What a consumer's error callback may hear when a broker stops: its connections drop.
CONNECTION_ERRORS = frozenset({KafkaError._TRANSPORT})


class Member:
    """A ``group.protocol=consumer`` consumer polling in its own thread."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.errors: list[KafkaError] = []
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "group.protocol": "consumer",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "error_cb": self.errors.append,
                "log_level": 3,
            }
        )
        self.topic = topic
        self.assignment: frozenset[int] = frozenset()
        self.revoked: list[int] = []
        self.records: dict[tuple[int, int], bytes] = {}
        self.commit_requests: list[list[TopicPartition]] = []
        self.committed = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()

    def _on_revoke(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        self.revoked.extend(tp.partition for tp in partitions)

    def run(self) -> None:
        self.consumer.subscribe([self.topic], on_revoke=self._on_revoke)
        try:
            while not self._stop.is_set():
                msg = self.consumer.poll(0.05)
                if msg is not None:
                    error = msg.error()
                    if error is not None:
                        self.errors.append(error)
                    else:
                        partition, offset = msg.partition(), msg.offset()
                        assert partition is not None and offset is not None
                        with self._lock:
                            self.records[(partition, offset)] = msg.value() or b""
                with self._lock:
                    pending, self.commit_requests = self.commit_requests, []
                for offsets in pending:
                    self.consumer.commit(offsets=offsets, asynchronous=False)
                    self.committed += 1
                self.assignment = frozenset(tp.partition for tp in self.consumer.assignment())
        finally:
            self.consumer.close()

    def commit_what_it_read(self) -> dict[int, int]:
        """Ask the poll thread to commit the next offset of each partition it read."""
        with self._lock:
            nexts: dict[int, int] = {}
            for partition, offset in self.records:
                nexts[partition] = max(nexts.get(partition, 0), offset + 1)
            self.commit_requests.append(
                [TopicPartition(self.topic, p, o) for p, o in sorted(nexts.items())]
            )
        return nexts

    def values(self) -> set[bytes]:
        with self._lock:
            return set(self.records.values())

    def stop(self) -> None:
        self._stop.set()


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "log_level": 3})
    for i, value in enumerate(values):
        producer.produce(topic, value, partition=i % PARTITIONS)
    assert producer.flush(30) == 0


def _coordinator(app: MiniKafka, group: str) -> int:
    manager = app.brokers[0].services.coordinators.group_metadata_manager
    state = app.cluster.partition_state(OFFSETS_TOPIC, manager.partition_for(group))
    assert state is not None
    return state.leader


def _members(app: MiniKafka, broker_id: int, group: str) -> dict[str, tuple[int, Any]] | None:
    found = app.brokers[broker_id].services.coordinators.consumer_group.group(group)
    if found is None or found.state is not ConsumerGroupState.STABLE:
        return None
    return {m.member_id: (m.member_epoch, m.assigned_partitions) for m in found.members.values()}


async def test_a_consumer_group_survives_its_coordinators_broker_stopping() -> None:
    group, topic = f"kip848-failover-{uuid.uuid4().hex[:8]}", "kip848-failover"
    gate = LoadGate()
    async with running_cluster(brokers=3, load_scheduler=gate.scheduler, **CLUSTER) as app:
        app.cluster.create_topic(topic, PARTITIONS, 3, {})
        before_values = [f"before-{i}".encode() for i in range(8)]
        await asyncio.to_thread(_produce, app.bootstrap, topic, before_values)
        members = [Member(app.bootstrap, group, topic) for _ in range(2)]
        tasks = [asyncio.create_task(asyncio.to_thread(m.run)) for m in members]
        try:
            # Two consumers split the topic and read what is there.
            def split() -> bool:
                owned = [m.assignment for m in members]
                every = [p for a in owned for p in a]
                return all(owned) and len(every) == len(set(every)) == PARTITIONS

            await wait_until(split, "the two consumers to split the topic", **WAIT)
            await wait_until(
                lambda: set().union(*(m.values() for m in members)) == set(before_values),
                "the records there to be consumed",
                **WAIT,
            )
            commits = [m.commit_what_it_read() for m in members]
            await wait_until(lambda: all(m.committed == 1 for m in members), "the commits", **WAIT)
            old = _coordinator(app, group)
            before = _members(app, old, group)
            assert before is not None and len(before) == 2
            revoked_before = [list(m.revoked) for m in members]
            assignments_before = [m.assignment for m in members]

            # The coordinator's broker stops; a follower of the partition takes over. Its
            # load is held for a moment: meanwhile a heartbeat is answered
            # COORDINATOR_LOAD_IN_PROGRESS (librdkafka retries it).
            gate.close()
            await app.stop_broker(old)
            new = _coordinator(app, group)
            assert new not in (old, -1)
            partition = app.brokers[new].services.coordinators.group_metadata_manager.partition_for(
                group
            )
            await wait_until(
                lambda: gate.holding(f"{OFFSETS_TOPIC}-{partition}"), "the held load", **WAIT
            )
            member_id, (epoch, _) = sorted(before.items())[0]
            raw = await RawClient.connect(app.brokers[new].advertised_host, app.brokers[new].port)
            try:
                answer = await raw.request(
                    68,
                    1,
                    "ConsumerGroupHeartbeatRequest",
                    group_id=group,
                    member_id=member_id,
                    member_epoch=epoch,
                    rebalance_timeout=-1,
                    subscribed_topic_names=None,
                    topic_partitions=None,
                )
            finally:
                await raw.close()
            assert answer.error_code is ErrorCode.coordinator_load_in_progress
            gate.open()
            await wait_until(
                lambda: _members(app, new, group) is not None,
                "the new coordinator to load the group",
                **WAIT,
            )
            after = _members(app, new, group)
            assert after == before  # same members, epochs and assignments

            # The consumers keep consuming: new records reach them.
            alive = ",".join(
                f"{b.advertised_host}:{b.port}" for b in app.brokers if b.broker_id != old
            )
            after_values = [f"after-{i}".encode() for i in range(8)]
            await asyncio.to_thread(_produce, alive, topic, after_values)
            await wait_until(
                lambda: (
                    set().union(*(m.values() for m in members)) >= set(before_values + after_values)
                ),
                "the new records to be consumed",
                **WAIT,
            )
            # Their heartbeats went on reaching the new coordinator, accepted at their
            # epochs: the group is as it was (a refused one would have made them rejoin).
            assert _members(app, new, group) == before
            # Nobody rejoined or lost partitions; no error reached the application.
            assert [list(m.revoked) for m in members] == revoked_before
            assert [m.assignment for m in members] == assignments_before
            for m in members:
                assert all(e.code() in CONNECTION_ERRORS for e in m.errors), m.errors
                assert not any(e.fatal() for e in m.errors)
            # The committed offsets are intact on the new coordinator.
            manager = app.brokers[new].services.coordinators.group_metadata_manager
            committed = {p: o for c in commits for p, o in c.items()}
            fetched = manager.get_offsets(group, [(topic, p) for p in committed])
            assert {tp.partition: r.offset for tp, r in fetched.items()} == committed
        finally:
            for m in members:
                m.stop()
            await asyncio.wait_for(asyncio.gather(*tasks), 60)


async def test_a_consumer_group_survives_its_brokers_restart(tmp_path: Path) -> None:
    group, topic = f"kip848-restart-{uuid.uuid4().hex[:8]}", "kip848-restart"
    async with running_cluster(brokers=1, data_dir=tmp_path / "data", **FAST) as app:
        app.cluster.create_topic(topic, PARTITIONS, 1, {})
        members = [Member(app.bootstrap, group, topic) for _ in range(2)]
        tasks = [asyncio.create_task(asyncio.to_thread(m.run)) for m in members]
        try:

            def split() -> bool:
                owned = [m.assignment for m in members]
                every = [p for a in owned for p in a]
                return all(owned) and len(every) == len(set(every)) == PARTITIONS

            await wait_until(split, "the two consumers to split the topic", **WAIT)
            await wait_until(lambda: _members(app, 0, group) is not None, "a stable group", **WAIT)
            before = _members(app, 0, group)
            revoked_before = [list(m.revoked) for m in members]
            assignments_before = [m.assignment for m in members]

            # The broker stops and starts again on its port, from its data directory.
            await app.stop_broker(0)
            await app.start_broker(0)
            await wait_until(
                lambda: _members(app, 0, group) is not None,
                "the restarted broker to load the group",
                **WAIT,
            )
            assert _members(app, 0, group) == before
            values = [f"after-restart-{i}".encode() for i in range(8)]
            await asyncio.to_thread(_produce, app.bootstrap, topic, values)
            await wait_until(
                lambda: set().union(*(m.values() for m in members)) >= set(values),
                "the new records to be consumed",
                **WAIT,
            )
            assert _members(app, 0, group) == before
            assert [list(m.revoked) for m in members] == revoked_before
            assert [m.assignment for m in members] == assignments_before
            # With its only broker down a while, a client also hears that all are down.
            allowed = CONNECTION_ERRORS | {KafkaError._ALL_BROKERS_DOWN}
            for m in members:
                assert all(e.code() in allowed for e in m.errors), m.errors
                assert not any(e.fatal() for e in m.errors)
        finally:
            for m in members:
                m.stop()
            await asyncio.wait_for(asyncio.gather(*tasks), 60)
