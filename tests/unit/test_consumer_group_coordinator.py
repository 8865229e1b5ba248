"""The KIP-848 consumer group coordinator on the manual clock: joins, convergence,
revocation before assignment, session and rebalance timeouts, leaves, errors, commits.

``Member`` plays a well-behaved client: it reports what it owns on every heartbeat and
takes any assignment it is sent at once (revoking what is no longer there). After every
heartbeat the test checks the invariant that matters: no partition is owned by two
members at the same time.
"""

from __future__ import annotations

import itertools
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from broker.group import GroupConfig, GroupCoordinator, JoinGroupParams
from broker.group.consumer import (
    ConsumerGroupConfig,
    ConsumerGroupCoordinator,
    ConsumerGroupHeartbeatParams,
    ConsumerGroupHeartbeatResult,
    ConsumerGroupState,
    MemberState,
    RangeAssignor,
    TopicMetadata,
    UniformAssignor,
)
from broker.group.consumer.partition_assignor import GroupSpec, MemberSubscriptionAndAssignment
from tests.helpers.group_harness import Box, Harness

E = ErrorCode
SESSION_MS = 3000
INTERVAL_MS = 500


class World:
    def __init__(self, partitions: int = 6, **config: Any) -> None:
        self.h = Harness()
        self.h.metadata.register_broker(0, "127.0.0.1", 9092)
        self.topic = self.h.metadata.create_topic("t", partitions, 1, {})
        cfg = {
            "group_consumer_session_timeout_ms": SESSION_MS,
            "group_consumer_min_session_timeout_ms": 1000,
            "group_consumer_heartbeat_interval_ms": INTERVAL_MS,
            "group_consumer_min_heartbeat_interval_ms": 100,
            **config,
        }
        ids = itertools.count(1)
        self.coord = ConsumerGroupCoordinator(
            ConsumerGroupConfig(**cfg),
            self.h.scheduler,
            self.h.metadata,
            self.h.manager,
            lambda: f"generated-{next(ids)}",
        )
        self.classic = GroupCoordinator(
            GroupConfig(), self.h.heartbeat, self.h.rebalance, self.h.manager, self.coord
        )
        self.members: list[Member] = []

    def member(self, name: str, **kw: Any) -> Member:
        m = Member(self, name, **kw)
        self.members.append(m)
        return m

    def check_exclusive(self) -> None:
        seen: dict[tuple[uuid.UUID, int], str] = {}
        for m in self.members:
            for tp in m.owned_set():
                assert tp not in seen, f"{tp} owned by {seen[tp]} and {m.member_id}"
                seen[tp] = m.member_id

    def round(self, members: list[Member] | None = None) -> None:
        for m in members if members is not None else self.members:
            if m.active:
                m.heartbeat()

    def converge(self, rounds: int = 10) -> None:
        for _ in range(rounds):
            self.round()
        group = self.coord.group("g")
        assert group is not None
        assert group.state is ConsumerGroupState.STABLE, group.state

    @property
    def group(self) -> Any:
        return self.coord.group("g")


