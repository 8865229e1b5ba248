"""Session expiry (DelayedHeartbeat), DelayedSync, LeaveGroup and static membership."""

from __future__ import annotations

import logging

import pytest

from broker.group import GroupState
from broker.group.group_log import GroupMetadataRecord
from tests.helpers.group_harness import (
    E,
    Harness,
)

pytestmark = pytest.mark.usefixtures("timer_tasks_must_not_fail")

S = GroupState


def leader_and_followers(h: Harness, ids: list[str]) -> tuple[str, list[str]]:
    group = h.coord.get_group("g")
    assert group is not None and group.leader_id is not None
    return group.leader_id, [m for m in ids if m != group.leader_id]


def test_session_expiry_removes_member_logs_and_rebalances(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="broker.group")
    h = Harness()
    (a, b), generation = h.stable_group(2, session_ms=10_000)
    synced_at = h.clock.now_ms()
    # b keeps heartbeating, a goes silent.
    for _ in range(3):
        h.advance(3_333)
        assert h.heartbeat_(b, generation) is E.none
    h.advance(synced_at + 9_999 - h.clock.now_ms())
    group = h.coord.get_group("g")
    assert group is not None and group.has(a) and h.state() is S.STABLE
    h.advance(1)
    assert not group.has(a)
    assert h.state() is S.PREPARING_REBALANCE
    assert f"Member {a} in group g has failed, removing it from the group" in caplog.messages
    assert h.heartbeat_(b, generation) is E.rebalance_in_progress
    assert h.heartbeat_(a, generation) is E.unknown_member_id
    rejoin = h.join(b)
    assert rejoin.result.generation_id == generation + 1  # b alone: completes at once
    assert rejoin.result.leader_id == b


def test_the_last_member_expiring_leaves_the_group_empty() -> None:
    h = Harness()
    h.stable_group(1, session_ms=10_000)
    h.advance(10_000)
    assert h.state() is S.EMPTY
    group = h.coord.get_group("g")
    assert group is not None and group.size == 0 and group.generation_id == 2


def test_heartbeats_keep_a_member_alive_across_many_session_timeouts() -> None:
    h = Harness()
    (a, b), generation = h.stable_group(2, session_ms=10_000)
    for _ in range(20):  # 100 s = 10 session timeouts
        h.advance(5_000)
        assert h.heartbeat_(a, generation) is E.none
        assert h.heartbeat_(b, generation) is E.none
    assert h.state() is S.STABLE
    # Completed heartbeat operations do not pile up in the timer: one per member.
    assert h.heartbeat.num_delayed() == 2


def test_offset_commits_count_as_heartbeats() -> None:
    h = Harness()
    (a,), generation = h.stable_group(1, session_ms=10_000)
    for i in range(6):
        h.advance(8_000)
        errors = h.commit("g", a, None, generation, {("t", 0): (i, -1, "")})
        assert errors == {("t", 0): E.none}
    assert h.state() is S.STABLE
    h.advance(10_000)
    assert h.state() is S.EMPTY


def test_member_expiring_during_a_rebalance_lets_the_join_complete(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="broker.group")
    h = Harness()
    ids, generation = h.stable_group(3, session_ms=6_000, rebalance_ms=60_000)
    leader, (f1, f2) = leader_and_followers(h, ids)
    h.advance(2_000)
    for m in ids:
        assert h.heartbeat_(m, generation) is E.none
    last_heartbeat = h.clock.now_ms()
    leader_box = h.join(leader, session_ms=6_000, rebalance_ms=60_000)
    assert h.heartbeat_(f1, generation) is E.rebalance_in_progress
    f1_box = h.join(f1, session_ms=6_000, rebalance_ms=60_000)
    # f2 neither heartbeats nor rejoins: its session ends long before the 60 s timeout.
    done_at = h.advance_until(lambda: leader_box.done)
    assert done_at == last_heartbeat + 6_000
    assert f"Member {f2} in group g has failed, removing it from the group" in caplog.messages
    assert f1_box.result.generation_id == leader_box.result.generation_id == generation + 1
    assert sorted(m.member_id for m in leader_box.result.members) == sorted([leader, f1])


