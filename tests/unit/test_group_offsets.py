"""Committed offsets, retention, admin APIs, and replay of persisted records."""

from __future__ import annotations

import pytest

from broker.group import (
    GroupState,
    InMemoryGroupLog,
    OffsetFetchPartition,
    TopicPartition,
    group_admin,
)
from broker.group.consumer_protocol import encode_subscription
from tests.helpers.group_harness import (
    E,
    Harness,
)

pytestmark = pytest.mark.usefixtures("timer_tasks_must_not_fail")

S = GroupState
MINUTE = 60_000
RETENTION_MS = 10080 * MINUTE  # offsets.retention.minutes default: 7 days
SUB = [("range", encode_subscription(["orders"]))]


def fetch(h: Harness, group: str, *tps: tuple[str, int]) -> dict[tuple[str, int], int]:
    result = h.manager.get_offsets(group, list(tps) if tps else None)
    return {tp: p.offset for tp, p in result.items()}


def test_member_commits_are_checked_against_generation_and_membership() -> None:
    h = Harness()
    (a, b), generation = h.stable_group(2)
    tp = ("orders", 0)
    assert h.commit("g", a, None, generation, {tp: (10, 3, "m")}) == {tp: E.none}
    assert h.commit("g", a, None, generation - 1, {tp: (11, 3, "")}) == {tp: E.illegal_generation}
    assert h.commit("g", "x", None, generation, {tp: (12, 3, "")}) == {tp: E.unknown_member_id}
    # A simple (generation -1) commit is refused while the group has members.
    assert h.commit("g", "", None, -1, {tp: (13, 3, "")}) == {tp: E.unknown_member_id}
    offsets = h.manager.get_offsets("g", [tp, ("orders", 1)])
    assert offsets == {
        tp: OffsetFetchPartition(10, 3, "m", E.none),
        ("orders", 1): OffsetFetchPartition(-1, -1, "", E.none),
    }
    # PreparingRebalance still takes commits of the old generation ...
    h.join(a)
    assert h.state() is S.PREPARING_REBALANCE
    assert h.commit("g", b, None, generation, {tp: (20, 3, "")}) == {tp: E.none}
    # ... CompletingRebalance does not (the member has no assignment yet).
    box = h.join(b)
    assert box.done and h.state() is S.COMPLETING_REBALANCE
    new_generation = box.result.generation_id
    assert h.commit("g", b, None, new_generation, {tp: (21, 3, "")}) == {
        tp: E.rebalance_in_progress
    }
    assert fetch(h, "g", tp) == {tp: 20}


def test_simple_consumer_commits_create_an_empty_group() -> None:
    h = Harness()
    tp = ("orders", 2)
    assert h.commit("solo", "", None, 5, {tp: (1, -1, "")}) == {tp: E.illegal_generation}
    assert h.coord.get_group("solo") is None
    assert h.commit("solo", "", None, -1, {tp: (7, -1, None)}) == {tp: E.none}
    assert h.state("solo") is S.EMPTY
    assert fetch(h, "solo") == {tp: 7}
    assert fetch(h, "unknown-group", tp) == {tp: -1}
    _, overviews = group_admin.handle_list_groups(h.manager)
    assert [(o.group_id, o.state, o.protocol_type) for o in overviews] == [("solo", "Empty", "")]


def test_oversized_metadata_and_failed_appends_are_reported_per_partition() -> None:
    h = Harness(offset_metadata_max_bytes=4)
    ok, big = ("t", 0), ("t", 1)
    errors = h.commit("s", "", None, -1, {ok: (1, -1, "1234"), big: (1, -1, "12345")})
    assert errors == {ok: E.none, big: E.offset_metadata_too_large}
    h.log.fail_next = E.not_enough_replicas
    assert h.commit("s", "", None, -1, {ok: (2, -1, "")}) == {ok: E.coordinator_not_available}
    assert fetch(h, "s", ok, big) == {ok: 1, big: -1}


