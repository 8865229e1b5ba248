"""KIP-848 consumer groups in ``__consumer_offsets``, on the manual clock: the six record
types in Kafka's formats (golden bytes in the field order of Kafka's JSON schemas, key
versions 3-8, flexible values), round trips, the records a heartbeat writes, a group
written and then loaded by a fresh manager and coordinator (epochs, members,
assignments), tombstones, session timers started at load, unload, and a heartbeat
answered only once its records are written.
"""

from __future__ import annotations

import itertools
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import ClusterMetadata
from broker.group import GroupConfig, GroupCoordinator
from broker.group.consumer import (
    ConsumerGroupConfig,
    ConsumerGroupCoordinator,
    ConsumerGroupHeartbeatParams,
    ConsumerGroupHeartbeatResult,
    ConsumerGroupState,
    MemberState,
    TopicMetadata,
)
from broker.group.consumer.consumer_group_records import (
    ConsumerGroupCurrentMemberAssignmentRecord,
    ConsumerGroupMemberMetadataRecord,
    ConsumerGroupMetadataRecord,
    ConsumerGroupPartitionMetadataRecord,
    ConsumerGroupRecord,
    ConsumerGroupTargetAssignmentMemberRecord,
    ConsumerGroupTargetAssignmentMetadataRecord,
    CurrentAssignment,
    MemberSubscription,
    decode_consumer_group_record,
    decode_or_skip,
    encode_consumer_group_record,
    is_consumer_group_key,
)
from broker.group.group_log import InMemoryGroupLog, decode_record
from tests.helpers.group_harness import Harness

E = ErrorCode
SESSION_MS = 3000
T1 = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
T2 = uuid.UUID("ffeeddcc-bbaa-9988-7766-554433221100")


def _s(text: str) -> bytes:  # non-flexible string: int16 length
    raw = text.encode()
    return len(raw).to_bytes(2, "big") + raw


def _cs(text: str) -> bytes:  # compact string: uvarint length + 1
    raw = text.encode()
    return bytes([len(raw) + 1]) + raw


def _i32(v: int) -> bytes:
    return v.to_bytes(4, "big", signed=True)


# ------------------------------------------------------------------ golden bytes
def test_group_epoch_record_golden_bytes() -> None:
    key, value = encode_consumer_group_record(ConsumerGroupMetadataRecord("g", 5))
    assert key == b"\x00\x03" + _s("g")
    # version 0, Epoch int32, no tagged fields
    assert value == b"\x00\x00" + _i32(5) + b"\x00"
    assert encode_consumer_group_record(ConsumerGroupMetadataRecord("g", None)) == (key, None)


def test_partition_metadata_record_golden_bytes() -> None:
    record = ConsumerGroupPartitionMetadataRecord("g", (TopicMetadata(T1, "t", 3),))
    key, value = encode_consumer_group_record(record)
    assert key == b"\x00\x04" + _s("g")
    # Topics: [TopicId uuid, TopicName, NumPartitions, PartitionMetadata (empty)]
    assert value == (
        b"\x00\x00" + b"\x02" + T1.bytes + _cs("t") + _i32(3) + b"\x01" + b"\x00" + b"\x00"
    )


def test_member_metadata_record_golden_bytes() -> None:
    sub = MemberSubscription(
        instance_id=None,
        rack_id="r",
        client_id="c",
        client_host="/h",
        subscribed_topic_names=("b", "a"),
        subscribed_topic_regex=None,
        rebalance_timeout_ms=45000,
        server_assignor="uniform",
    )
    key, value = encode_consumer_group_record(ConsumerGroupMemberMetadataRecord("g", "m", sub))
    assert key == b"\x00\x05" + _s("g") + _s("m")
    # InstanceId, RackId, ClientId, ClientHost, SubscribedTopicNames (sorted, as Kafka),
    # SubscribedTopicRegex, RebalanceTimeoutMs, ServerAssignor, tagged fields
    assert value == (
        b"\x00\x00"
        + b"\x00"
        + _cs("r")
        + _cs("c")
        + _cs("/h")
        + b"\x03"
        + _cs("a")
        + _cs("b")
        + b"\x00"
        + _i32(45000)
        + _cs("uniform")
        + b"\x00"
    )