class Member:
    def __init__(
        self,
        world: World,
        member_id: str,
        *,
        topics: tuple[str, ...] = ("t",),
        assignor: str | None = None,
        instance_id: str | None = None,
        rebalance_ms: int = 10_000,
        revokes: bool = True,
    ) -> None:
        self.world = world
        self.member_id = member_id
        self.topics = topics
        self.assignor = assignor
        self.instance_id = instance_id
        self.rebalance_ms = rebalance_ms
        self.revokes = revokes
        self.epoch = 0
        self.owned: dict[uuid.UUID, frozenset[int]] = {}
        self.active = True
        self.last: ConsumerGroupHeartbeatResult | None = None

    def owned_set(self) -> set[tuple[uuid.UUID, int]]:
        return {(t, p) for t, ps in self.owned.items() for p in ps}

    def count(self) -> int:
        return len(self.owned_set())

    def send(self, **kw: Any) -> ConsumerGroupHeartbeatResult:
        joining = self.epoch == 0
        params = ConsumerGroupHeartbeatParams(
            group_id="g",
            member_id=self.member_id,
            member_epoch=self.epoch,
            instance_id=self.instance_id,
            rebalance_timeout_ms=self.rebalance_ms if joining else -1,
            subscribed_topic_names=self.topics if joining else None,
            server_assignor=self.assignor,
            owned_topic_partitions=tuple((t, tuple(sorted(ps))) for t, ps in self.owned.items()),
        )
        if kw:
            params = ConsumerGroupHeartbeatParams(**{**_fields(params), **kw})
        result = self.world.coord.consumer_group_heartbeat(params)
        self.last = result
        return result

    def heartbeat(self, **kw: Any) -> ConsumerGroupHeartbeatResult:
        result = self.send(**kw)
        if result.error is E.none:
            self.epoch = result.member_epoch
            if result.assignment is not None:
                new = dict(result.assignment)
                if self.revokes:
                    self.owned = new
                else:  # takes new partitions, never gives one back
                    merged = {t: ps | new.get(t, frozenset()) for t, ps in self.owned.items()}
                    merged.update({t: ps for t, ps in new.items() if t not in merged})
                    self.owned = merged
        self.world.check_exclusive()
        return result


def _fields(params: ConsumerGroupHeartbeatParams) -> dict[str, Any]:
    return {name: getattr(params, name) for name in params.__slots__}


# ----------------------------------------------------------------------- joins
def test_first_member_joins_and_gets_every_partition() -> None:
    w = World()
    a = w.member("a")
    r = a.heartbeat()
    assert r.error is E.none
    assert r.member_id == "a"
    assert r.member_epoch == 1
    assert r.heartbeat_interval_ms == INTERVAL_MS
    assert a.count() == 6
    assert w.group.state is ConsumerGroupState.STABLE
    assert (w.group.group_epoch, w.group.assignment_epoch) == (1, 1)
    # A lightweight heartbeat with nothing new carries no assignment.
    r = a.heartbeat()
    assert r.error is E.none and r.assignment is None and r.member_epoch == 1


def test_v0_member_id_is_generated_by_the_broker() -> None:
    w = World()
    r = w.coord.consumer_group_heartbeat(
        ConsumerGroupHeartbeatParams(
            group_id="g",
            member_id="",
            member_epoch=0,
            api_version=0,
            rebalance_timeout_ms=5000,
            subscribed_topic_names=("t",),
            owned_topic_partitions=(),
        )
    )
    assert r.error is E.none and r.member_id == "generated-1"
    # v1: the client generates it; an empty one is INVALID_REQUEST.
    r = w.coord.consumer_group_heartbeat(
        ConsumerGroupHeartbeatParams(
            group_id="g",
            member_id="",
            member_epoch=0,
            api_version=1,
            rebalance_timeout_ms=5000,
            subscribed_topic_names=("t",),
            owned_topic_partitions=(),
        )
    )
    assert r.error is E.invalid_request


def test_three_members_converge_over_six_partitions() -> None:
    w = World()
    members = [w.member(n) for n in "abc"]
    w.converge()
    assert sorted(m.count() for m in members) == [2, 2, 2]
    assert set().union(*(m.owned_set() for m in members)) == {
        (w.topic.topic_id, p) for p in range(6)
    }
    assert {m.epoch for m in members} == {w.group.group_epoch}
    assert all(m.state is MemberState.STABLE for m in w.group.members.values())


def test_a_fourth_member_gets_partitions_only_once_they_are_revoked() -> None:
    w = World()
    first = [w.member(n) for n in "abc"]
    w.converge()
    before = {m.member_id: m.owned_set() for m in first}
    d = w.member("d")
    r = d.heartbeat()
    # Everything is still held by a, b or c: d waits for them to release.
    assert r.error is E.none and d.count() == 0
    assert w.group.members["d"].state is MemberState.UNRELEASED_PARTITIONS
    assert w.group.state is ConsumerGroupState.RECONCILING
    w.converge()  # check_exclusive ran after every single heartbeat
    assert sorted(m.count() for m in w.members) == [1, 1, 2, 2]
    assert d.count() == 1 or d.count() == 2
    for m in first:  # sticky: the others kept what they keep
        assert m.owned_set() <= before[m.member_id]


