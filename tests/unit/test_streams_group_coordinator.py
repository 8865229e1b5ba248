"""The streams group coordinator (KIP-1071) on the manual clock: the topology and its
statuses, internal topics, joins and convergence, revocation before a task moves,
session and rebalance timeouts, leaves, Kafka's request checks, offset commit checks,
and the records' replay.

``Member`` plays a well-behaved Kafka Streams member: it reports what it owns on every
heartbeat and takes any assignment at once (dropping what is no longer listed). After
every heartbeat the test checks what matters: no active task is owned by two members.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kio.schema.errors import ErrorCode

from broker.group.consumer.consumer_group_config import ConsumerGroupConfig
from broker.group.group_configs import GroupConfigManager, GroupConfigStore
from broker.group.streams.configured_topology import Status
from broker.group.streams.heartbeat import StreamsGroupHeartbeatParams, StreamsGroupHeartbeatResult
from broker.group.streams.streams_group import StreamsGroupState
from broker.group.streams.streams_group_config import StreamsGroupConfig
from broker.group.streams.streams_group_coordinator import StreamsGroupCoordinator
from broker.group.streams.streams_group_member import Endpoint, MemberState
from broker.group.streams.streams_group_records import decode_or_skip, replay_all
from broker.group.streams.streams_topology import StreamsTopology, Subtopology, TopicInfo
from broker.group.streams.tasks_tuple import TasksTuple, task_ids
from tests.helpers.group_harness import Harness

E = ErrorCode
SESSION_MS = 3000
INTERVAL_MS = 500

TOPOLOGY = StreamsTopology.of(
    1,
    [
        Subtopology(
            "0",
            source_topics=("input",),
            repartition_sink_topics=("app-repartition",),
            state_changelog_topics=(TopicInfo("app-store-changelog"),),
        ),
        Subtopology(
            "1",
            repartition_source_topics=(TopicInfo("app-repartition"),),
            state_changelog_topics=(TopicInfo("app-agg-changelog"),),
        ),
    ],
)


class NoConsumerGroups:
    def is_consumer_group(self, group_id: str) -> bool:
        return False


class World:
    def __init__(self, partitions: int = 4, standby: int = 0, topics: bool = True) -> None:
        self.h = Harness()
        self.h.metadata.register_broker(0, "127.0.0.1", 9092)
        if topics:
            self.h.metadata.create_topic("input", partitions, 1, {})
        config = StreamsGroupConfig(
            group_streams_session_timeout_ms=SESSION_MS,
            group_streams_min_session_timeout_ms=1000,
            group_streams_heartbeat_interval_ms=INTERVAL_MS,
            group_streams_min_heartbeat_interval_ms=100,
            group_streams_num_standby_replicas=standby,
        )
        configs = GroupConfigManager(GroupConfigStore(), ConsumerGroupConfig(), None, config)
        self.coord = StreamsGroupCoordinator(
            config, self.h.scheduler, self.h.metadata, self.h.manager, NoConsumerGroups(), configs
        )
        self.members: list[Member] = []

    def member(self, name: str, **kw: Any) -> Member:
        m = Member(self, name, **kw)
        self.members.append(m)
        return m

    def heartbeat(self, params: StreamsGroupHeartbeatParams) -> StreamsGroupHeartbeatResult:
        box: list[StreamsGroupHeartbeatResult] = []
        self.coord.heartbeat(params, box.append)
        (result,) = box
        for topic in result.internal_topics_to_create.values():  # as the handler does
            self.h.metadata.create_topic(topic.name, topic.num_partitions, 1, dict(topic.configs))
        return result

    def round(self) -> None:
        for m in self.members:
            if m.alive:
                m.heartbeat()
        self.check_exclusive()

    def converge(self, rounds: int = 8) -> None:
        for _ in range(rounds):
            self.round()
        assert self.group.state is StreamsGroupState.STABLE, self.group.state

    def check_exclusive(self) -> None:
        seen: dict[tuple[str, int], str] = {}
        for m in self.members:
            if not m.alive:  # a dead process runs nothing
                continue
            for task in task_ids(m.owned.active):
                assert task not in seen, f"{task} active on {seen[task]} and {m.name}"
                seen[task] = m.name

    @property
    def group(self) -> Any:
        return self.coord.group("app")


class Member:
    def __init__(self, world: World, name: str, process: str | None = None, **kw: Any) -> None:
        self.world = world
        self.name = name
        self.process = process or f"process-{name}"
        self.epoch = 0
        self.owned = TasksTuple()
        self.alive = True
        self.kw = kw
        self.last: StreamsGroupHeartbeatResult | None = None

    def params(self, **kw: Any) -> StreamsGroupHeartbeatParams:
        joining = self.epoch == 0
        owned = self.owned
        base = StreamsGroupHeartbeatParams(
            group_id="app",
            member_id=self.name,
            member_epoch=self.epoch,
            rebalance_timeout_ms=10_000 if joining else -1,
            topology=TOPOLOGY if joining else None,
            process_id=self.process if joining else None,
            active_tasks={s: tuple(p) for s, p in owned.active.items()},
            standby_tasks={s: tuple(p) for s, p in owned.standby.items()},
            warmup_tasks={},
            **self.kw,
        )
        return replace(base, **kw)

    def heartbeat(self, **kw: Any) -> StreamsGroupHeartbeatResult:
        result = self.world.heartbeat(self.params(**kw))
        self.last = result
        if result.error is E.none:
            self.epoch = result.member_epoch
            if result.assignment is not None:
                self.owned = result.assignment
        elif result.error in (E.fenced_member_epoch, E.unknown_member_id):
            self.epoch, self.owned = 0, TasksTuple()
        return result

    def count(self) -> int:
        return sum(len(ps) for ps in self.owned.active.values())


def test_the_first_member_creates_the_internal_topics_and_gets_every_task() -> None:
    w = World()
    a = w.member("a")
    first = a.heartbeat()
    assert first.error is E.none and first.member_epoch == 1
    statuses = {code for code, _ in first.status}
    assert statuses == {Status.MISSING_INTERNAL_TOPICS}
    assert set(first.internal_topics_to_create) == {
        "app-agg-changelog",
        "app-repartition",
        "app-store-changelog",
    }
    assert all(t.num_partitions == 4 for t in first.internal_topics_to_create.values())
    assert w.group.state is StreamsGroupState.NOT_READY
    w.converge()
    assert a.last is not None and a.last.status == ()
    assert a.owned.active == {"0": frozenset(range(4)), "1": frozenset(range(4))}
    assert a.last.heartbeat_interval_ms == INTERVAL_MS


def test_missing_source_topics_is_a_status_and_no_tasks() -> None:
    w = World(topics=False)
    result = w.member("a").heartbeat()
    assert result.error is E.none
    assert result.status == ((Status.MISSING_SOURCE_TOPICS, "Source topics input are missing."),)
    assert result.assignment == TasksTuple()
    assert w.group.state is StreamsGroupState.NOT_READY


def test_an_internal_topic_with_the_wrong_partition_count() -> None:
    w = World()
    w.h.metadata.create_topic("app-store-changelog", 2, 1, {})
    result = w.member("a").heartbeat()
    assert result.status == (
        (
            Status.INCORRECTLY_PARTITIONED_TOPICS,
            "Existing topic app-store-changelog has different number of partitions: "
            "expected 4, found 2",
        ),
    )


def test_three_members_balance_and_a_fourth_moves_only_what_it_takes() -> None:
    w = World(partitions=6, standby=1)
    for name in "abc":
        w.member(name)
    w.converge()
    assert sorted(m.count() for m in w.members) == [4, 4, 4]
    for m in w.members:
        assert not set(task_ids(m.owned.active)) & set(task_ids(m.owned.standby))
    before = {m.name: set(task_ids(m.owned.active)) for m in w.members}
    d = w.member("d")
    w.converge()
    after = {m.name: set(task_ids(m.owned.active)) for m in w.members}
    assert sorted(m.count() for m in w.members) == [3, 3, 3, 3]
    for name in "abc":
        assert after[name] <= before[name]
    assert len(after["d"]) == 3 and d.owned.standby


def test_a_task_is_revoked_before_it_moves() -> None:
    w = World()
    a = w.member("a")
    w.converge()
    b = w.member("b")
    b.heartbeat()  # b joins: a must give up half its tasks first
    assert b.count() == 0
    a.heartbeat(active_tasks=None, standby_tasks=None, warmup_tasks=None)  # no owned tasks
    member = w.group.members["a"]
    assert member.state is MemberState.UNREVOKED_TASKS
    assert a.count() == 4  # asked to revoke: its answer lists only what it keeps
    a.heartbeat()  # now it reports the 4 it owns: revocation done
    b.heartbeat()
    w.converge()
    assert (a.count(), b.count()) == (4, 4)


def test_a_dead_members_tasks_move_after_its_session_timeout() -> None:
    w = World()
    a, b = w.member("a"), w.member("b")
    w.converge()
    b.alive = False
    w.h.advance(SESSION_MS - 100, step=100)
    w.round()
    assert "b" in w.group.members
    w.h.advance(200, step=100)
    assert "b" not in w.group.members
    w.converge()
    assert a.count() == 8


def test_a_member_that_does_not_revoke_is_fenced_after_its_rebalance_timeout() -> None:
    w = World()
    a = w.member("a")
    w.converge()
    w.member("b").heartbeat()
    a.heartbeat(active_tasks=None, standby_tasks=None, warmup_tasks=None)
    assert w.group.members["a"].state is MemberState.UNREVOKED_TASKS
    fenced_at = None
    for _ in range(25):  # heartbeats keep the session alive, not the revocation
        w.h.advance(INTERVAL_MS, step=100)
        if "a" not in w.group.members:
            fenced_at = w.h.clock.now_ms()
            break
        a.heartbeat(active_tasks=None, standby_tasks=None, warmup_tasks=None)
        w.members[1].heartbeat()
    assert fenced_at is not None and 10_000 <= fenced_at <= 10_500
    assert a.heartbeat().error is E.unknown_member_id


def test_leave_moves_the_tasks_and_an_epoch_ahead_is_fenced() -> None:
    w = World()
    a, b = w.member("a"), w.member("b")
    w.converge()
    assert w.heartbeat(replace(b.params(), member_epoch=-1)).error is E.none
    w.members.remove(b)
    w.converge()
    assert a.count() == 8
    ahead = w.heartbeat(a.params(member_epoch=a.epoch + 5))
    assert ahead.error is E.fenced_member_epoch
    assert w.group.members["a"].member_epoch == a.epoch  # the member stays as it was


def test_a_stale_topology_epoch_is_a_status() -> None:
    w = World()
    w.member("a")
    w.converge()
    old = StreamsTopology(0, TOPOLOGY.subtopologies)
    result = w.member("b").heartbeat(topology=old)
    assert (
        Status.STALE_TOPOLOGY,
        "The member's topology epoch 0 is behind the group's topology epoch 1.",
    ) in result.status
    changed = StreamsTopology.of(1, [Subtopology("0", source_topics=("input",))])
    refused = w.member("c").heartbeat(topology=changed)
    assert (refused.error, refused.error_message) == (
        E.invalid_request,
        "Topology updates are not supported yet.",
    )


def test_kafkas_request_checks() -> None:
    w = World()
    m = w.member("a")
    cases: list[tuple[dict[str, Any], str]] = [
        ({"instance_id": "i"}, "Static membership is not yet supported."),
        ({"warmup_tasks": {"0": (1,)}}, "WarmupTasks are not supported yet."),
        ({"rebalance_timeout_ms": -1}, "RebalanceTimeoutMs must be provided in first request."),
        ({"topology": None}, "Topology must be non-null when (re-)joining."),
        ({"active_tasks": {"0": (1,)}}, "ActiveTasks must be empty when (re-)joining."),
        ({"member_id": " "}, "MemberId can't be empty."),
        ({"member_epoch": -3}, "MemberEpoch is -3, but must be greater than or equal to -2."),
    ]
    for change, message in cases:
        result = m.heartbeat(**change)
        assert (result.error, result.error_message) == (E.invalid_request, message), change
    changelog = StreamsTopology.of(
        1, [Subtopology("0", ("input",), state_changelog_topics=(TopicInfo("c", 3),))]
    )
    bad = m.heartbeat(topology=changelog)
    assert bad.error is E.streams_invalid_topology
    assert w.group is None
    unknown = w.heartbeat(replace(m.params(), member_epoch=3, topology=None))
    assert (unknown.error, unknown.error_message) == (
        E.group_id_not_found,
        "Streams group app not found.",
    )


def test_offset_commits_carry_the_member_epoch() -> None:
    w = World()
    a = w.member("a")
    w.converge()
    assert w.coord.validate_offset_commit("app", "a", a.epoch) is None
    assert w.coord.validate_offset_commit("app", "a", a.epoch - 1) is E.stale_member_epoch
    assert w.coord.validate_offset_commit("app", "nobody", a.epoch) is E.unknown_member_id
    assert w.coord.validate_offset_commit("app", "", -1, is_transactional=True) is None
    assert w.coord.validate_offset_commit("app", "", -1) is E.unknown_member_id
    assert w.coord.validate_offset_fetch("app", "a", a.epoch) is None
    assert w.coord.delete_group("app") is E.non_empty_group


def test_endpoints_map_to_the_partitions_of_their_tasks() -> None:
    w = World()
    a = w.member("a", user_endpoint=Endpoint("host-a", 7070))
    w.converge()
    result = a.heartbeat(endpoint_information_epoch=0)
    assert result.partitions_by_user_endpoint is not None
    (entry,) = result.partitions_by_user_endpoint
    assert entry.endpoint == Endpoint("host-a", 7070)
    assert dict(entry.active) == {"input": (0, 1, 2, 3), "app-repartition": (0, 1, 2, 3)}


def test_the_records_replay_to_the_same_group() -> None:
    w = World(standby=1)
    for name in "abc":
        w.member(name, user_endpoint=Endpoint(f"h-{name}", 1))
    w.converge()
    records = [decode_or_skip(k, v) for _, k, v in w.h.log._entries]
    replayed = replay_all(r for r in records if r is not None)["app"]
    group = w.group
    assert replayed.members == group.members
    assert replayed.target_assignment == group.target_assignment
    assert (replayed.group_epoch, replayed.assignment_epoch) == (
        group.group_epoch,
        group.assignment_epoch,
    )
    assert replayed.topology == group.topology
    assert replayed.validated_topology_epoch == 1
    assert replayed.last_assignment_configs == {"num.standby.replicas": "1"}
    w.coord.on_group_loaded(replayed)
    assert w.group.state is StreamsGroupState.STABLE
    w.converge()