def test_target_assignment_records_golden_bytes() -> None:
    key, value = encode_consumer_group_record(ConsumerGroupTargetAssignmentMetadataRecord("g", 7))
    assert key == b"\x00\x06" + _s("g")
    assert value == b"\x00\x00" + _i32(7) + b"\x00"
    record = ConsumerGroupTargetAssignmentMemberRecord("g", "m", {T1: frozenset({2, 0})})
    key, value = encode_consumer_group_record(record)
    assert key == b"\x00\x07" + _s("g") + _s("m")
    # TopicPartitions: [TopicId, Partitions []int32]
    assert value == (
        b"\x00\x00" + b"\x02" + T1.bytes + b"\x03" + _i32(0) + _i32(2) + b"\x00" + b"\x00"
    )


def test_current_assignment_record_golden_bytes() -> None:
    current = CurrentAssignment(
        member_epoch=4,
        previous_member_epoch=3,
        state=MemberState.UNREVOKED_PARTITIONS,
        assigned_partitions={T1: frozenset({1})},
        partitions_pending_revocation={T2: frozenset({0})},
    )
    record = ConsumerGroupCurrentMemberAssignmentRecord("g", "m", current)
    key, value = encode_consumer_group_record(record)
    assert key == b"\x00\x08" + _s("g") + _s("m")
    # MemberEpoch, PreviousMemberEpoch, State int8 (UNREVOKED_PARTITIONS = 1),
    # AssignedPartitions, PartitionsPendingRevocation
    assert value == (
        b"\x00\x00"
        + _i32(4)
        + _i32(3)
        + b"\x01"
        + (b"\x02" + T1.bytes + b"\x02" + _i32(1) + b"\x00")
        + (b"\x02" + T2.bytes + b"\x02" + _i32(0) + b"\x00")
        + b"\x00"
    )


def test_every_record_round_trips_and_classic_decoding_leaves_it_alone() -> None:
    records: list[ConsumerGroupRecord] = [
        ConsumerGroupMetadataRecord("g", 3),
        ConsumerGroupMetadataRecord("g", None),
        ConsumerGroupPartitionMetadataRecord(
            "g", (TopicMetadata(T1, "t", 3), TopicMetadata(T2, "u", 1))
        ),
        ConsumerGroupPartitionMetadataRecord("g", None),
        ConsumerGroupMemberMetadataRecord(
            "g",
            "m",
            MemberSubscription("i", None, "c", "/h", ("t", "u"), None, 5000, None),
        ),
        ConsumerGroupMemberMetadataRecord("g", "m", None),
        ConsumerGroupTargetAssignmentMetadataRecord("g", 3),
        ConsumerGroupTargetAssignmentMetadataRecord("g", None),
        ConsumerGroupTargetAssignmentMemberRecord("g", "m", {T1: frozenset({0, 1})}),
        ConsumerGroupTargetAssignmentMemberRecord("g", "m", None),
        ConsumerGroupCurrentMemberAssignmentRecord(
            "g",
            "m",
            CurrentAssignment(3, 2, MemberState.STABLE, {T1: frozenset({0})}, {}),
        ),
        ConsumerGroupCurrentMemberAssignmentRecord("g", "m", None),
    ]
    for record in records:
        key, value = encode_consumer_group_record(record)
        assert is_consumer_group_key(key)
        assert decode_consumer_group_record(key, value) == record
        assert decode_record(key, value) is None  # not the classic decoder's
    assert decode_or_skip(b"\x00\x03\x00\x05g", b"\x00\x00") is None  # truncated: skipped