def test_session_expiry_fences_the_member_and_reassigns_its_partitions() -> None:
    w = World()
    a, b = w.member("a"), w.member("b")
    w.converge()
    assert (a.count(), b.count()) == (3, 3)
    b.active, b.owned = False, {}  # the process died
    elapsed = 0
    while elapsed <= SESSION_MS:
        w.h.advance(INTERVAL_MS, step=INTERVAL_MS)
        elapsed += INTERVAL_MS
        w.round()
    assert "b" not in w.group.members
    w.converge()
    assert a.count() == 6
    assert b.heartbeat().error is E.unknown_member_id


def test_a_member_that_does_not_revoke_is_fenced_after_its_rebalance_timeout() -> None:
    w = World()
    a = w.member("a", rebalance_ms=2000, revokes=False)
    a.heartbeat()
    assert a.count() == 6
    b = w.member("b")
    b.heartbeat()
    a.heartbeat()  # asked to revoke 3: it keeps reporting all 6
    assert w.group.members["a"].state is MemberState.UNREVOKED_PARTITIONS
    for _ in range(3):
        w.h.advance(INTERVAL_MS, step=INTERVAL_MS)
        w.round()
        assert b.count() == 0  # never given a partition a still holds
    w.h.advance(1000, step=INTERVAL_MS)
    assert "a" not in w.group.members
    assert a.heartbeat().error is E.unknown_member_id
    a.active = False
    a.owned = {}
    w.converge()
    assert b.count() == 6


def test_leave_with_epoch_minus_one_hands_the_partitions_on_at_once() -> None:
    w = World()
    a, b = w.member("a"), w.member("b")
    w.converge()
    epoch = w.group.group_epoch
    r = b.send(member_epoch=-1)
    assert (r.error, r.member_id, r.member_epoch) == (E.none, "b", -1)
    b.active, b.owned = False, {}
    assert w.group.group_epoch == epoch + 1
    a.heartbeat()
    assert a.count() == 6
    assert not w.coord.timer.is_scheduled(("session-timeout", "g", "b"))


def test_a_static_member_that_leaves_with_minus_two_comes_back_to_its_partitions() -> None:
    w = World()
    a, b = w.member("a", instance_id="ia"), w.member("b")
    w.converge()
    kept = a.owned_set()
    assert a.send(member_epoch=-2).member_epoch == -2
    a.active, a.owned = False, {}  # the process stopped
    # Its partitions stay its own while it is away.
    b.heartbeat()
    assert b.count() == 3
    again = w.member("a2", instance_id="ia")
    again.heartbeat()
    w.converge()
    assert again.owned_set() == kept
    # A second claim of a held instance id is refused.
    other = w.member("a3", instance_id="ia")
    assert other.heartbeat().error is E.unreleased_instance_id


# ---------------------------------------------------------------------- errors
def test_unknown_member_and_unknown_group() -> None:
    w = World()
    w.member("a").heartbeat()
    ghost = Member(w, "ghost")
    ghost.epoch = 1
    assert ghost.heartbeat().error is E.unknown_member_id
    r = w.coord.consumer_group_heartbeat(
        ConsumerGroupHeartbeatParams(group_id="nope", member_id="x", member_epoch=3)
    )
    assert r.error is E.group_id_not_found


def test_fenced_member_epoch() -> None:
    w = World()
    a = w.member("a")
    a.heartbeat()
    assert a.send(member_epoch=5).error is E.fenced_member_epoch
    w.member("b").heartbeat()
    a.heartbeat()
    a.heartbeat()
    assert a.epoch == 2
    # Its previous epoch with a subset of its partitions is accepted (a lost response),
    # an older one is not.
    assert a.send(member_epoch=1).error is E.none
    assert a.send(member_epoch=1, owned_topic_partitions=None).error is E.fenced_member_epoch


