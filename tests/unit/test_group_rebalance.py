"""JoinGroup / SyncGroup and the rebalance purgatory (DelayedJoin, InitialDelayedJoin)."""

from __future__ import annotations

import pytest

from broker.group import GroupState, JoinGroupResult
from broker.group.group_log import GroupMetadataRecord
from tests.helpers.group_harness import (
    E,
    Harness,
)

pytestmark = pytest.mark.usefixtures("timer_tasks_must_not_fail")

S = GroupState


def test_three_members_get_one_generation_and_one_leader() -> None:
    h = Harness()
    ids = [h.join_new() for _ in range(1)]
    boxes = [h.last_join]
    for _ in range(2):
        ids.append(h.join_new())
        boxes.append(h.last_join)
    assert not any(b.done for b in boxes)
    h.advance_until(lambda: all(b.done for b in boxes))
    results: list[JoinGroupResult] = [b.result for b in boxes]
    assert {r.error for r in results} == {E.none}
    assert {r.generation_id for r in results} == {1}
    assert {r.protocol_name for r in results} == {"range"}
    assert {r.protocol_type for r in results} == {"consumer"}
    leaders = {r.leader_id for r in results}
    assert len(leaders) == 1
    leader = leaders.pop()
    assert leader in ids
    for r in results:
        if r.member_id == leader:
            assert sorted(m.member_id for m in r.members) == sorted(ids)
            assert {m.metadata for m in r.members} == {b"range-meta"}
        else:
            assert r.members == []
    assert h.state() is S.COMPLETING_REBALANCE


def test_initial_delay_rearms_when_a_member_arrives_during_it() -> None:
    h = Harness(group_initial_rebalance_delay_ms=3000)
    h.join_new(rebalance_ms=10_000)
    a = h.last_join
    h.advance(2000)
    h.join_new(rebalance_ms=10_000)
    b = h.last_join
    h.advance(1000)  # t=3000: the first delay ran out, but B arrived meanwhile
    assert not a.done and h.state() is S.PREPARING_REBALANCE
    done_at = h.advance_until(lambda: a.done)
    assert done_at == 6000  # re-armed for min(3000, 10000 - 3000)
    assert b.done and a.result.generation_id == b.result.generation_id == 1


def test_initial_delay_without_newcomers_completes_after_one_delay() -> None:
    h = Harness(group_initial_rebalance_delay_ms=3000)
    h.join_new(rebalance_ms=10_000)
    a = h.last_join
    assert h.advance_until(lambda: a.done) == 3000


def test_initial_delay_never_runs_past_the_rebalance_timeout() -> None:
    h = Harness(group_initial_rebalance_delay_ms=3000)
    h.join_new(rebalance_ms=10_000)
    boxes = [h.last_join]
    # Keep a newcomer arriving in every delay window: 2000, 4500, 7000, 9500.
    for at in (2000, 4500, 7000, 9500):
        h.advance(at - h.clock.now_ms())
        h.join_new(rebalance_ms=10_000)
        boxes.append(h.last_join)
    done_at = h.advance_until(lambda: boxes[0].done)
    assert done_at == 10_000  # 3000 + 3000 + 3000 + 1000, then no time left
    assert all(b.result.generation_id == 1 for b in boxes)
    assert len(boxes[0].result.members) + len([b for b in boxes if b.result.members]) == 6


def test_zero_initial_delay_completes_at_once_when_all_joined() -> None:
    h = Harness(group_initial_rebalance_delay_ms=0)
    first = h.join_new()
    assert h.last_join.done  # alone and joined: no waiting at all
    generation = h.last_join.result.generation_id
    assert h.sync(first, generation, {first: b"x"}).result.error is E.none
    h.join_new()
    assert h.state() is S.PREPARING_REBALANCE and not h.last_join.done
    second_box = h.last_join
    # The first member learns of the rebalance and rejoins: everyone known has joined.
    assert h.heartbeat_(first, generation) is E.rebalance_in_progress
    rejoin = h.join(first)
    assert rejoin.done and second_box.done
    assert rejoin.result.generation_id == second_box.result.generation_id == generation + 1
    assert h.clock.now_ms() == 0


def test_pending_member_that_never_rejoins_is_removed_after_its_session_timeout() -> None:
    h = Harness()
    first = h.join(require_known=True, session_ms=10_000).result
    assert first.error is E.member_id_required
    assert first.member_id.startswith("client-")
    group = h.coord.get_group("g")
    assert group is not None and group.is_pending_member(first.member_id)
    h.advance(9_999)
    assert group.is_pending_member(first.member_id)
    h.advance(1)
    assert not group.is_pending_member(first.member_id)
    late = h.join(first.member_id, require_known=True).result
    assert late.error is E.unknown_member_id


def test_rebalance_waits_for_a_pending_member_until_its_session_expires() -> None:
    h = Harness()
    (leader,), generation = h.stable_group(1)
    t0 = h.clock.now_ms()
    newcomer = h.join(require_known=True, session_ms=7_000).result
    assert newcomer.error is E.member_id_required
    h.advance(1000)
    rejoin = h.join(leader)  # leader rejoin starts a rebalance (timeout 10 s)
    assert h.state() is S.PREPARING_REBALANCE
    done_at = h.advance_until(lambda: rejoin.done)
    assert done_at == t0 + 7_000  # when the newcomer's id expired, not the rebalance timeout
    assert rejoin.result.generation_id == generation + 1
    assert [m.member_id for m in rejoin.result.members] == [leader]


@pytest.mark.parametrize("session_ms", [5_999, 1_800_001])
def test_session_timeout_outside_broker_bounds_is_rejected(session_ms: int) -> None:
    h = Harness()
    assert h.join(session_ms=session_ms).result.error is E.invalid_session_timeout
    assert h.coord.get_group("g") is None