def test_unknown_tagged_fields_are_skipped() -> None:
    key, value = encode_consumer_group_record(
        ConsumerGroupMemberMetadataRecord(
            "g", "m", MemberSubscription(None, None, "c", "/h", ("t",), None, 1, None)
        )
    )
    assert value is not None
    # Replace the empty tagged-field section with one field of an unknown tag, 3 bytes
    # (tag 0 is a classic member's ClassicMemberMetadata: test_consumer_group_migration).
    tagged = value[:-1] + b"\x01\x05\x03abc"
    decoded = decode_consumer_group_record(key, tagged)
    assert isinstance(decoded, ConsumerGroupMemberMetadataRecord)
    assert decoded.value is not None and decoded.value.subscribed_topic_names == ("t",)


# ------------------------------------------------------------------- the world
class Node:
    """One coordinator (manager + classic and consumer coordinators) over ``log``; the
    topics come from the cluster's metadata, which survives a coordinator failover."""

    def __init__(self, log: InMemoryGroupLog, topics: ClusterMetadata | None = None) -> None:
        self.h = Harness(log=log)
        self.h.metadata.register_broker(0, "127.0.0.1", 9092)
        self.topics = topics if topics is not None else self.h.metadata
        ids = itertools.count(1)
        self.coord = ConsumerGroupCoordinator(
            ConsumerGroupConfig(
                group_consumer_session_timeout_ms=SESSION_MS,
                group_consumer_min_session_timeout_ms=1000,
                group_consumer_heartbeat_interval_ms=500,
                group_consumer_min_heartbeat_interval_ms=100,
            ),
            self.h.scheduler,
            self.topics,
            self.h.manager,
            lambda: f"generated-{next(ids)}",
        )
        self.classic = GroupCoordinator(
            GroupConfig(), self.h.heartbeat, self.h.rebalance, self.h.manager, self.coord
        )

    def load(self) -> None:
        for partition in sorted(self.h.log.partitions):
            assert self.h.manager.load_groups_for_partition(
                partition,
                self.classic.on_group_loaded,
                on_consumer_group_loaded=self.classic.on_consumer_group_loaded,
            )

    def heartbeat(self, member_id: str, epoch: int, owned: Any = (), **kw: Any) -> Any:
        params = ConsumerGroupHeartbeatParams(
            group_id="g",
            member_id=member_id,
            member_epoch=epoch,
            rebalance_timeout_ms=kw.pop("rebalance_timeout_ms", 10_000 if epoch == 0 else -1),
            subscribed_topic_names=kw.pop("topics", ("t",) if epoch == 0 else None),
            owned_topic_partitions=tuple((t, tuple(sorted(ps))) for t, ps in dict(owned).items()),
            client_id="client",
            client_host="/127.0.0.1",
            **kw,
        )
        return self.coord.consumer_group_heartbeat(params)


def converge(node: Node, member_ids: list[str]) -> dict[str, tuple[int, dict[Any, Any]]]:
    """Heartbeat the members until the group is stable; their (epoch, owned) by id."""
    state: dict[str, tuple[int, dict[Any, Any]]] = {m: (0, {}) for m in member_ids}
    for _ in range(10):
        for m in member_ids:
            epoch, owned = state[m]
            r = node.heartbeat(m, epoch, owned)
            assert r.error is E.none, r
            state[m] = (r.member_epoch, dict(r.assignment) if r.assignment is not None else owned)
    group = node.coord.group("g")
    assert group is not None and group.state is ConsumerGroupState.STABLE
    return state


def two_member_group() -> tuple[InMemoryGroupLog, Node, dict[str, tuple[int, dict[Any, Any]]]]:
    log = InMemoryGroupLog()
    node = Node(log)
    node.h.metadata.create_topic("t", 4, 1, {})
    return log, node, converge(node, ["a", "b"])