def test_member_that_does_not_rejoin_is_dropped_at_the_rebalance_timeout() -> None:
    h = Harness()
    ids, generation = h.stable_group(2, session_ms=30_000, rebalance_ms=10_000)
    leader, (follower,) = leader_and_followers(h, ids)
    started = h.clock.now_ms()
    box = h.join(leader, session_ms=30_000, rebalance_ms=10_000)
    # The follower heartbeats (so its session never ends) but never rejoins.
    while not box.done:
        h.advance(1)
        if (h.clock.now_ms() - started) % 3_000 == 0:
            h.heartbeat_(follower, generation)
    assert h.clock.now_ms() == started + 10_000
    assert [m.member_id for m in box.result.members] == [leader]
    assert h.heartbeat_(follower, generation) is E.unknown_member_id


def test_delayed_sync_evicts_members_that_never_send_sync_group() -> None:
    h = Harness()
    ids = [h.join_new(session_ms=30_000, rebalance_ms=5_000) for _ in range(2)]
    box = h.last_join
    h.advance_until(lambda: box.done)
    joined_at = h.clock.now_ms()
    leader, (follower,) = leader_and_followers(h, ids)
    parked = h.sync(follower, 1)
    # The leader got its JoinGroup response and vanished: no SyncGroup ever comes.
    h.advance(4_999)
    assert not parked.done and h.state() is S.COMPLETING_REBALANCE
    h.advance(1)
    assert h.clock.now_ms() == joined_at + 5_000
    assert parked.result.error is E.rebalance_in_progress
    group = h.coord.get_group("g")
    assert group is not None and not group.has(leader)
    assert h.state() is S.PREPARING_REBALANCE
    rejoin = h.join(follower, session_ms=30_000, rebalance_ms=5_000).result
    assert rejoin.generation_id == 2 and rejoin.leader_id == follower


def test_delayed_sync_completes_as_soon_as_everyone_synced() -> None:
    h = Harness()
    ids = [h.join_new(rebalance_ms=5_000) for _ in range(2)]
    box = h.last_join
    h.advance_until(lambda: box.done)
    assert h.rebalance.num_delayed() == 1  # the DelayedSync
    leader, (follower,) = leader_and_followers(h, ids)
    h.sync(follower, 1)
    assert h.rebalance.num_delayed() == 1
    h.sync(leader, 1, {leader: b"x", follower: b"y"})
    assert h.rebalance.num_delayed() == 0
    for _ in range(4):  # past the rebalance timeout: nobody is evicted
        h.advance(2_500)
        assert h.heartbeat_(leader, 1) is E.none and h.heartbeat_(follower, 1) is E.none
    assert h.state() is S.STABLE


def test_leave_of_several_members_at_once() -> None:
    h = Harness()
    ids, generation = h.stable_group(3)
    a, b, c = ids
    result = h.coord.handle_leave_group("g", [(a, None), (b, None), ("ghost", None)])
    error, members = result  # unpacks like Kafka's (top-level error, member responses)
    assert error is E.none
    assert [(m.member_id, m.error) for m in members] == [
        (a, E.none),
        (b, E.none),
        ("ghost", E.unknown_member_id),
    ]
    assert h.state() is S.PREPARING_REBALANCE
    assert h.heartbeat_(c, generation) is E.rebalance_in_progress
    rejoin = h.join(c)
    assert rejoin.result.generation_id == generation + 1  # only c is left: at once
    assert [m.member_id for m in rejoin.result.members] == [c]


def test_everyone_leaving_empties_the_group_and_answers_parked_joins() -> None:
    h = Harness()
    (a, b), _ = h.stable_group(2)
    parked = h.join(a)  # a rejoins and waits for b
    h.coord.handle_leave_group("g", [(a, None)])
    assert parked.result.error is E.unknown_member_id
    h.coord.handle_leave_group("g", [(b, None)])
    assert h.state() is S.EMPTY
    assert h.coord.handle_leave_group("nope", [(a, None)]).members[0].error is E.unknown_member_id


def test_pending_member_can_leave() -> None:
    h = Harness()
    pending = h.join(require_known=True).result.member_id
    result = h.coord.handle_leave_group("g", [(pending, None)])
    assert result.members[0].error is E.none
    group = h.coord.get_group("g")
    assert group is not None and not group.is_pending_member(pending)
    assert h.heartbeat.num_delayed() == 0


