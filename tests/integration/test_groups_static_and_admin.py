"""Static membership, the group admin APIs, OffsetDelete, the initial rebalance delay and
coordinator errors, driven by real clients against a real broker.

Static membership and aiokafka: aiokafka sends ``group_instance_id`` in JoinGroup (v5) and
SyncGroup (v3) but not in Heartbeat (v1) nor OffsetCommit, and it never sends LeaveGroup
for a static member. So a fenced aiokafka member only ever sees UNKNOWN_MEMBER_ID on its
heartbeat; it then rejoins with an empty member id and takes the instance back (Kafka
answers it the same way). The fencing a user can see is librdkafka's: it heartbeats with
its instance id, gets FENCED_INSTANCE_ID and stops with a fatal error. The protocol-level
answer is checked with raw requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import InvalidSessionTimeoutError
from kio.schema.errors import ErrorCode

from broker.app import MiniKafka
from broker.group.group_metadata import GroupMetadata
from broker.group.group_state import GroupState
from testkit.polling import wait_until
from testkit.raw_client import RawClient
from tests.integration.conftest import running_cluster

TOPIC = "events"
JOIN_GROUP, HEARTBEAT, SYNC_GROUP = 11, 12, 14
POLLS = 400  # bounded waits: at most POLLS rounds of a short poll


# ----------------------------------------------------------------------------- helpers


async def create_topics(app: MiniKafka, partitions: int, *names: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=app.bootstrap)
    await admin.start()
    try:
        await admin.create_topics(
            [NewTopic(n, num_partitions=partitions, replication_factor=1) for n in names]
        )
    finally:
        await admin.close()


@contextlib.asynccontextmanager
async def aio_admin(app: MiniKafka) -> AsyncIterator[AIOKafkaAdminClient]:
    admin = AIOKafkaAdminClient(bootstrap_servers=app.bootstrap)
    await admin.start()
    try:
        yield admin
    finally:
        await admin.close()


def consumer(app: MiniKafka, group: str, *topics: str, **kw: Any) -> AIOKafkaConsumer:
    options: dict[str, Any] = {
        "bootstrap_servers": app.bootstrap,
        "group_id": group,
        "auto_offset_reset": "earliest",
        "session_timeout_ms": 6000,
        "heartbeat_interval_ms": 300,
        "enable_auto_commit": False,
    }
    options.update(kw)
    return AIOKafkaConsumer(*(topics or (TOPIC,)), **options)


def group_of(app: MiniKafka, group_id: str) -> GroupMetadata:
    group = app.brokers[0].services.coordinators.group.get_group(group_id)
    assert group is not None, f"the coordinator does not know {group_id}"
    return group


async def wait_settled(
    app: MiniKafka, group_id: str, consumers: list[AIOKafkaConsumer], partitions: int
) -> GroupMetadata:
    """Poll (bounded) until the group is Stable, every consumer is in its generation, and
    the consumers' assignments split all ``partitions`` between them."""

    async def settled() -> bool:
        await asyncio.gather(*(c.getmany(timeout_ms=50) for c in consumers))
        group = app.brokers[0].services.coordinators.group.get_group(group_id)
        if group is None or not group.is_in(GroupState.STABLE):
            return False
        assigned = [c.assignment() for c in consumers]
        return (
            all(assigned)
            and sum(len(a) for a in assigned) == partitions
            and len(set().union(*assigned)) == partitions
            and all(c._coordinator.generation == group.generation_id for c in consumers)
        )

    # The consumers' own polls (50 ms each) pace the attempts.
    await wait_until(settled, f"group {group_id} to settle", attempts=POLLS, step_s=0)
    group = app.brokers[0].services.coordinators.group.get_group(group_id)
    assert group is not None
    return group


async def stop_all(consumers: list[AIOKafkaConsumer]) -> None:
    for c in consumers:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(c.stop(), 10)


# ----------------------------------------------------------------- static membership


