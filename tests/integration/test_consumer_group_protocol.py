"""Kafka 4's consumer group protocol (KIP-848) with confluent-kafka's ``group.protocol=consumer``.

librdkafka 2.16 speaks ConsumerGroupHeartbeat v1 and reconciles as Kafka's Java consumer
does: it revokes what the heartbeat response no longer lists, acknowledges with its owned
partitions on the next heartbeat, and takes new partitions when they are sent. Each
consumer runs in its own thread (``Member``), polling all the time as an application
does, and records what it is assigned and every partition it had revoked; the test waits
for states (bounded), never for fixed times.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupType,
    KafkaError,
    Producer,
    TopicPartition,
)
from confluent_kafka import (
    ConsumerGroupState as ClientGroupState,
)
from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]
from kio.schema.errors import ErrorCode

from broker.app import MiniKafka
from broker.group.consumer import ConsumerGroupState
from testkit.polling import wait_until
from testkit.raw_client import RawClient
from tests.integration.conftest import running_cluster

pytestmark = pytest.mark.asyncio

_QUIET = {"log_level": 3}
# Fast heartbeats; the default 45 s session, so that any move seen here comes from a
# heartbeat (join, leave, revocation), never from a session expiry.
FAST_CONSUMER_GROUPS = {
    "group.consumer.heartbeat.interval.ms": "300",
    "group.consumer.min.heartbeat.interval.ms": "100",
}
WAIT = {"attempts": 600, "step_s": 0.05}  # 30 s at most, on a loaded machine


class Member:
    """A ``group.protocol=consumer`` consumer polling in its own thread."""

    def __init__(self, bootstrap: str, group: str, topic: str, **conf: Any) -> None:
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "group.protocol": "consumer",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                **_QUIET,
                **conf,
            }
        )
        self.topic = topic
        self.assignment: frozenset[int] = frozenset()
        self.revoked: list[int] = []
        self.records: list[tuple[int, int]] = []
        self.errors: list[KafkaError] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.closed = False
        self.commit_requests: list[list[TopicPartition]] = []

    def _on_revoke(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        with self._lock:
            self.revoked.extend(tp.partition for tp in partitions)

    def run(self) -> None:
        self.consumer.subscribe([self.topic], on_revoke=self._on_revoke)
        try:
            while not self._stop.is_set():
                msg = self.consumer.poll(0.05)
                if msg is not None:
                    if msg.error() is not None:
                        self.errors.append(msg.error())
                    else:
                        with self._lock:
                            self.records.append((msg.partition(), msg.offset()))
                with self._lock:
                    pending, self.commit_requests = self.commit_requests, []
                for offsets in pending:
                    self.consumer.commit(offsets=offsets, asynchronous=False)
                self.assignment = frozenset(tp.partition for tp in self.consumer.assignment())
        finally:
            self.consumer.close()
            self.closed = True

    def stop(self) -> None:
        self._stop.set()


async def _start(members: list[Member]) -> list[asyncio.Task[None]]:
    return [asyncio.create_task(asyncio.to_thread(m.run)) for m in members]


async def _stop(members: list[Member], tasks: list[asyncio.Task[None]]) -> None:
    for m in members:
        m.stop()
    await asyncio.wait_for(asyncio.gather(*tasks), 30)


def _group_state(app: MiniKafka, group: str) -> ConsumerGroupState | None:
    for broker in app.brokers:
        found = broker.services.coordinators.consumer_group.group(group)
        if found is not None:
            return found.state
    return None


def _split(members: list[Member], partitions: int, counts: list[int] | None = None) -> bool:
    """Every partition owned by exactly one member, every member owning one or more (and
    as many as ``counts`` says, in some order). A client's view lags the broker's by a
    response, so tests wait for the whole final state rather than check it at the first
    moment the broker is Stable."""
    owned = [m.assignment for m in members]
    every = [p for a in owned for p in a]
    if counts is not None and sorted(len(a) for a in owned) != sorted(counts):
        return False
    return all(owned) and len(every) == len(set(every)) == partitions


async def test_consumers_split_a_topic_and_hand_partitions_on_as_members_come_and_go() -> None:
    group, topic = f"kip848-{uuid.uuid4().hex[:8]}", "kip848-split"
    async with running_cluster(**FAST_CONSUMER_GROUPS) as app:
        app.cluster.create_topic(topic, 6, 1, {})
        first = [Member(app.bootstrap, group, topic) for _ in range(3)]
        tasks = await _start(first)
        everyone = list(first)
        try:
            await wait_until(
                lambda: (
                    _split(first, 6, [2, 2, 2])
                    and _group_state(app, group) is ConsumerGroupState.STABLE
                ),
                "three consumers to split six partitions",
                **WAIT,
            )
            assert sorted(len(m.assignment) for m in first) == [2, 2, 2]
            before = {id(m): m.assignment for m in first}
            revoked_before = {id(m): len(m.revoked) for m in first}

            fourth = Member(app.bootstrap, group, topic)
            everyone.append(fourth)
            tasks += await _start([fourth])
            await wait_until(
                lambda: (
                    _split(everyone, 6) and _group_state(app, group) is ConsumerGroupState.STABLE
                ),
                "a fourth consumer to get partitions",
                **WAIT,
            )
            assert sorted(len(m.assignment) for m in everyone) == [1, 1, 2, 2]
            for m in first:
                # The others kept what they keep: only partitions that moved were revoked.
                assert m.assignment <= before[id(m)]
                newly_revoked = set(m.revoked[revoked_before[id(m)] :])
                assert newly_revoked == set(before[id(m)] - m.assignment)

            # One closes: its partitions move to the others at once (its leave heartbeat),
            # long before the 45 s session timeout could have expired it.
            leaving = first[0]
            leaving.stop()
            await asyncio.wait_for(tasks[0], 30)
            rest = [m for m in everyone if m is not leaving]
            await wait_until(
                lambda: (
                    _split(rest, 6, [2, 2, 2])
                    and _group_state(app, group) is ConsumerGroupState.STABLE
                ),
                "the closed consumer's partitions to move",
                **WAIT,
            )
            assert sorted(len(m.assignment) for m in rest) == [2, 2, 2]
            assert all(not m.errors for m in everyone), [m.errors for m in everyone]
        finally:
            await _stop(everyone, tasks)


def _produce(bootstrap: str, topic: str, partitions: int, per_partition: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", **_QUIET})
    for p in range(partitions):
        for i in range(per_partition):
            producer.produce(topic, value=f"{p}-{i}".encode(), partition=p)
    assert producer.flush(15) == 0


def _committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """What a fresh consumer of the group fetches back (OffsetFetch v9)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            **_QUIET,
        }
    )
    try:
        got = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=15)
        return {tp.partition: tp.offset for tp in got}
    finally:
        consumer.close()