def test_a_join_writes_kafkas_records_in_kafkas_order() -> None:
    log = InMemoryGroupLog()
    node = Node(log)
    topic = node.h.metadata.create_topic("t", 2, 1, {})
    node.heartbeat("a", 0)
    kinds = [type(decode_consumer_group_record(k, v)).__name__ for k, v in log.records()]
    assert kinds == [
        "ConsumerGroupMemberMetadataRecord",
        "ConsumerGroupPartitionMetadataRecord",
        "ConsumerGroupMetadataRecord",
        "ConsumerGroupTargetAssignmentMemberRecord",
        "ConsumerGroupTargetAssignmentMetadataRecord",
        "ConsumerGroupCurrentMemberAssignmentRecord",
    ]
    current = decode_consumer_group_record(*log.records()[-1])
    assert current == ConsumerGroupCurrentMemberAssignmentRecord(
        "g",
        "a",
        CurrentAssignment(1, 0, MemberState.STABLE, {topic.topic_id: frozenset({0, 1})}, {}),
    )
    # A heartbeat that changes nothing writes nothing.
    before = len(log.records())
    assert node.heartbeat("a", 1).error is E.none
    assert len(log.records()) == before


def test_a_group_written_comes_back_in_a_fresh_coordinator() -> None:
    log, node, state = two_member_group()
    old = node.coord.group("g")
    assert old is not None
    fresh = Node(log, topics=node.h.metadata)
    fresh.load()
    group = fresh.coord.group("g")
    assert group is not None
    assert (group.group_epoch, group.assignment_epoch) == (old.group_epoch, old.assignment_epoch)
    assert group.members == old.members
    assert group.target_assignment == old.target_assignment
    assert group.subscription_metadata == old.subscription_metadata
    assert group.partition_epochs == old.partition_epochs
    assert group.state is ConsumerGroupState.STABLE
    # The members go on heartbeating at their epochs, nothing moves, nothing is written.
    written = len(log.records())
    for m, (epoch, owned) in state.items():
        r = fresh.heartbeat(m, epoch, owned)
        assert r.error is E.none and r.member_epoch == epoch
    assert len(log.records()) == written


def test_a_member_that_leaves_is_tombstoned_and_stays_gone_after_a_load() -> None:
    log, node, _ = two_member_group()
    assert node.heartbeat("b", -1).error is E.none
    tombstones = [decode_consumer_group_record(k, v) for k, v in log.records()[-8:] if v is None]
    assert [type(r).__name__ for r in tombstones] == [
        "ConsumerGroupCurrentMemberAssignmentRecord",
        "ConsumerGroupTargetAssignmentMemberRecord",
        "ConsumerGroupMemberMetadataRecord",
    ]
    fresh = Node(log, topics=node.h.metadata)
    fresh.load()
    group = fresh.coord.group("g")
    assert group is not None and set(group.members) == {"a"}
    assert group.group_epoch == node.coord.group("g").group_epoch  # type: ignore[union-attr]


def test_a_deleted_group_is_tombstoned_and_not_loaded() -> None:
    log, node, state = two_member_group()
    for m in state:
        assert node.heartbeat(m, -1).error is E.none
    assert node.coord.delete_group("g") is None
    last = [decode_consumer_group_record(k, v) for k, v in log.records()[-3:]]
    assert last == [
        ConsumerGroupTargetAssignmentMetadataRecord("g", None),
        ConsumerGroupPartitionMetadataRecord("g", None),
        ConsumerGroupMetadataRecord("g", None),
    ]
    fresh = Node(log, topics=node.h.metadata)
    fresh.load()
    assert fresh.coord.group("g") is None


def test_loaded_members_that_miss_their_heartbeats_expire() -> None:
    log, node, state = two_member_group()
    fresh = Node(log, topics=node.h.metadata)
    fresh.h.advance(10_000)  # time before the load does not count
    fresh.load()
    group = fresh.coord.group("g")
    assert group is not None and group.num_members == 2
    fresh.h.advance(SESSION_MS - 100)
    epoch, owned = state["a"]
    assert fresh.heartbeat("a", epoch, owned).error is E.none  # a keeps its session
    fresh.h.advance(200)
    assert set(group.members) == {"a"}  # b's session (started at the load) expired
    # Its fencing was written: a third coordinator loads the group without b.
    third = Node(log, topics=node.h.metadata)
    third.load()
    reloaded = third.coord.group("g")
    assert reloaded is not None and set(reloaded.members) == {"a"}