async def test_restarted_static_member_takes_its_place_back_without_a_rebalance() -> None:
    async with running_cluster() as app:
        await create_topics(app, 4, TOPIC)
        a = consumer(app, "static", group_instance_id="instance-a")
        b = consumer(app, "static", group_instance_id="instance-b")
        restarted: AIOKafkaConsumer | None = None
        await asyncio.gather(a.start(), b.start())
        try:
            group = await wait_settled(app, "static", [a, b], 4)
            # Restart the leader: the harder case (the group must not take the returning
            # member's JoinGroup as a leader's, nor rebalance for it).
            first, other = (a, b) if group.is_leader(a._coordinator.member_id) else (b, a)
            instance = first._group_instance_id
            generation = group.generation_id
            partitions = first.assignment()
            old_member_id = first._coordinator.member_id

            await first.stop()  # a static aiokafka member leaves without LeaveGroup
            # Its place is kept: same member, same generation, nobody told to rejoin.
            assert group.current_static_member_id(instance) == old_member_id
            assert group.is_in(GroupState.STABLE)

            restarted = consumer(app, "static", group_instance_id=instance)
            await restarted.start()
            await wait_settled(app, "static", [restarted, other], 4)
            assert restarted.assignment() == partitions
            assert group.generation_id == generation
            assert other._coordinator.generation == generation
            assert restarted._coordinator.generation == generation
            new_member_id = restarted._coordinator.member_id
            assert new_member_id != old_member_id
            assert group.current_static_member_id(instance) == new_member_id

            # The old member id is fenced for every request that names the instance.
            raw = await RawClient.connect(app.bootstrap)
            try:
                beat = await raw.request(
                    HEARTBEAT,
                    4,
                    "HeartbeatRequest",
                    group_id="static",
                    generation_id=generation,
                    member_id=old_member_id,
                    group_instance_id=instance,
                )
                assert beat.error_code is ErrorCode.fenced_instance_id
                sync = await raw.request(
                    SYNC_GROUP,
                    3,
                    "SyncGroupRequest",
                    group_id="static",
                    generation_id=generation,
                    member_id=old_member_id,
                    group_instance_id=instance,
                    assignments=(),
                )
                assert sync.error_code is ErrorCode.fenced_instance_id
            finally:
                await raw.close()
            # ...and none of it disturbed the group.
            assert group.generation_id == generation
            assert group.current_static_member_id(instance) == new_member_id
        finally:
            await stop_all([c for c in (a, b, restarted) if c is not None])


async def test_second_static_member_with_the_same_instance_id_fences_the_first() -> None:
    from confluent_kafka import Consumer, KafkaError

    async with running_cluster() as app:
        await create_topics(app, 4, TOPIC)
        stop = threading.Event()
        assignments: dict[int, set[int]] = {1: set(), 2: set()}
        errors: dict[int, list[KafkaError]] = {1: [], 2: []}

        def member(i: int) -> None:
            c = Consumer(
                {
                    "bootstrap.servers": app.bootstrap,
                    "group.id": "fence",
                    "group.instance.id": "the-instance",
                    "session.timeout.ms": 6000,
                    "heartbeat.interval.ms": 300,
                    "error_cb": errors[i].append,
                }
            )
            c.subscribe([TOPIC])
            try:
                while not stop.is_set():
                    msg = c.poll(0.05)
                    error = msg.error() if msg is not None else None
                    if error is not None:
                        errors[i].append(error)
                    with contextlib.suppress(Exception):  # fails once fenced: fatal
                        assignments[i] = {tp.partition for tp in c.assignment()}
            finally:
                with contextlib.suppress(Exception):
                    c.close()

        first = threading.Thread(target=member, args=(1,), daemon=True)
        second = threading.Thread(target=member, args=(2,), daemon=True)
        first.start()
        try:
            await wait_until(
                lambda: len(assignments[1]) == 4, "member 1's four partitions", attempts=POLLS
            )
            assert assignments[1] == {0, 1, 2, 3}
            group = group_of(app, "fence")
            generation = group.generation_id

            second.start()

            def fenced() -> bool:
                return any(
                    e.code() == KafkaError._FATAL and "fenced" in e.str().lower() for e in errors[1]
                )

            await wait_until(
                lambda: fenced() and assignments[2] == {0, 1, 2, 3},
                f"member 1 fenced and member 2 assigned: {errors[1]}",
                attempts=POLLS,
            )
            assert fenced(), errors[1]
            assert assignments[2] == {0, 1, 2, 3}
            assert not errors[2]
            # The replacement took the instance's place in the same generation.
            assert group.generation_id == generation
            assert group.size == 1
        finally:
            stop.set()
            for t in (first, second):
                if t.is_alive() or t.ident is not None:
                    await asyncio.to_thread(t.join, 15)