def test_request_validation() -> None:
    w = World()
    base = {"group_id": "g", "member_id": "m", "member_epoch": 0, "owned_topic_partitions": ()}
    cases = [
        ({"rebalance_timeout_ms": 1000}, E.invalid_request),  # no subscription
        ({"subscribed_topic_names": ("t",)}, E.invalid_request),  # no rebalance timeout
        (
            {"rebalance_timeout_ms": 1000, "subscribed_topic_names": ("t",), "member_epoch": -3},
            E.invalid_request,
        ),
        (
            {
                "rebalance_timeout_ms": 1000,
                "subscribed_topic_names": ("t",),
                "subscribed_topic_regex": "t(",
            },
            E.invalid_regular_expression,
        ),
        (
            {
                "rebalance_timeout_ms": 1000,
                "subscribed_topic_names": ("t",),
                "server_assignor": "sticky",
            },
            E.unsupported_assignor,
        ),
        (
            {"rebalance_timeout_ms": 1000, "subscribed_topic_names": ("t",), "group_id": ""},
            E.invalid_request,
        ),
    ]
    for extra, error in cases:
        r = w.coord.consumer_group_heartbeat(ConsumerGroupHeartbeatParams(**{**base, **extra}))
        assert r.error is error, (extra, r)
        assert r.error_message
    assert w.coord.group("g") is None  # nothing refused left a trace


def test_group_max_size() -> None:
    w = World(group_consumer_max_size=2)
    w.member("a").heartbeat()
    w.member("b").heartbeat()
    c = w.member("c")
    assert c.heartbeat().error is E.group_max_size_reached
    assert w.group.num_members == 2


def test_classic_and_consumer_groups_do_not_share_an_id() -> None:
    w = World()
    w.member("a").heartbeat()
    box = Box()

    params = JoinGroupParams(
        group_id="g",
        member_id="",
        group_instance_id=None,
        require_known_member_id=True,
        client_id="c",
        client_host="/127.0.0.1",
        rebalance_timeout_ms=1000,
        session_timeout_ms=10000,
        # Not the consumer protocol: no classic member of a consumer group (online
        # migration serves only protocol type "consumer": test_consumer_group_migration).
        protocol_type="connect",
        protocols=(("range", b""),),
    )
    w.classic.handle_join_group(params, box)
    assert box.result.error is E.inconsistent_group_protocol
    # A classic group with members: a KIP-848 member cannot take its id.
    w.h.coord.handle_join_group(
        JoinGroupParams(
            **{
                **{f: getattr(params, f) for f in params.__dataclass_fields__},
                "group_id": "classic",
                "require_known_member_id": False,
            }
        ),
        Box(),
    )
    w.h.advance(10)
    r = w.coord.consumer_group_heartbeat(
        ConsumerGroupHeartbeatParams(
            group_id="classic",
            member_id="m",
            member_epoch=0,
            rebalance_timeout_ms=1000,
            subscribed_topic_names=("t",),
            owned_topic_partitions=(),
        )
    )
    assert r.error is E.group_id_not_found


# --------------------------------------------------------------- offset commits
def test_offset_commits_are_checked_against_the_member_epoch() -> None:
    w = World()
    a = w.member("a")
    a.heartbeat()

    def commit(member_id: str, epoch: int) -> ErrorCode:
        box = Box()
        w.classic.handle_commit_offsets("g", member_id, None, epoch, {("t", 0): (42, -1, "")}, box)
        errors = box.result
        return next(iter(errors.values()))  # type: ignore[no-any-return]

    assert commit("a", 1) is E.none
    (fetched,) = w.h.manager.get_offsets("g", [("t", 0)]).values()
    assert fetched.offset == 42
    w.member("b").heartbeat()
    a.heartbeat()
    a.heartbeat()
    assert a.epoch == 2
    assert commit("a", 1) is E.stale_member_epoch
    assert commit("a", 3) is E.stale_member_epoch
    assert commit("nobody", 2) is E.unknown_member_id
    assert w.coord.validate_offset_fetch("g", "a", 2) is None
    assert w.coord.validate_offset_fetch("g", "a", 1) is E.stale_member_epoch
    assert w.coord.validate_offset_fetch("g", "x", 2) is E.unknown_member_id
    assert w.coord.validate_offset_fetch("g", None, -1) is None