def test_simple_group_offsets_expire_after_retention_and_the_group_goes() -> None:
    h = Harness()
    h.commit("s", "", None, -1, {("t", 0): (1, -1, "")})
    h.clock.advance(RETENTION_MS // 2)
    h.commit("s", "", None, -1, {("t", 1): (1, -1, "")})
    h.clock.advance(RETENTION_MS // 2 - 1)
    assert h.manager.cleanup_group_metadata() == 0
    h.clock.advance(1)
    assert h.manager.cleanup_group_metadata() == 1
    assert fetch(h, "s") == {("t", 1): 1}
    h.clock.advance(RETENTION_MS // 2)
    assert h.manager.cleanup_group_metadata() == 1
    assert h.coord.get_group("s") is None  # Empty and offset-less: Dead and forgotten
    kinds = [(type(r).__name__, r.value is None) for r in h.log.decoded()[-2:]]
    assert kinds == [("OffsetCommitRecord", True), ("GroupMetadataRecord", True)]


def test_empty_consumer_group_offsets_expire_counting_from_when_it_emptied() -> None:
    h = Harness()
    (a,), generation = h.stable_group(1, protocols=SUB)
    h.commit("g", a, None, generation, {("orders", 0): (5, -1, "")})
    # While a consumes "orders", its offsets never expire (it heartbeats throughout).
    for _ in range(8):
        h.clock.advance(RETENTION_MS // 8)
        assert h.heartbeat_(a, generation) is E.none
        h.manager.cleanup_group_metadata()
    assert fetch(h, "g") == {("orders", 0): 5}
    h.coord.handle_leave_group("g", [(a, None)])
    assert h.state() is S.EMPTY
    h.clock.advance(RETENTION_MS - 1)
    assert h.manager.cleanup_group_metadata() == 0
    h.clock.advance(1)
    assert h.manager.cleanup_group_metadata() == 1
    assert h.coord.get_group("g") is None


def test_live_consumer_group_expires_only_offsets_of_topics_it_no_longer_reads() -> None:
    h = Harness()
    (a,), generation = h.stable_group(1, protocols=SUB)
    h.commit("g", a, None, generation, {("orders", 0): (5, -1, ""), ("old-topic", 0): (9, -1, "")})
    h.clock.advance(RETENTION_MS)
    h.heartbeat_(a, generation)
    assert h.manager.cleanup_group_metadata() == 1
    assert fetch(h, "g") == {("orders", 0): 5}


def test_delete_groups_only_deletes_empty_groups() -> None:
    h = Harness()
    h.stable_group(1, group="busy")
    h.commit("idle", "", None, -1, {("t", 0): (1, -1, "")})
    errors = group_admin.handle_delete_groups(h.manager, ["busy", "idle", "ghost"])
    assert errors == {
        "busy": E.non_empty_group,
        "idle": E.none,
        "ghost": E.group_id_not_found,
    }
    assert h.coord.get_group("idle") is None
    assert fetch(h, "idle", ("t", 0)) == {("t", 0): -1}
    [described] = group_admin.handle_describe_groups(h.manager, ["idle"], not_found_as_error=True)
    assert described.error is E.group_id_not_found and described.state == "Dead"


def test_offset_delete_refuses_topics_the_group_consumes() -> None:
    h = Harness()
    (a,), generation = h.stable_group(1, protocols=SUB)
    h.commit("g", a, None, generation, {("orders", 0): (5, -1, ""), ("other", 0): (9, -1, "")})
    error, per_partition = group_admin.handle_delete_offsets(
        h.manager, "g", [("orders", 0), ("other", 0)]
    )
    assert error is E.none
    assert per_partition == {("orders", 0): E.group_subscribed_to_topic, ("other", 0): E.none}
    assert fetch(h, "g") == {("orders", 0): 5}
    assert group_admin.handle_delete_offsets(h.manager, "ghost", [("t", 0)]) == (
        E.group_id_not_found,
        {},
    )


def test_describe_and_list_groups() -> None:
    h = Harness()
    (a,), _ = h.stable_group(1, group="g1")
    h.join_new(group="g2")
    _, listed = group_admin.handle_list_groups(h.manager)
    assert {(o.group_id, o.state) for o in listed} == {
        ("g1", "Stable"),
        ("g2", "PreparingRebalance"),
    }
    _, stable_only = group_admin.handle_list_groups(h.manager, ["stable"])
    assert [o.group_id for o in stable_only] == ["g1"]
    d1, d2, d3 = group_admin.handle_describe_groups(h.manager, ["g1", "g2", "nope"])
    assert (d1.state, d1.protocol_type, d1.protocol) == ("Stable", "consumer", "range")
    assert [(m.member_id, m.metadata, m.assignment) for m in d1.members] == [
        (a, b"range-meta", f"assign-{a}".encode())
    ]
    assert d2.state == "PreparingRebalance" and d2.protocol == ""
    assert [m.metadata for m in d2.members] == [b""]
    assert (d3.error, d3.state) == (E.none, "Dead")


def test_replay_rebuilds_groups_and_offsets() -> None:
    log = InMemoryGroupLog()
    h = Harness(log=log)
    (a, b), generation = h.stable_group(2, protocols=SUB)
    h.commit("g", a, None, generation, {("orders", 0): (100, 4, "x")})
    h.commit("g", b, None, generation, {("orders", 1): (200, 4, "")})
    h.commit("g", b, None, generation, {("orders", 1): (250, 5, "")})
    h.commit("s", "", None, -1, {("t", 0): (1, -1, "")})
    h.commit("gone", "", None, -1, {("t", 0): (1, -1, "")})
    group_admin.handle_delete_groups(h.manager, ["gone"])

    # A broker restart: a new coordinator replays the topic.
    restarted = Harness(log=log)
    restarted.clock.set(h.clock.now_ms())
    restarted.load()
    assert fetch(restarted, "g") == {("orders", 0): 100, ("orders", 1): 250}
    parts = restarted.manager.get_offsets("g", [("orders", 1)])
    assert parts[TopicPartition("orders", 1)].leader_epoch == 5
    assert fetch(restarted, "s") == {("t", 0): 1}
    assert restarted.coord.get_group("gone") is None
    group = restarted.coord.get_group("g")
    assert group is not None
    assert group.state is S.STABLE and group.generation_id == generation
    assert group.protocol_name == "range" and sorted(group.all_members) == sorted([a, b])
    assert group.subscribed_topics == {"orders"}
    # Loaded members resume where they were ...
    assert restarted.heartbeat_(a, generation) is E.none
    sync = restarted.sync(b, generation).result
    assert sync.error is E.none and sync.assignment == f"assign-{b}".encode()
    # ... and must keep heartbeating like anyone else.
    restarted.advance(5_000)
    assert restarted.heartbeat_(a, generation) is E.none
    restarted.advance(5_000)
    assert restarted.state() is S.PREPARING_REBALANCE
    assert group.has(a) and not group.has(b)


def test_replay_of_an_empty_group_keeps_it_empty_with_its_generation() -> None:
    log = InMemoryGroupLog()
    h = Harness(log=log)
    (a,), generation = h.stable_group(1)
    h.coord.handle_leave_group("g", [(a, None)])
    assert h.state() is S.EMPTY
    restarted = Harness(log=log)
    restarted.load()
    group = restarted.coord.get_group("g")
    assert group is not None and group.state is S.EMPTY
    assert group.generation_id == generation + 1


def test_offset_expiry_runs_every_check_interval_on_the_scheduler_timer() -> None:
    h = Harness(offsets_retention_minutes=1, offsets_retention_check_interval_ms=10_000)
    h.manager.startup(h.coord)
    h.commit("s", "", None, -1, {("t", 0): (1, -1, "")})
    h.advance(MINUTE - 1, step=1_000)
    assert fetch(h, "s") == {("t", 0): 1}
    h.advance(1)  # the check at 60 s finds the commit one retention old
    assert h.coord.get_group("s") is None
    h.manager.shutdown()
    assert h.scheduler.size() == 0