async def test_admin_removes_a_departed_static_member_by_instance_id() -> None:
    from kafka.admin import KafkaAdminClient, MemberToRemove
    from kafka.errors import NoError, UnknownMemberIdError

    async with running_cluster() as app:
        await create_topics(app, 4, TOPIC)
        gone = consumer(app, "removal", group_instance_id="gone")
        stays = consumer(app, "removal", group_instance_id="stays")
        await asyncio.gather(gone.start(), stays.start())
        admin = await asyncio.to_thread(KafkaAdminClient, bootstrap_servers=app.bootstrap)
        try:
            group = await wait_settled(app, "removal", [gone, stays], 4)
            await gone.stop()  # no LeaveGroup: its partitions stay with it...
            assert len(stays.assignment()) == 2
            # ...until an operator removes it by instance id (LeaveGroup v3+, no member id).
            result = await asyncio.to_thread(
                admin.remove_group_members,
                "removal",
                [MemberToRemove(group_instance_id="gone"), MemberToRemove(group_instance_id="x")],
            )
            # kafka-python keys the answer by member id, else instance id.
            assert result == {"gone": NoError, "x": UnknownMemberIdError}
            await wait_settled(app, "removal", [stays], 4)
            assert group.current_static_member_id("gone") is None
        finally:
            await stop_all([gone, stays])
            await asyncio.to_thread(admin.close)


# ------------------------------------------------------------------------ admin APIs


async def test_aiokafka_admin_lists_describes_and_fetches_group_offsets() -> None:
    async with running_cluster() as app:
        await create_topics(app, 2, TOPIC)
        live = consumer(app, "live", client_id="live-client")
        await live.start()
        try:
            await wait_settled(app, "live", [live], 2)
            await live.commit({TopicPartition(TOPIC, 0): 0, TopicPartition(TOPIC, 1): 0})
            idle = AIOKafkaConsumer(
                bootstrap_servers=app.bootstrap, group_id="idle", enable_auto_commit=False
            )
            await idle.start()
            try:
                idle.assign([TopicPartition(TOPIC, 1)])
                await idle.commit({TopicPartition(TOPIC, 1): 7})
            finally:
                await idle.stop()

            async with aio_admin(app) as admin:
                listed = await admin.list_consumer_groups()
                assert {("live", "consumer"), ("idle", "")} <= set(listed)

                # One group per call: aiokafka 0.14 decodes DescribeGroups v3 responses
                # with the v2 schema (no authorized_operations), which misreads a second
                # group in the same response, whatever the broker.
                by_id = {}
                for group_id in ("live", "idle", "nobody"):
                    (response,) = await admin.describe_consumer_groups([group_id])
                    (described,) = response.groups
                    by_id[described[1]] = described
                assert set(by_id) == {"live", "idle", "nobody"}
                error, _, state, protocol_type, protocol, members = by_id["live"][:6]
                assert (error, state, protocol_type, protocol) == (
                    0,
                    "Stable",
                    "consumer",
                    "roundrobin",
                )
                assert len(members) == 1
                assert members[0][0] == live._coordinator.member_id
                assert members[0][1] == "live-client"
                assert by_id["idle"][2] == "Empty" and not by_id["idle"][5]
                assert by_id["nobody"][2] == "Dead"

                assert await admin.list_consumer_group_offsets("idle") == {
                    TopicPartition(TOPIC, 1): (7, "")
                }
                offsets = await admin.list_consumer_group_offsets("live")
                assert {tp: om.offset for tp, om in offsets.items()} == {
                    TopicPartition(TOPIC, 0): 0,
                    TopicPartition(TOPIC, 1): 0,
                }
        finally:
            await live.stop()