async def test_committed_offsets_are_fetched_back() -> None:
    group, topic = f"kip848-{uuid.uuid4().hex[:8]}", "kip848-commits"
    async with running_cluster(**FAST_CONSUMER_GROUPS) as app:
        app.cluster.create_topic(topic, 2, 1, {})
        await asyncio.to_thread(_produce, app.bootstrap, topic, 2, 5)
        member = Member(app.bootstrap, group, topic)
        tasks = await _start([member])
        try:
            await wait_until(lambda: len(member.records) >= 10, "ten records consumed", **WAIT)
            with member._lock:
                member.commit_requests.append(
                    [TopicPartition(topic, 0, 5), TopicPartition(topic, 1, 3)]
                )
            await wait_until(
                lambda: not member.commit_requests and _offsets(app, group, topic) == {0: 5, 1: 3},
                "the commit to be stored",
                **WAIT,
            )
            # A group with members cannot be deleted.
            deleted = await asyncio.to_thread(_delete_group, app.bootstrap, group)
            assert deleted == KafkaError.NON_EMPTY_GROUP
        finally:
            await _stop([member], tasks)
        # After the member left, a new one of the group reads the offsets back.
        assert await asyncio.to_thread(_committed, app.bootstrap, group, topic, 2) == {0: 5, 1: 3}
        # Listed once, as a consumer group (the classic group keeping its offsets is not).
        listed = await asyncio.to_thread(_list_groups, app.bootstrap, None)
        assert [(g.type, g.state) for g in listed if g.group_id == group] == [
            (ConsumerGroupType.CONSUMER, ClientGroupState.EMPTY)
        ]
        classic = await asyncio.to_thread(_list_groups, app.bootstrap, ConsumerGroupType.CLASSIC)
        assert group not in {g.group_id for g in classic}
        # Empty now: deleted, offsets and all.
        assert await asyncio.to_thread(_delete_group, app.bootstrap, group) is None
        assert _offsets(app, group, topic) == {}
        listed = await asyncio.to_thread(_list_groups, app.bootstrap, None)
        assert group not in {g.group_id for g in listed}


