"""Kafka 4's online migration between classic and consumer groups, on the manual clock
(GroupMetadataManagerTest's testUpgrade*, testDowngrade*, testClassicGroup*ToConsumerGroup*):
a KIP-848 member joining a classic group with members converts it, the classic members
stay as classic members of the consumer group (JoinGroup/SyncGroup/Heartbeat/LeaveGroup)
and give partitions up by rejoining; when the last KIP-848 member leaves the group goes
back to classic and rebalances; the policy can forbid either way; the conversions are
written as records and survive a failover.

``Classic`` plays an eager consumer (aiokafka's ``range``): it gives everything up before
it rejoins and, as the leader of a classic group, assigns round-robin.
"""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from broker.group import JoinGroupParams
from broker.group.consumer import ConsumerGroupState
from broker.group.consumer.consumer_group_member import ClassicMemberMetadata
from broker.group.consumer.consumer_group_records import (
    ConsumerGroupMemberMetadataRecord,
    MemberSubscription,
    decode_consumer_group_record,
    encode_consumer_group_record,
)
from broker.group.consumer_protocol import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from broker.group.group_log import InMemoryGroupLog
from broker.group.group_state import GroupState
from tests.helpers.group_harness import Box
from tests.unit.test_consumer_group_coordinator import Member, World
from tests.unit.test_consumer_group_records import Node

E = ErrorCode
CLASSIC_SESSION_MS = 10_000


class Classic:
    """An eager classic consumer of topic ``t`` in group ``g``."""

    def __init__(
        self, world: World, protocol_type: str = "consumer", instance_id: str | None = None
    ) -> None:
        self.w = world
        self.protocol_type = protocol_type
        self.instance_id = instance_id
        self.member_id = ""
        self.generation = -1
        self.owned: set[int] = set()
        self.join_box: Box | None = None

    def join(self) -> Box:
        self.owned = set()  # eager: everything given up before a rejoin
        box = Box()
        self.w.classic.handle_join_group(
            JoinGroupParams(
                group_id="g",
                member_id=self.member_id,
                group_instance_id=self.instance_id,
                session_timeout_ms=CLASSIC_SESSION_MS,
                rebalance_timeout_ms=CLASSIC_SESSION_MS,
                protocol_type=self.protocol_type,
                protocols=(("range", encode_subscription(["t"])),),
                client_id="aiokafka",
                client_host="/127.0.0.1",
            ),
            box,
        )
        self.join_box = box
        return box

    def on_joined(self) -> Any:
        assert self.join_box is not None and self.join_box.done
        r = self.join_box.result
        assert r.error is E.none, r
        self.member_id, self.generation = r.member_id, r.generation_id
        return r

    def sync(self, assignments: dict[str, bytes] | None = None) -> Any:
        box = Box()
        self.w.classic.handle_sync_group(
            "g", self.generation, self.member_id, self.instance_id, assignments or {}, box
        )
        r = box.result
        if r.error is E.none:
            decoded = decode_assignment(r.assignment)
            assert decoded is not None
            self.owned = set(decoded.get("t", []))
        return r

    def heartbeat(self) -> ErrorCode:
        return self.w.classic.handle_heartbeat(
            "g", self.member_id, self.instance_id, self.generation
        )

    def rejoin_and_sync(self) -> None:
        box = self.join()
        assert box.done, "a classic member of a consumer group is answered at once"
        self.on_joined()
        assert self.sync().error is E.none


def classic_group(w: World, n: int = 2, static: bool = False) -> list[Classic]:
    """A Stable classic group of ``n`` eager members splitting ``t`` round-robin."""
    members = [Classic(w, instance_id=f"i{i}" if static else None) for i in range(n)]
    boxes = [m.join() for m in members]
    w.h.advance_until(lambda: all(b.done for b in boxes))  # the initial rebalance delay
    results = [m.on_joined() for m in members]
    leader = next(r for r in results if r.leader_id == r.member_id)
    ids = sorted(m.member_id for m in members)
    plan = {mid: [p for p in range(6) if p % len(ids) == i] for i, mid in enumerate(ids)}
    for m in members:
        assignments = (
            {mid: encode_assignment({"t": ps}) for mid, ps in plan.items()}
            if m.member_id == leader.leader_id
            else {}
        )
        box = Box()
        w.classic.handle_sync_group("g", m.generation, m.member_id, m.instance_id, assignments, box)
        m.join_box = box
    for m in members:
        assert m.join_box is not None
        decoded = decode_assignment(m.join_box.result.assignment)
        assert decoded is not None
        m.owned = set(decoded["t"])
    return members


def owners(classics: list[Classic], members: list[Member], topic_id: uuid.UUID) -> list[int]:
    """Every partition held, once per holder (a partition twice is a double owner)."""
    held = [p for c in classics for p in c.owned]
    held += [p for m in members for p in m.owned.get(topic_id, frozenset())]
    return sorted(held)