# ------------------------------------------------------------------- assignors
def _spec(subs: dict[str, tuple[str, ...]], parts: dict[str, int], prev: Any = None) -> GroupSpec:
    ids = {name: uuid.UUID(int=i + 1) for i, name in enumerate(sorted(parts))}
    return GroupSpec(
        members={
            m: MemberSubscriptionAndAssignment(
                frozenset(ids[t] for t in topics), (prev or {}).get(m, {})
            )
            for m, topics in subs.items()
        },
        topics={ids[t]: TopicMetadata(ids[t], t, n) for t, n in parts.items()},
    )


def test_uniform_assignor_balances_and_is_sticky() -> None:
    spec = _spec({"a": ("x", "y"), "b": ("x", "y"), "c": ("x", "y")}, {"x": 5, "y": 5})
    first = UniformAssignor().assign(spec)
    counts = sorted(sum(len(ps) for ps in a.values()) for a in first.values())
    assert counts == [3, 3, 4]
    spec2 = _spec(
        {"a": ("x", "y"), "b": ("x", "y"), "c": ("x", "y"), "d": ("x", "y")},
        {"x": 5, "y": 5},
        prev=first,
    )
    second = UniformAssignor().assign(spec2)
    assert sorted(sum(len(ps) for ps in a.values()) for a in second.values()) == [2, 2, 3, 3]
    for m in "abc":
        for t, ps in second[m].items():
            assert ps <= first[m].get(t, frozenset())
    # Heterogeneous: only b can take y.
    het = UniformAssignor().assign(_spec({"a": ("x",), "b": ("x", "y")}, {"x": 4, "y": 2}))
    assert sum(len(p) for p in het["a"].values()) == 3
    assert sum(len(p) for p in het["b"].values()) == 3


def test_range_assignor_gives_contiguous_ranges() -> None:
    out = RangeAssignor().assign(_spec({"a": ("x",), "b": ("x",)}, {"x": 5}))
    x = uuid.UUID(int=1)
    assert out["a"][x] == frozenset({0, 1, 2}) and out["b"][x] == frozenset({3, 4})


def test_members_may_choose_the_range_assignor() -> None:
    w = World()
    members = [w.member(n, assignor="range") for n in "ab"]
    w.converge()
    t = w.topic.topic_id
    assert members[0].owned == {t: frozenset({0, 1, 2})}
    assert members[1].owned == {t: frozenset({3, 4, 5})}


def test_new_partitions_bump_the_group_epoch() -> None:
    w = World()
    a, b = w.member("a"), w.member("b")
    w.converge()
    epoch = w.group.group_epoch
    w.h.metadata.create_partitions("t", 8)
    w.converge()
    assert w.group.group_epoch == epoch + 1
    assert a.count() + b.count() == 8


def test_only_an_empty_consumer_group_can_be_deleted() -> None:
    w = World()
    a = w.member("a")
    a.heartbeat()
    assert w.coord.delete_group("g") is E.non_empty_group
    a.send(member_epoch=-1)
    assert w.coord.delete_group("g") is None
    assert not w.coord.is_consumer_group("g")


def test_uniform_assignor_moves_no_more_than_balance_needs() -> None:
    names = [f"m{i:02d}" for i in range(10)]
    first = UniformAssignor().assign(_spec({m: ("x",) for m in names}, {"x": 100}))
    assert all(sum(len(p) for p in a.values()) == 10 for a in first.values())
    second = UniformAssignor().assign(
        _spec({m: ("x",) for m in [*names, "new"]}, {"x": 100}, prev=first)
    )
    x = uuid.UUID(int=1)
    lost = {m: len(first[m][x] - second[m].get(x, frozenset())) for m in names}
    assert len(second["new"][x]) == 9
    assert sum(lost.values()) == 9 and max(lost.values()) == 1  # one from each of nine
    assert all(second[m][x] <= first[m][x] for m in names)