def _delete_group(bootstrap: str, group: str) -> int | None:
    """DeleteGroups through the AdminClient: None, or the error's code."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **_QUIET})
    future = admin.delete_consumer_groups([group], request_timeout=15)[group]
    try:
        future.result(timeout=30)
    except Exception as exc:  # KafkaException carrying the KafkaError
        code: int = exc.args[0].code()
        return code
    return None


def _list_groups(bootstrap: str, group_type: ConsumerGroupType | None) -> list[Any]:
    admin = AdminClient({"bootstrap.servers": bootstrap, **_QUIET})
    types = {group_type} if group_type is not None else None
    kwargs: dict[str, Any] = {"request_timeout": 15}
    if types is not None:
        kwargs["types"] = types
    result = admin.list_consumer_groups(**kwargs).result(timeout=30)
    return list(result.valid)


def _offsets(app: MiniKafka, group: str, topic: str) -> dict[int, int]:
    for broker in app.brokers:
        manager = broker.services.coordinators.group_metadata_manager
        found = manager.get_offsets(group, [(topic, 0), (topic, 1)])
        offsets = {tp.partition: value.offset for tp, value in found.items() if value.offset >= 0}
        if offsets:
            return offsets
    return {}


def _describe(bootstrap: str, group: str) -> Any:
    admin = AdminClient({"bootstrap.servers": bootstrap, **_QUIET})
    return admin.describe_consumer_groups([group], request_timeout=15)[group].result(timeout=30)


async def test_admin_client_describes_a_consumer_group() -> None:
    group, topic = f"kip848-{uuid.uuid4().hex[:8]}", "kip848-describe"
    async with running_cluster(**FAST_CONSUMER_GROUPS) as app:
        app.cluster.create_topic(topic, 4, 1, {})
        members = [Member(app.bootstrap, group, topic) for _ in range(2)]
        tasks = await _start(members)
        try:
            await wait_until(
                lambda: (
                    _split(members, 4) and _group_state(app, group) is ConsumerGroupState.STABLE
                ),
                "two consumers to split four partitions",
                **WAIT,
            )
            described = await asyncio.to_thread(_describe, app.bootstrap, group)
            assert described.type is ConsumerGroupType.CONSUMER
            assert described.state is ClientGroupState.STABLE
            assert len(described.members) == 2
            got = sorted(
                tp.partition for m in described.members for tp in m.assignment.topic_partitions
            )
            assert got == [0, 1, 2, 3]
        finally:
            await _stop(members, tasks)


async def test_api_versions_features_and_describe_errors() -> None:
    async with running_cluster() as app:
        raw = await RawClient.connect(app.bootstrap)
        versions = await raw.request(
            18, 4, "ApiVersionsRequest", client_software_name="raw", client_software_version="1"
        )
        keys = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
        assert keys[68] == (0, 1) and keys[69] == (0, 1)
        supported = {f.name: (f.min_version, f.max_version) for f in versions.supported_features}
        assert supported["group.version"] == (0, 1) and supported["share.version"] == (0, 2)
        finalized = {f.name: f.max_version_level for f in versions.finalized_features}
        assert finalized["group.version"] == 1 and finalized["share.version"] == 1
        empty = await raw.request(
            68,
            1,
            "ConsumerGroupHeartbeatRequest",
            group_id="",
            member_id="m",
            member_epoch=0,
            topic_partitions=(),
        )
        assert empty.error_code is ErrorCode.invalid_request
        # As FindCoordinator would: create __consumer_offsets, then wait for its load.
        app.brokers[0].services.coordinators.group_metadata_manager.ensure_offsets_topic()
        answers: list[Any] = []

        async def loaded() -> bool:
            described = await raw.request(
                69,
                1,
                "ConsumerGroupDescribeRequest",
                group_ids=("nobody",),
                include_authorized_operations=False,
            )
            answers.append(described)
            return described.groups[0].error_code is not ErrorCode.coordinator_load_in_progress

        await wait_until(loaded, "the offsets topic's load")
        assert answers[-1].groups[0].error_code is ErrorCode.group_id_not_found


async def _raw_heartbeat(raw: RawClient, **fields: Any) -> Any:
    """A ConsumerGroupHeartbeat v1, retried while the coordinator is not ready yet."""
    answers: list[Any] = []

    async def ready() -> bool:
        answers.append(await raw.request(68, 1, "ConsumerGroupHeartbeatRequest", **fields))
        return answers[-1].error_code not in (
            ErrorCode.coordinator_load_in_progress,
            ErrorCode.coordinator_not_available,
        )

    await wait_until(ready, "the coordinator ready")
    return answers[-1]


async def test_a_killed_members_partitions_move_after_its_session_timeout() -> None:
    group, topic = f"kip848-{uuid.uuid4().hex[:8]}", "kip848-killed"
    async with running_cluster(
        **FAST_CONSUMER_GROUPS,
        **{
            "group.consumer.session.timeout.ms": "2000",
            "group.consumer.min.session.timeout.ms": "1000",
        },
    ) as app:
        app.cluster.create_topic(topic, 6, 1, {})
        app.brokers[0].services.coordinators.group_metadata_manager.ensure_offsets_topic()
        # A member that joins, takes every partition, and then dies without a word.
        raw = await RawClient.connect(app.bootstrap)
        joined = await _raw_heartbeat(
            raw,
            group_id=group,
            member_id="doomed",
            member_epoch=0,
            rebalance_timeout=60_000,
            subscribed_topic_names=(topic,),
            topic_partitions=(),
        )
        assert joined.error_code is ErrorCode.none
        assert sorted(joined.assignment.topic_partitions[0].partitions) == list(range(6))
        member = Member(app.bootstrap, group, topic)
        tasks = await _start([member])
        try:
            # It cannot get a partition the dead member still holds; after the 2 s session
            # timeout the dead member is fenced and everything moves to it.
            await wait_until(
                lambda: (
                    len(member.assignment) == 6
                    and _group_state(app, group) is ConsumerGroupState.STABLE
                ),
                "the dead member's partitions to move",
                **WAIT,
            )
            coordinator = app.brokers[0].services.coordinators.consumer_group
            found = coordinator.group(group)
            assert found is not None and "doomed" not in found.members
        finally:
            await _stop([member], tasks)
            await raw.close()


async def test_a_static_member_restarted_within_its_session_keeps_its_partitions() -> None:
    group, topic = f"kip848-{uuid.uuid4().hex[:8]}", "kip848-static"
    async with running_cluster(**FAST_CONSUMER_GROUPS) as app:
        app.cluster.create_topic(topic, 6, 1, {})
        a = Member(app.bootstrap, group, topic, **{"group.instance.id": "instance-a"})
        b = Member(app.bootstrap, group, topic, **{"group.instance.id": "instance-b"})
        tasks = await _start([a, b])
        everyone = [a, b]
        try:
            await wait_until(
                lambda: (
                    _split([a, b], 6, [3, 3])
                    and _group_state(app, group) is ConsumerGroupState.STABLE
                ),
                "two static members to split six partitions",
                **WAIT,
            )
            kept = a.assignment
            a.stop()
            await asyncio.wait_for(tasks[0], 30)
            coordinator = app.brokers[0].services.coordinators.consumer_group

            def left_with_minus_two() -> bool:
                found = coordinator.group(group)
                return found is not None and any(
                    m.instance_id == "instance-a" and m.member_epoch == -2
                    for m in found.members.values()
                )

            await wait_until(left_with_minus_two, "the static member's -2 leave", **WAIT)
            assert len(b.assignment) == 3  # its partitions wait for it
            again = Member(app.bootstrap, group, topic, **{"group.instance.id": "instance-a"})
            everyone.append(again)
            tasks += await _start([again])
            await wait_until(
                lambda: (
                    again.assignment == kept
                    and _group_state(app, group) is ConsumerGroupState.STABLE
                ),
                "the restarted static member to get its partitions back",
                **WAIT,
            )
            assert len(b.assignment) == 3
        finally:
            await _stop(everyone, tasks)


async def test_the_consumer_protocol_can_be_turned_off() -> None:
    async with running_cluster(**{"group.coordinator.rebalance.protocols": "classic"}) as app:
        raw = await RawClient.connect(app.bootstrap)
        try:
            versions = await raw.request(
                18,
                4,
                "ApiVersionsRequest",
                client_software_name="raw",
                client_software_version="1",
            )
            names = [f.name for f in versions.finalized_features]
            assert "group.version" not in names and "share.version" in names
            answer = await raw.request(
                68,
                1,
                "ConsumerGroupHeartbeatRequest",
                group_id="g",
                member_id="m",
                member_epoch=0,
                rebalance_timeout=1000,
                subscribed_topic_names=("t",),
                topic_partitions=(),
            )
            assert answer.error_code is ErrorCode.unsupported_version
        finally:
            await raw.close()