def roll(w: World, classics: list[Classic], members: list[Member], rounds: int = 6) -> None:
    """Everybody heartbeats; classic members told to rejoin do so at once."""
    for _ in range(rounds):
        for c in classics:
            if c.heartbeat() is E.rebalance_in_progress:
                c.rejoin_and_sync()
        for m in members:
            assert m.heartbeat().error is E.none
        held = owners(classics, members, w.topic.topic_id)
        assert len(held) == len(set(held)), f"a partition with two owners: {held}"


def upgraded(w: World) -> tuple[list[Classic], Member]:
    classics = classic_group(w)
    c = w.member("c")
    assert c.heartbeat().error is E.none
    roll(w, classics, [c])
    return classics, c


# ------------------------------------------------------------------- upgrade
def test_upgrade_converts_a_classic_group_with_members() -> None:
    w = World()
    classics = classic_group(w)
    generation = classics[0].generation
    assert w.h.manager.get_group("g") is not None and w.coord.group("g") is None

    c = w.member("c")
    r = c.heartbeat()
    assert r.error is E.none
    group = w.coord.group("g")
    assert group is not None
    # The classic members are classic members of the consumer group with their
    # assignment; the group epoch bumps past the generation for the new member.
    assert group.group_epoch == generation + 1
    for m in classics:
        member = group.members[m.member_id]
        assert member.use_classic_protocol and member.member_epoch == generation
        assert member.classic_member_metadata is not None
        assert member.classic_member_metadata.session_timeout_ms == CLASSIC_SESSION_MS
        held = member.assigned_partitions[w.topic.topic_id]
        assert held == frozenset(m.owned)
    assert c.count() == 0  # nothing is free yet: the classic members hold it all
    # The classic group is left Empty, holding the offsets.
    classic = w.h.manager.get_group("g")
    assert classic is not None and classic.is_in(GroupState.EMPTY)

    roll(w, classics, [c])
    assert sorted(len(m.owned) for m in classics) == [2, 2] and c.count() == 2
    assert owners(classics, [c], w.topic.topic_id) == list(range(6))
    assert w.group.state is ConsumerGroupState.STABLE
    for m in classics:
        assert m.generation == w.group.group_epoch  # generation = member epoch


def test_a_classic_member_is_told_to_rejoin_until_it_gives_partitions_up() -> None:
    w = World()
    classics = classic_group(w)
    c = w.member("c")
    c.heartbeat()
    first = classics[0]
    assert first.heartbeat() is E.rebalance_in_progress
    # SyncGroup at the old generation: a rebalance is in progress.
    assert first.sync().error is E.rebalance_in_progress
    first.rejoin_and_sync()
    assert first.heartbeat() is E.none


def test_upgrade_answers_parked_classic_joins_with_rebalance_in_progress() -> None:
    w = World()
    classics = classic_group(w)
    parked = classics[0].join()  # a rebalance of the classic group begins
    assert not parked.done
    w.member("c").heartbeat()
    assert parked.result.error is E.rebalance_in_progress


def test_upgrade_refused_by_policy_or_protocol_type() -> None:
    w = World(group_consumer_migration_policy="downgrade")
    classic_group(w)
    assert w.member("c").heartbeat().error is E.group_id_not_found
    assert w.coord.group("g") is None

    w = World()
    boxes = [Classic(w, protocol_type="connect").join() for _ in range(2)]
    w.h.advance_until(lambda: all(b.done for b in boxes))
    assert w.member("c").heartbeat().error is E.group_id_not_found


# ------------------------------------------------------- classic members' APIs
def test_classic_member_errors_are_kafkas() -> None:
    w = World()
    classics, c = upgraded(w)
    m = classics[0]
    assert w.classic.handle_heartbeat("g", m.member_id, None, m.generation - 1) is (
        E.illegal_generation
    )
    assert w.classic.handle_heartbeat("g", "nobody", None, m.generation) is E.unknown_member_id
    # A KIP-848 member cannot use the classic APIs.
    assert w.classic.handle_heartbeat("g", "c", None, c.epoch) is E.unknown_member_id
    box = Box()
    w.classic.handle_sync_group(
        "g", m.generation, m.member_id, None, {}, box, protocol_name="roundrobin"
    )
    assert box.result.error is E.inconsistent_group_protocol
    # A JoinGroup of another protocol type cannot join a consumer group.
    assert Classic(w, protocol_type="connect").join().result.error is (
        E.inconsistent_group_protocol
    )