def test_join_errors() -> None:
    h = Harness()
    assert h.join(group="").result.error is E.invalid_group_id
    assert h.join("nobody").result.error is E.unknown_member_id  # unknown group
    h.stable_group(2)
    assert h.join("nobody").result.error is E.unknown_member_id
    other_type = h.join(protocol_type="connect").result
    assert other_type.error is E.inconsistent_group_protocol
    no_common = h.join(protocols=[("sticky", b"")]).result
    assert no_common.error is E.inconsistent_group_protocol
    assert h.state() is S.STABLE


def test_group_max_size_turns_away_newcomers() -> None:
    h = Harness(group_max_size=2)
    h.stable_group(2)
    assert h.join(require_known=True).result.error is E.group_max_size_reached
    assert h.join("nobody").result.error is E.group_max_size_reached  # size is checked first
    assert h.state() is S.STABLE


def test_stable_follower_rejoin_with_same_metadata_gets_current_generation() -> None:
    h = Harness()
    ids, generation = h.stable_group(2)
    group = h.coord.get_group("g")
    assert group is not None
    follower = next(m for m in ids if not group.is_leader(m))
    res = h.join(follower).result
    assert res.error is E.none and res.generation_id == generation and res.members == []
    assert res.leader_id == group.leader_id
    assert h.state() is S.STABLE


def test_stable_rejoin_by_leader_or_with_new_metadata_rebalances() -> None:
    for who in ("leader", "changed"):
        h = Harness()
        ids, _ = h.stable_group(2)
        group = h.coord.get_group("g")
        assert group is not None and group.leader_id is not None
        leader = group.leader_id
        follower = next(m for m in ids if m != leader)
        if who == "leader":
            box = h.join(leader)
        else:
            box = h.join(follower, protocols=[("range", b"new-topics")])
        assert not box.done and h.state() is S.PREPARING_REBALANCE


def test_completing_rebalance_rejoin_with_same_metadata_resends_join_response() -> None:
    h = Harness()
    a = h.join_new()
    box_a = h.last_join
    b = h.join_new()
    h.advance_until(lambda: box_a.done)
    leader = box_a.result.leader_id
    again = h.join(leader).result
    assert again.error is E.none and again.generation_id == 1
    assert sorted(m.member_id for m in again.members) == sorted([a, b])
    assert h.state() is S.COMPLETING_REBALANCE
    changed = h.join(leader, protocols=[("roundrobin", b"rr-meta")])
    assert not changed.done and h.state() is S.PREPARING_REBALANCE


def test_sync_parks_followers_until_the_leader_assigns() -> None:
    h = Harness()
    ids = [h.join_new(), h.join_new()]
    box = h.last_join
    h.advance_until(lambda: box.done)
    group = h.coord.get_group("g")
    assert group is not None
    leader = group.leader_id
    assert leader is not None
    follower = next(m for m in ids if m != leader)
    follower_sync = h.sync(follower, 1)
    assert not follower_sync.done
    assert h.heartbeat_(follower, 1) is E.none  # heartbeats in CompletingRebalance are fine
    leader_sync = h.sync(leader, 1, {leader: b"L"})  # follower left out: gets empty bytes
    assert leader_sync.result.error is E.none and leader_sync.result.assignment == b"L"
    assert follower_sync.result.error is E.none and follower_sync.result.assignment == b""
    assert follower_sync.result.protocol_name == "range"
    assert h.state() is S.STABLE
    again = h.sync(follower, 1).result  # Stable: just the current assignment
    assert again.error is E.none and again.assignment == b""
    # The generation and assignment were persisted.
    stored = [r for r in h.log.decoded() if isinstance(r, GroupMetadataRecord)]
    assert stored[-1].value is not None
    assert {m.member_id: m.assignment for m in stored[-1].value.members} == {
        leader: b"L",
        follower: b"",
    }


def test_sync_errors() -> None:
    h = Harness()
    assert h.sync("x", 1, group="nope").result.error is E.unknown_member_id
    ids, generation = h.stable_group(2)
    assert h.sync("x", generation).result.error is E.unknown_member_id
    assert h.sync(ids[0], generation + 1).result.error is E.illegal_generation
    group = h.coord.get_group("g")
    assert group is not None
    h.join(group.leader_id or "")  # leader rejoin: PreparingRebalance
    follower = next(m for m in ids if not group.is_leader(m))
    assert h.sync(follower, generation).result.error is E.rebalance_in_progress


def test_new_join_during_completing_rebalance_sends_parked_syncs_back_to_join() -> None:
    h = Harness()
    ids = [h.join_new(), h.join_new()]
    box = h.last_join
    h.advance_until(lambda: box.done)
    group = h.coord.get_group("g")
    assert group is not None
    follower = next(m for m in ids if not group.is_leader(m))
    parked = h.sync(follower, 1)
    h.join_new()
    assert parked.result.error is E.rebalance_in_progress
    assert h.state() is S.PREPARING_REBALANCE


def test_a_retried_join_or_sync_supersedes_the_parked_one_which_is_still_answered() -> None:
    h = Harness()
    ids, generation = h.stable_group(2)
    group = h.coord.get_group("g")
    assert group is not None and group.leader_id is not None
    leader = group.leader_id
    follower = next(m for m in ids if m != leader)
    first = h.join(leader)
    retry = h.join(leader)
    assert first.result.error is E.rebalance_in_progress and not retry.done
    assert h.join(follower).done and retry.result.error is E.none
    parked = h.sync(follower, generation + 1)
    again = h.sync(follower, generation + 1)
    assert parked.result.error is E.rebalance_in_progress and not again.done
    h.sync(leader, generation + 1, {follower: b"f"})
    assert again.result.assignment == b"f"