async def test_confluent_admin_filters_by_state_describes_and_deletes_groups() -> None:
    from confluent_kafka import ConsumerGroupState, KafkaException
    from confluent_kafka.admin import AdminClient

    async with running_cluster() as app:
        await create_topics(app, 3, TOPIC)
        live = consumer(app, "ck-live", client_id="ck-live-client")
        await live.start()
        try:
            await wait_settled(app, "ck-live", [live], 3)
            idle = AIOKafkaConsumer(
                bootstrap_servers=app.bootstrap, group_id="ck-idle", enable_auto_commit=False
            )
            await idle.start()
            try:
                idle.assign([TopicPartition(TOPIC, 2)])
                await idle.commit({TopicPartition(TOPIC, 2): 3})
            finally:
                await idle.stop()

            admin = AdminClient({"bootstrap.servers": app.bootstrap})

            def listed(*states: ConsumerGroupState) -> dict[str, ConsumerGroupState]:
                future = admin.list_consumer_groups(request_timeout=10, states=set(states))
                result = future.result()
                assert not result.errors
                return {g.group_id: g.state for g in result.valid}

            stable = await asyncio.to_thread(listed, ConsumerGroupState.STABLE)
            assert stable == {"ck-live": ConsumerGroupState.STABLE}
            empty = await asyncio.to_thread(listed, ConsumerGroupState.EMPTY)
            assert empty == {"ck-idle": ConsumerGroupState.EMPTY}
            everything = await asyncio.to_thread(listed)
            assert {"ck-live", "ck-idle"} <= set(everything)

            def describe(group_id: str) -> Any:
                return admin.describe_consumer_groups([group_id], request_timeout=10)[
                    group_id
                ].result()

            description = await asyncio.to_thread(describe, "ck-live")
            assert description.state == ConsumerGroupState.STABLE
            assert description.partition_assignor == "roundrobin"  # aiokafka's default
            (member,) = description.members
            assert member.member_id == live._coordinator.member_id
            assert member.client_id == "ck-live-client"
            assert {(tp.topic, tp.partition) for tp in member.assignment.topic_partitions} == {
                (TOPIC, 0),
                (TOPIC, 1),
                (TOPIC, 2),
            }

            def delete(group_id: str) -> None:
                admin.delete_consumer_groups([group_id], request_timeout=10)[group_id].result()

            with pytest.raises(KafkaException) as refused:
                await asyncio.to_thread(delete, "ck-live")
            assert refused.value.args[0].code() == ErrorCode.non_empty_group.value
            await asyncio.to_thread(delete, "ck-idle")
            assert "ck-idle" not in await asyncio.to_thread(listed)
            async with aio_admin(app) as aio:
                assert await aio.list_consumer_group_offsets("ck-idle") == {}
            assert group_of(app, "ck-live").is_in(GroupState.STABLE)
        finally:
            await live.stop()