def test_unload_drops_the_partitions_groups_and_their_timers() -> None:
    _, node, _ = two_member_group()
    assert len(node.coord.timer) == 2
    partition = node.h.manager.partition_for("g")
    node.h.manager.remove_groups_for_partition(
        partition, node.classic.on_group_unloaded, node.classic.on_consumer_groups_unloaded
    )
    assert node.coord.group("g") is None
    assert len(node.coord.timer) == 0


def test_a_heartbeat_that_changes_the_group_is_answered_after_its_write() -> None:
    log = InMemoryGroupLog()
    node = Node(log)
    node.h.metadata.create_topic("t", 2, 1, {})
    log.hold = True
    answers: list[ConsumerGroupHeartbeatResult] = []
    params = ConsumerGroupHeartbeatParams(
        group_id="g",
        member_id="a",
        member_epoch=0,
        rebalance_timeout_ms=10_000,
        subscribed_topic_names=("t",),
        owned_topic_partitions=(),
    )
    node.coord.heartbeat(params, answers.append)
    assert answers == [] and len(log.waiting) == 1
    log.complete()
    assert len(answers) == 1 and answers[0].error is E.none and answers[0].member_epoch == 1
    # A failed write is answered with the error the client rediscovers the coordinator on.
    node.coord.heartbeat(
        ConsumerGroupHeartbeatParams(
            group_id="g",
            member_id="b",
            member_epoch=0,
            rebalance_timeout_ms=10_000,
            subscribed_topic_names=("t",),
            owned_topic_partitions=(),
        ),
        answers.append,
    )
    log.complete(E.not_leader_or_follower)
    assert answers[-1].error is E.not_coordinator


def test_a_member_loaded_while_revoking_gets_its_rebalance_timeout_again() -> None:
    log = InMemoryGroupLog()
    node = Node(log)
    node.h.metadata.create_topic("t", 4, 1, {})
    a = node.heartbeat("a", 0, rebalance_timeout_ms=2000)
    assert a.member_epoch == 1 and sum(len(p) for p in a.assignment.values()) == 4
    node.heartbeat("b", 0)
    a2 = node.heartbeat("a", 1, dict(a.assignment))  # asked to give two partitions up
    group = node.coord.group("g")
    assert group is not None
    assert group.members["a"].state is MemberState.UNREVOKED_PARTITIONS, a2
    fresh = Node(log, topics=node.h.metadata)
    fresh.load()
    loaded = fresh.coord.group("g")
    assert loaded is not None
    assert loaded.members["a"].state is MemberState.UNREVOKED_PARTITIONS
    assert fresh.coord.timer.is_scheduled(("rebalance-timeout", "g", "a"))
    # a never revokes: fenced at its rebalance timeout (from the load), b takes over.
    fresh.h.advance(1999)
    assert "a" in loaded.members
    fresh.h.advance(2)
    assert set(loaded.members) == {"b"}


def test_a_static_member_that_left_for_a_while_is_loaded_with_its_epoch() -> None:
    log = InMemoryGroupLog()
    node = Node(log)
    node.h.metadata.create_topic("t", 2, 1, {})
    r = node.heartbeat("a", 0, instance_id="i-a")
    assert r.error is E.none
    assert node.heartbeat("a", -2, instance_id="i-a").error is E.none
    fresh = Node(log, topics=node.h.metadata)
    fresh.load()
    loaded = fresh.coord.group("g")
    assert loaded is not None
    member = loaded.members["a"]
    assert (member.member_epoch, member.instance_id) == (-2, "i-a")
    assert loaded.static_member("i-a") is member
    # It comes back under a new member id and takes its place.
    back = fresh.heartbeat("a2", 0, instance_id="i-a")
    assert back.error is E.none and set(loaded.members) == {"a2"}