def test_a_new_classic_member_joins_a_consumer_group() -> None:
    w = World()
    a = w.member("a")
    w.converge()
    box = Box()
    params = JoinGroupParams(
        group_id="g",
        member_id="",
        session_timeout_ms=CLASSIC_SESSION_MS,
        rebalance_timeout_ms=CLASSIC_SESSION_MS,
        protocol_type="consumer",
        protocols=(("range", encode_subscription(["t"])),),
        require_known_member_id=True,
    )
    w.classic.handle_join_group(params, box)
    assert box.result.error is E.member_id_required
    k = Classic(w)
    k.member_id = box.result.member_id
    k.rejoin_and_sync()
    roll(w, [k], [a])
    assert len(k.owned) == 3 and a.count() == 3
    # Its session timeout is the one of its JoinGroup; silent, it is fenced.
    for _ in range(5):
        w.h.advance(2500)
        a.heartbeat()
    assert k.member_id not in w.group.members
    w.round()
    assert a.count() == 6


def test_offset_commits_of_classic_members_are_checked_against_the_generation() -> None:
    w = World()
    classics, _ = upgraded(w)
    m = classics[0]
    assert w.coord.validate_offset_commit("g", m.member_id, m.generation) is None
    assert w.coord.validate_offset_commit("g", m.member_id, m.generation - 1) is (
        E.illegal_generation
    )


def test_classic_leave_removes_the_member_and_bumps_the_epoch() -> None:
    w = World()
    classics, c = upgraded(w)
    epoch = w.group.group_epoch
    left = w.classic.handle_leave_group("g", [(classics[0].member_id, None), ("ghost", None)])
    assert [r.error for r in left.members] == [E.none, E.unknown_member_id]
    assert w.group.group_epoch == epoch + 1 and w.group.num_members == 2
    classics[0].owned = set()
    roll(w, classics[1:], [c])
    assert len(classics[1].owned) == 3 and c.count() == 3


# ----------------------------------------------------------------- downgrade
def test_downgrade_when_the_last_consumer_member_leaves() -> None:
    w = World()
    classics, c = upgraded(w)
    epoch = w.group.group_epoch
    assert c.send(member_epoch=-1).error is E.none
    assert w.coord.group("g") is None
    group = w.h.manager.get_group("g")
    assert group is not None and group.is_in(GroupState.PREPARING_REBALANCE)
    assert group.generation_id == epoch and sorted(group.all_members) == sorted(
        m.member_id for m in classics
    )
    # The classic members hear of the rebalance and rejoin as in any classic group.
    for m in classics:
        assert m.heartbeat() is E.rebalance_in_progress
        m.join()
    for m in classics:
        m.on_joined()
    assert group.is_in(GroupState.COMPLETING_REBALANCE)
    assert classics[0].generation == epoch + 1


def test_downgrade_when_the_last_consumer_member_is_fenced() -> None:
    w = World()
    classics, c = upgraded(w)
    c.active = False
    for _ in range(4):
        w.h.advance(1000)
        for m in classics:
            m.heartbeat()
    assert w.coord.group("g") is None
    group = w.h.manager.get_group("g")
    assert group is not None and group.size == 2


def test_no_downgrade_when_the_policy_says_upgrade_only() -> None:
    w = World(group_consumer_migration_policy="upgrade")
    classics, c = upgraded(w)
    c.send(member_epoch=-1)
    assert w.coord.group("g") is not None and w.group.num_members == 2
    roll(w, classics, [])
    assert sorted(len(m.owned) for m in classics) == [3, 3]


# ---------------------------------------------------------------- durability
def test_classic_member_metadata_is_written_as_tag_0() -> None:
    classic = ClassicMemberMetadata(45_000, (("range", b"\x00\x01"), ("roundrobin", b"")))
    sub = MemberSubscription(None, None, "c", "/h", ("t",), None, 1, None, classic)
    key, value = encode_consumer_group_record(ConsumerGroupMemberMetadataRecord("g", "m", sub))
    decoded = decode_consumer_group_record(key, value)
    assert isinstance(decoded, ConsumerGroupMemberMetadataRecord)
    assert decoded.value == sub


def test_an_upgraded_group_survives_a_failover() -> None:
    log = InMemoryGroupLog()
    node = Node(log)
    node.h.metadata.create_topic("t", 6, 1, {})
    w = World.__new__(World)  # the migration helpers over this node
    w.h, w.coord, w.classic, w.members = node.h, node.coord, node.classic, []
    w.topic = node.h.metadata.topics["t"]
    classics, _ = upgraded(w)
    epoch = w.group.group_epoch

    other = Node(log, topics=node.h.metadata)
    other.load()
    group = other.coord.group("g")
    assert group is not None and group.group_epoch == epoch
    for m in classics:
        member = group.members[m.member_id]
        assert member.use_classic_protocol and member.member_epoch == m.generation
    classic = other.h.manager.get_group("g")
    assert classic is None or classic.is_in(GroupState.EMPTY)