def static_group(h: Harness, session_ms: int = 10_000) -> dict[str, str]:
    """Two static members, synced; returns instance id -> member id."""
    a = h.join(instance="i-a", client_id="ca", session_ms=session_ms)
    b = h.join(instance="i-b", client_id="cb", session_ms=session_ms)
    h.advance_until(lambda: a.done and b.done)
    gen = a.result.generation_id
    leader = a.result.leader_id
    ids = {"i-a": a.result.member_id, "i-b": b.result.member_id}
    assert ids["i-a"].startswith("i-a-")
    syncs = [
        h.sync(
            ids[i],
            gen,
            {m: f"asg-{i2}".encode() for i2, m in ids.items()} if ids[i] == leader else None,
            instance=i,
        )
        for i in ids
    ]
    assert all(s.result.error is E.none for s in syncs)
    return ids


def test_static_member_rejoin_replaces_member_id_without_rebalance_and_fences_old_id() -> None:
    h = Harness()
    ids = static_group(h)
    group = h.coord.get_group("g")
    assert group is not None
    generation = group.generation_id
    leader = group.leader_id
    follower_instance = next(i for i, m in ids.items() if m != leader)
    old_id = ids[follower_instance]
    h.advance(1_000)
    # The follower restarts: unknown member id, same instance id and metadata.
    res = h.join("", instance=follower_instance).result
    assert res.error is E.none
    assert res.member_id != old_id and res.member_id.startswith(follower_instance)
    assert res.generation_id == generation and res.leader_id == leader
    assert h.state() is S.STABLE  # no rebalance
    sync = h.sync(res.member_id, generation, instance=follower_instance).result
    assert sync.error is E.none and sync.assignment == f"asg-{follower_instance}".encode()
    # The old incarnation is fenced everywhere.
    assert h.heartbeat_(old_id, generation, instance=follower_instance) is E.fenced_instance_id
    assert (
        h.sync(old_id, generation, instance=follower_instance).result.error is E.fenced_instance_id
    )
    commit = h.commit("g", old_id, follower_instance, generation, {("t", 0): (1, -1, "")})
    assert commit == {("t", 0): E.fenced_instance_id}
    assert h.join(old_id, instance=follower_instance).result.error is E.fenced_instance_id
    # The new member id was persisted.
    stored = [r for r in h.log.decoded() if isinstance(r, GroupMetadataRecord)][-1]
    assert stored.value is not None
    assert res.member_id in {m.member_id for m in stored.value.members}


def test_restarted_static_leader_is_not_told_it_leads() -> None:
    h = Harness()
    ids = static_group(h)
    group = h.coord.get_group("g")
    assert group is not None
    leader_instance = next(i for i, m in ids.items() if m == group.leader_id)
    res = h.join("", instance=leader_instance).result
    assert res.error is E.none
    assert res.leader_id == ids[leader_instance] != res.member_id  # the old id
    assert group.leader_id == res.member_id  # but the group follows the new id
    assert h.state() is S.STABLE


def test_static_member_rejoin_fences_its_parked_old_join() -> None:
    h = Harness()
    ids = static_group(h)
    group = h.coord.get_group("g")
    assert group is not None
    leader_instance = next(i for i, m in ids.items() if m == group.leader_id)
    parked = h.join(ids[leader_instance], instance=leader_instance)  # leader rejoin: rebalance
    assert not parked.done and h.state() is S.PREPARING_REBALANCE
    new = h.join("", instance=leader_instance)
    assert parked.result.error is E.fenced_instance_id
    assert not new.done  # the new incarnation waits for the rebalance


def test_static_member_that_does_not_rejoin_keeps_its_place() -> None:
    h = Harness()
    ids = static_group(h, session_ms=60_000)
    group = h.coord.get_group("g")
    assert group is not None
    leader_instance = next(i for i, m in ids.items() if m == group.leader_id)
    started = h.clock.now_ms()
    box = h.join(ids[leader_instance], instance=leader_instance, session_ms=60_000)
    # The other static member (restarting, say) never rejoins: the rebalance times out
    # but, unlike a dynamic member, it stays in the group and in the leader's list.
    assert h.advance_until(lambda: box.done) == started + 10_000
    assert sorted(m.member_id for m in box.result.members) == sorted(ids.values())