async def test_offset_delete_refuses_subscribed_topics_and_works_for_an_empty_group() -> None:
    from kafka import TopicPartition as KafkaTP
    from kafka.admin import KafkaAdminClient
    from kafka.errors import GroupIdNotFoundError, GroupSubscribedToTopicError, NoError

    async with running_cluster() as app:
        await create_topics(app, 1, TOPIC, "other")
        subscribed, unsubscribed = TopicPartition(TOPIC, 0), TopicPartition("other", 0)
        # Commit for both topics while the group is empty (generation -1) ...
        simple = AIOKafkaConsumer(
            bootstrap_servers=app.bootstrap, group_id="od", enable_auto_commit=False
        )
        await simple.start()
        try:
            simple.assign([subscribed, unsubscribed])
            await simple.commit({subscribed: 5, unsubscribed: 7})
        finally:
            await simple.stop()
        # ... then a member subscribes to one of them.
        member = consumer(app, "od", TOPIC)
        await member.start()
        # Its constructor blocks on a bootstrap round trip: not on the broker's loop.
        admin = await asyncio.to_thread(KafkaAdminClient, bootstrap_servers=app.bootstrap)
        try:
            await wait_settled(app, "od", [member], 1)

            def delete_offsets(group_id: str, *tps: TopicPartition) -> dict[Any, Any]:
                wanted = [KafkaTP(t.topic, t.partition) for t in tps]
                result: dict[Any, Any] = admin.delete_group_offsets(group_id, wanted)
                return result

            result = await asyncio.to_thread(delete_offsets, "od", subscribed, unsubscribed)
            assert result == {
                KafkaTP(TOPIC, 0): GroupSubscribedToTopicError,
                KafkaTP("other", 0): NoError,
            }
            async with aio_admin(app) as aio:
                offsets = await aio.list_consumer_group_offsets("od")
                assert {tp: om.offset for tp, om in offsets.items()} == {subscribed: 5}

            await member.stop()  # LeaveGroup: the group is Empty now
            assert group_of(app, "od").is_in(GroupState.EMPTY)
            result = await asyncio.to_thread(delete_offsets, "od", subscribed)
            assert result == {KafkaTP(TOPIC, 0): NoError}
            async with aio_admin(app) as aio:
                assert await aio.list_consumer_group_offsets("od") == {}

            with pytest.raises(GroupIdNotFoundError):
                await asyncio.to_thread(delete_offsets, "no-such-group", subscribed)
        finally:
            await stop_all([member])
            await asyncio.to_thread(admin.close)


# ------------------------------------------------------------- initial rebalance delay


async def test_initial_rebalance_delay_gathers_members_joining_within_it() -> None:
    async with running_cluster(1, None, **{"group.initial.rebalance.delay.ms": "1500"}) as app:
        await create_topics(app, 6, TOPIC)
        members = [consumer(app, "delayed") for _ in range(3)]
        starting: list[asyncio.Task[None]] = []
        try:
            # Start them one after another, each once the previous one has joined: joins
            # that arrive truly at once gather even without a delay (a rebalance waits for
            # members whose KIP-394 id is pending), joins spread out do not.
            for count, member in enumerate(members, start=1):
                starting.append(asyncio.create_task(member.start()))

                def joined(count: int = count) -> bool:
                    group = app.brokers[0].services.coordinators.group.get_group("delayed")
                    return group is not None and group.size >= count

                await wait_until(joined, f"member {count} joined", attempts=POLLS, step_s=0.01)
            await asyncio.gather(*starting)
            group = await wait_settled(app, "delayed", members, 6)
            # Without the delay the first joiner would have had a generation to itself.
            assert group.generation_id == 1
            assert [c._coordinator.generation for c in members] == [1, 1, 1]
            assert sorted(len(c.assignment()) for c in members) == [2, 2, 2]
        finally:
            for task in starting:
                task.cancel()
            await stop_all(members)


# ------------------------------------------------------------------ coordinator errors


async def test_session_timeout_below_the_broker_minimum_is_refused() -> None:
    async with running_cluster(1, None, **{"group.min.session.timeout.ms": "6000"}) as app:
        await create_topics(app, 1, TOPIC)
        short = consumer(app, "short", session_timeout_ms=3000, heartbeat_interval_ms=300)
        try:
            with pytest.raises(InvalidSessionTimeoutError):
                await asyncio.wait_for(short.start(), 20)
        finally:
            await stop_all([short])
        # Refused before any member was added: the group holds nobody.
        group = app.brokers[0].services.coordinators.group.get_group("short")
        assert group is None or group.size == 0
