"""Share groups (KIP-932) with confluent-kafka 2.16's ``ShareConsumer`` (librdkafka 2.16).

Each share consumer runs in its own thread (``ShareMember``), polling all the time as an
application does, and records every delivery (offset, delivery count). In explicit
acknowledgement mode its ``decide`` says how each delivery is acknowledged (ACCEPT,
RELEASE, REJECT). A new share partition starts at the high watermark (Kafka's default
``share.auto.offset.reset=latest``), so each test waits until the broker has made it
before producing. A member that dies without a word is a raw client (its ShareFetch by
hand). Tests wait for states (bounded), never for fixed times.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from kio.schema.errors import ErrorCode

from broker.app import MiniKafka
from broker.config.broker_config import BrokerConfig
from broker.share.share_partition import RecordState, SharePartition
from protocol.builders import request_builder
from protocol.capture import CaptureRequest, DelayedOperationEvent
from protocol.capture_files import read_capture
from testkit.polling import wait_until
from testkit.raw_client import RawClient
from tests.integration.conftest import running_cluster

pytestmark = pytest.mark.asyncio

_QUIET = {"log_level": 3}
WAIT = {"attempts": 1200, "step_s": 0.05}  # 60 s at most, on a loaded machine
Decide = Callable[[int, int], Any]  # (offset, delivery count) -> AcknowledgeType


class ShareMember:
    """A share consumer polling in its own thread; ``hold`` makes it stop polling (and
    close without acknowledging) once it has received something."""

    def __init__(
        self,
        bootstrap: str,
        group: str,
        topic: str,
        *,
        decide: Decide | None = None,
        hold: bool = False,
    ) -> None:
        conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "group.id": group, **_QUIET}
        if decide is not None or hold:
            conf["share.acknowledgement.mode"] = "explicit"
        self.consumer = ShareConsumer(conf)
        self.topic = topic
        self.decide = decide
        self.hold = hold
        self.deliveries: list[tuple[int, int]] = []  # (offset, delivery count)
        self.errors: list[Any] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.holding = threading.Event()
        self.closed = threading.Event()

    def offsets(self) -> list[int]:
        with self._lock:
            return [offset for offset, _ in self.deliveries]

    def delivered(self) -> list[tuple[int, int]]:
        with self._lock:
            return list(self.deliveries)

    def run(self) -> None:
        self.consumer.subscribe([self.topic])
        try:
            while not self._stop.is_set() and not self.holding.is_set():
                for msg in self.consumer.poll(0.1) or ():
                    if msg.error() is not None:
                        self.errors.append(msg.error())
                        continue
                    with self._lock:
                        self.deliveries.append((msg.offset(), msg.delivery_count()))
                    if self.decide is not None:
                        self.consumer.acknowledge(
                            msg, self.decide(msg.offset(), msg.delivery_count())
                        )
                if self.hold and self.deliveries:
                    self.holding.set()
            if self.holding.is_set():
                self._stop.wait(60)  # a member that stops acknowledging until stopped
        finally:
            self.consumer.close()
            self.closed.set()

    def stop(self) -> None:
        self._stop.set()


async def _start(members: list[ShareMember]) -> list[asyncio.Task[None]]:
    return [asyncio.create_task(asyncio.to_thread(m.run)) for m in members]


async def _stop(members: list[ShareMember], tasks: list[asyncio.Task[None]]) -> None:
    for m in members:
        m.stop()
    await asyncio.wait_for(asyncio.gather(*tasks), 60)


def _share_partition(app: MiniKafka, group: str, topic: str) -> SharePartition | None:
    for broker in app.brokers:
        found = broker.services.share_partition_manager.share_partition(group, (topic, 0))
        if found is not None:
            return found
    return None


async def _initialised(app: MiniKafka, group: str, topic: str) -> SharePartition:
    """The share partition a first ShareFetch made, once it has read its state from the
    share coordinator (it starts at the high watermark of that moment)."""
    await wait_until(
        lambda: (sp := _share_partition(app, group, topic)) is not None and sp.initialized,
        "the share partition made by a first ShareFetch, initialised",
        **WAIT,
    )
    found = _share_partition(app, group, topic)
    assert found is not None
    return found


def _members(app: MiniKafka, group: str) -> int:
    found = app.brokers[0].services.coordinators.share_group.group(group)
    return len(found.members) if found is not None else 0


async def _check_described(app: MiniKafka, group: str, topic: str) -> None:
    """ShareGroupDescribe shows three members sharing partition 0; ListGroups lists the
    group with type ``share`` (and not under ``consumer``)."""
    raw = await RawClient.connect(app.bootstrap)
    try:
        topic_id = app.cluster.topics[topic].topic_id

        async def sharing() -> bool:
            described = await raw.request(
                77, 1, "ShareGroupDescribeRequest", group_ids=(group,),
                include_authorized_operations=False,
            )  # fmt: skip
            (g,) = described.groups
            assert g.error_code == ErrorCode.none and g.group_state == "Stable"
            assert g.assignor_name == "simple"
            return len(g.members) == 3 and all(
                [
                    (t.topic_id, t.topic_name, tuple(t.partitions))
                    for t in m.assignment.topic_partitions
                ]
                == [(topic_id, topic, (0,))]
                for m in g.members
            )

        await wait_until(sharing, "three members sharing partition 0", **WAIT)
        listed = await raw.request(
            16, 5, "ListGroupsRequest", states_filter=(), types_filter=("share",)
        )
        assert [(g.group_id, g.group_type, g.protocol_type) for g in listed.groups] == [
            (group, "share", "share")
        ]
        consumers = await raw.request(
            16, 5, "ListGroupsRequest", states_filter=(), types_filter=("consumer",)
        )
        assert group not in [g.group_id for g in consumers.groups]
    finally:
        await raw.close()


async def _delete_when_empty(app: MiniKafka, group: str) -> None:
    """DeleteGroups removes the share group once its members have left."""
    raw = await RawClient.connect(app.bootstrap)
    try:
        await wait_until(lambda: _members(app, group) == 0, "every member left", **WAIT)
        deleted = await raw.request(42, 2, "DeleteGroupsRequest", groups_names=(group,))
        assert [r.error_code for r in deleted.results] == [ErrorCode.none]
        assert app.brokers[0].services.coordinators.share_group.group(group) is None
        assert _share_partition(app, group, "share-split") is None
    finally:
        await raw.close()


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", **_QUIET})
    for value in values:
        producer.produce(topic, value=value, partition=0)
    assert producer.flush(30) == 0


def _done(sp: SharePartition, count: int) -> Callable[[], bool]:
    """Every one of ``count`` offsets acknowledged or archived: the share start offset
    passed them all."""
    return lambda: sp.start_offset >= count


async def test_share_consumers_of_one_group_split_one_partition_exactly_once() -> None:
    group, topic = f"share-{uuid.uuid4().hex[:8]}", "share-split"
    async with running_cluster() as app:
        app.cluster.create_topic(topic, 1, 1, {})
        members = [ShareMember(app.bootstrap, group, topic) for _ in range(3)]
        tasks = await _start(members)
        try:
            sp = await _initialised(app, group, topic)
            await wait_until(
                lambda: _members(app, group) == 3,
                "three members in the share group",
                **WAIT,
            )
            await _check_described(app, group, topic)
            produced = 0
            # One record at a time, each delivered before the next: the parked share
            # fetches are completed in the order they parked, so all members get some.
            while produced < 30 or not all(m.offsets() for m in members):
                assert produced < 600, [len(m.offsets()) for m in members]
                await asyncio.to_thread(_produce, app.bootstrap, topic, [b"%d" % produced])
                produced += 1
                await wait_until(
                    lambda n=produced: sum(len(m.offsets()) for m in members) >= n,
                    f"record {produced - 1} delivered",
                    **WAIT,
                )
            await wait_until(_done(sp, produced), "every record acknowledged", **WAIT)
        finally:
            await _stop(members, tasks)
        await _delete_when_empty(app, group)
        every = sorted(o for m in members for o in m.offsets())
        assert every == list(range(produced))  # each record to exactly one member
        assert all(count == 1 for m in members for _, count in m.delivered())
        assert not [e for m in members for e in m.errors]


async def test_records_of_a_member_that_closes_without_acknowledging_go_to_another() -> None:
    group, topic = f"share-{uuid.uuid4().hex[:8]}", "share-handover"
    async with running_cluster() as app:
        app.cluster.create_topic(topic, 1, 1, {})
        holder = ShareMember(app.bootstrap, group, topic, hold=True)
        tasks = await _start([holder])
        other: ShareMember | None = None
        try:
            sp = await _initialised(app, group, topic)
            await asyncio.to_thread(_produce, app.bootstrap, topic, [b"a", b"b", b"c"])
            await wait_until(holder.holding.is_set, "the holder got records", **WAIT)
            held = holder.offsets()
            other = ShareMember(app.bootstrap, group, topic)
            tasks += await _start([other])
            holder.stop()  # closes: its share session ends, its records are released
            await wait_until(holder.closed.is_set, "the holder closed", **WAIT)
            await wait_until(_done(sp, 3), "every record acknowledged", **WAIT)
        finally:
            await _stop([holder] + ([other] if other else []), tasks)
        assert other is not None
        redelivered = {o: count for o, count in other.delivered() if o in held}
        assert redelivered == {o: 2 for o in held}
        assert sorted(set(held) | set(other.offsets())) == [0, 1, 2]


async def test_release_redelivers_reject_archives_and_the_delivery_limit_archives() -> None:
    group, topic = f"share-{uuid.uuid4().hex[:8]}", "share-ack-types"
    released_once, rejected, always_released = 1, 2, 3

    def decide(offset: int, delivery_count: int) -> Any:
        if offset == released_once and delivery_count == 1:
            return AcknowledgeType.RELEASE
        if offset == rejected:
            return AcknowledgeType.REJECT
        if offset == always_released:
            return AcknowledgeType.RELEASE
        return AcknowledgeType.ACCEPT

    async with running_cluster() as app:
        app.cluster.create_topic(topic, 1, 1, {})
        member = ShareMember(app.bootstrap, group, topic, decide=decide)
        tasks = await _start([member])
        try:
            sp = await _initialised(app, group, topic)
            await asyncio.to_thread(_produce, app.bootstrap, topic, [b"%d" % i for i in range(5)])
            await wait_until(_done(sp, 5), "every record acknowledged or archived", **WAIT)
        finally:
            await _stop([member], tasks)
        counts: dict[int, list[int]] = {}
        for offset, count in member.delivered():
            counts.setdefault(offset, []).append(count)
        assert counts[released_once] == [1, 2]  # RELEASE: delivered again, counted
        assert counts[rejected] == [1]  # REJECT: never again
        assert counts[always_released] == [1, 2, 3, 4, 5]  # archived at the limit (5)
        assert counts[0] == counts[4] == [1]


async def _share_fetch(raw: RawClient, app: MiniKafka, topic: str, epoch: int, wait_ms: int) -> Any:
    b = request_builder(78, 1)
    topic_id = app.cluster.topics[topic].topic_id
    return await raw.request(
        78,
        1,
        "ShareFetchRequest",
        group_id="dead-" + topic,
        member_id="dead-member",
        share_session_epoch=epoch,
        max_wait=wait_ms,
        min_bytes=1,
        max_bytes=1 << 20,
        max_records=500,
        batch_size=500,
        topics=(
            b.FetchTopic(
                topic_id=topic_id,
                partitions=(b.FetchPartition(partition_index=0, acknowledgement_batches=()),),
            ),
        ),
        forgotten_topics_data=(),
    )


async def test_a_dead_members_records_go_to_another_member_at_lock_expiry() -> None:
    topic = "share-dead"
    group = "dead-" + topic
    async with running_cluster(
        **{
            "group.share.record.lock.duration.ms": "1000",
            "group.share.min.record.lock.duration.ms": "1000",
        }
    ) as app:
        app.cluster.create_topic(topic, 1, 1, {})
        raw = await RawClient.connect(app.bootstrap)
        member: ShareMember | None = None
        tasks: list[asyncio.Task[None]] = []
        try:
            # a member that acquires records and dies without a word (no ack, no close)
            opened = await _share_fetch(raw, app, topic, 0, 0)
            assert opened.error_code == ErrorCode.none
            sp = await _initialised(app, group, topic)
            await asyncio.to_thread(_produce, app.bootstrap, topic, [b"a", b"b", b"c"])
            got = await _share_fetch(raw, app, topic, 1, 10_000)
            acquired = [
                (a.first_offset, a.last_offset, a.delivery_count)
                for t in got.responses
                for p in t.partitions
                for a in p.acquired_records
            ]
            assert acquired == [(0, 2, 1)]
            # its connection stays open (a closed one would end its share session)
            member = ShareMember(app.bootstrap, group, topic)
            tasks = await _start([member])
            await wait_until(_done(sp, 3), "every record acknowledged", **WAIT)
            assert sp.locks_expired >= 1
        finally:
            await raw.close()
            await _stop([member] if member else [], tasks)
        assert member is not None
        assert member.delivered() == [(0, 2), (1, 2), (2, 2)]


async def test_a_closed_connection_ends_its_share_session_and_releases_its_records() -> None:
    """Kafka 4.1: the share sessions a connection opened end when it closes, and what
    their members held is available again at once (not at lock expiry)."""
    topic = "share-disconnect"
    group = "dead-" + topic
    async with running_cluster(
        **{
            "group.share.record.lock.duration.ms": "60000",
            "group.share.max.record.lock.duration.ms": "60000",
        }
    ) as app:
        app.cluster.create_topic(topic, 1, 1, {})
        raw = await RawClient.connect(app.bootstrap)
        try:
            assert (await _share_fetch(raw, app, topic, 0, 0)).error_code == ErrorCode.none
            sp = await _initialised(app, group, topic)
            await asyncio.to_thread(_produce, app.bootstrap, topic, [b"a", b"b"])
            got = await _share_fetch(raw, app, topic, 1, 10_000)
            assert [len(p.acquired_records) for t in got.responses for p in t.partitions] == [1]
            assert sp.record_state(0) == (RecordState.ACQUIRED, 1, "dead-member")
            manager = app.brokers[0].services.share_partition_manager
            assert manager.session_cache.get((group, "dead-member")) is not None
        finally:
            await raw.close()
        await wait_until(
            lambda: (
                sp.record_state(0) == (RecordState.AVAILABLE, 1, None)
                and sp.record_state(1) == (RecordState.AVAILABLE, 1, None)
            ),
            "the records released",
            **WAIT,
        )
        assert sp.locks_expired == 0  # released by the close, not by the lock
        assert manager.session_cache.get((group, "dead-member")) is None


async def test_share_consumers_on_three_brokers_read_replicated_partitions() -> None:
    group, topic = f"share-{uuid.uuid4().hex[:8]}", "share-replicated"
    async with running_cluster(brokers=3) as app:
        app.cluster.create_topic(topic, 3, 3, {})
        members = [ShareMember(app.bootstrap, group, topic) for _ in range(2)]
        tasks = await _start(members)
        try:

            def share_partitions() -> list[SharePartition]:
                return [
                    sp
                    for b in app.brokers
                    for p in range(3)
                    if (sp := b.services.share_partition_manager.share_partition(group, (topic, p)))
                ]

            await wait_until(
                lambda: sum(sp.initialized for sp in share_partitions()) == 3,
                "3 share partitions, initialised",
                **WAIT,
            )
            producer = Producer({"bootstrap.servers": app.bootstrap, "acks": "all", **_QUIET})

            def produce() -> None:
                for i in range(60):
                    producer.produce(topic, value=b"%d" % i, partition=i % 3)
                assert producer.flush(30) == 0

            await asyncio.to_thread(produce)
            await wait_until(
                lambda: all(sp.start_offset >= 20 for sp in share_partitions()),
                "every record acknowledged",
                **WAIT,
            )
        finally:
            await _stop(members, tasks)
        assert sum(len(m.offsets()) for m in members) == 60
        assert all(count == 1 for m in members for _, count in m.delivered())


async def test_share_groups_can_be_turned_off() -> None:
    async with running_cluster(**{"group.share.enable": "false"}) as app:
        raw = await RawClient.connect(app.bootstrap)
        try:
            versions = await raw.request(
                18, 4, "ApiVersionsRequest", client_software_name="raw",
                client_software_version="1",
            )  # fmt: skip
            assert "share.version" not in [f.name for f in versions.finalized_features]
            answer = await raw.request(
                76, 1, "ShareGroupHeartbeatRequest", group_id="g", member_id="m",
                member_epoch=0, rack_id=None, subscribed_topic_names=("t",),
            )  # fmt: skip
            assert answer.error_code == ErrorCode.unsupported_version
        finally:
            await raw.close()


async def test_a_parked_share_fetch_is_captured_in_the_share_fetch_purgatory(
    tmp_path: Path,
) -> None:
    topic = "share-captured"
    app = MiniKafka(BrokerConfig.model_validate({}), port=0, capture_dir=tmp_path)
    await app.start()
    try:
        app.cluster.create_topic(topic, 1, 1, {})
        raw = await RawClient.connect(app.bootstrap)
        try:
            assert (await _share_fetch(raw, app, topic, 0, 0)).error_code == ErrorCode.none
            parked = asyncio.ensure_future(_share_fetch(raw, app, topic, 1, 30_000))
            await wait_until(
                lambda: app.brokers[0].purgatories.share_fetch.num_delayed() == 1,
                "the share fetch parked",
                **WAIT,
            )
            await _initialised(app, "dead-" + topic, topic)  # starts at the high watermark
            await asyncio.to_thread(_produce, app.bootstrap, topic, [b"x"])
            answer = await asyncio.wait_for(parked, 60)
            assert [len(p.acquired_records) for t in answer.responses for p in t.partitions] == [1]
        finally:
            await raw.close()
    finally:
        await app.stop()
    records = list(read_capture(tmp_path))
    fetches = [r for r in records if isinstance(r, CaptureRequest) and r.api_name == "ShareFetch"]
    assert [(r.purgatory, r.purgatory_outcome) for r in fetches] == [
        (None, None),
        ("ShareFetch", "completed"),
    ]
    events = [r for r in records if isinstance(r, DelayedOperationEvent)]
    assert [(e.kind, e.event, e.purgatory) for e in events if e.purgatory == "ShareFetch"] == [
        ("DelayedShareFetch", "created", "ShareFetch"),
        ("DelayedShareFetch", "completed", "ShareFetch"),
    ]