def test_a_downgraded_group_survives_a_failover() -> None:
    log = InMemoryGroupLog()
    node = Node(log)
    node.h.metadata.create_topic("t", 6, 1, {})
    w = World.__new__(World)
    w.h, w.coord, w.classic, w.members = node.h, node.coord, node.classic, []
    w.topic = node.h.metadata.topics["t"]
    classics, c = upgraded(w)
    c.send(member_epoch=-1)

    other = Node(log, topics=node.h.metadata)
    other.load()
    assert other.coord.group("g") is None
    group = other.h.manager.get_group("g")
    assert group is not None and sorted(group.all_members) == sorted(m.member_id for m in classics)


def test_the_embedded_consumer_protocol_round_trips() -> None:
    sub = decode_subscription(encode_subscription(["a", "b"]))
    assert sub is not None and sub.version == 0 and sub.topics == ("a", "b")
    assert decode_subscription(b"\x00\x00\x7f\xff\xff\xff") is None  # a huge count
    assert decode_assignment(encode_assignment({"t": [2, 0]}, 3)) == {"t": [0, 2]}
    assert decode_assignment(b"\x00") is None


# ------------------------------------------------------------------ timeouts
def test_a_classic_member_that_does_not_rejoin_is_fenced_after_its_rebalance_timeout() -> None:
    w = World()
    classics = classic_group(w)
    c = w.member("c")
    c.heartbeat()
    lazy, other = classics
    # Told to rejoin, it only heartbeats: the join timeout (its rebalance timeout, 10 s)
    # is not pushed back by its heartbeats, as its session timeout is.
    for _ in range(12):
        w.h.advance(1000)
        assert lazy.heartbeat() in (E.rebalance_in_progress, E.unknown_member_id)
        if other.heartbeat() is E.rebalance_in_progress:
            other.rejoin_and_sync()
        c.heartbeat()
    assert lazy.member_id not in w.group.members
    assert lazy.heartbeat() is E.unknown_member_id
    roll(w, [other], [c])
    assert len(other.owned) + c.count() == 6


def test_a_classic_member_that_does_not_sync_is_fenced_after_its_rebalance_timeout() -> None:
    w = World()
    classics, c = upgraded(w)
    quiet = classics[0]
    box = quiet.join()
    quiet.on_joined()  # joined, never syncs, but heartbeats
    assert box.done
    for _ in range(12):
        w.h.advance(1000)
        quiet.heartbeat()
        c.heartbeat()
    assert quiet.member_id not in w.group.members


def test_upgrade_refused_when_the_group_is_larger_than_a_consumer_group_may_be() -> None:
    w = World(group_consumer_max_size=2)
    classic_group(w, 2)
    # Two classic members fit, the third member does not: GROUP_MAX_SIZE_REACHED.
    assert w.member("c").heartbeat().error is E.group_max_size_reached
    w = World(group_consumer_max_size=1)
    classic_group(w, 2)
    assert w.member("c").heartbeat().error is E.group_id_not_found
    assert w.coord.group("g") is None


def test_upgrade_during_the_sync_phase_answers_the_parked_syncs() -> None:
    w = World()
    members = [Classic(w) for _ in range(2)]
    boxes = [m.join() for m in members]
    w.h.advance_until(lambda: all(b.done for b in boxes))
    results = [m.on_joined() for m in members]  # every member learns its id
    leader_id = results[0].leader_id
    follower = next(m for m in members if m.member_id != leader_id)
    parked = Box()
    w.classic.handle_sync_group("g", follower.generation, follower.member_id, None, {}, parked)
    assert not parked.done
    assert w.member("c").heartbeat().error is E.none
    assert parked.result.error is E.rebalance_in_progress
    assert {m.member_id for m in members} <= set(w.group.members)


# ------------------------------------------------------------------ static members
def test_static_members_roll_from_classic_to_consumer_under_their_instance_ids() -> None:
    w = World()
    classics = classic_group(w, static=True)
    first = classics[0]
    kept = frozenset(first.owned)
    # Its KIP-848 successor takes the instance id at once (no leave needed from a classic
    # member) and the partitions with it.
    new = w.member("new", instance_id="i0")
    assert new.heartbeat().error is E.none
    assert first.member_id not in w.group.members
    assert w.group.static_member("i0").member_id == "new"
    assert not w.group.members["new"].use_classic_protocol
    assert first.heartbeat() is E.fenced_instance_id
    roll(w, classics[1:], [new])
    assert new.owned[w.topic.topic_id] == kept
    # A classic static member rejoining under its own id is itself; under another one
    # it is fenced.
    other = classics[1]
    other.rejoin_and_sync()
    assert other.heartbeat() is E.none
    intruder = Classic(w, instance_id="i1")
    intruder.member_id = "intruder"
    assert intruder.join().result.error is E.fenced_instance_id
