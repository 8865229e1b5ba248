"""The coordinator records where a group request waits, and how it left.

"The component that parks an operation records where it parked": a JoinGroup waiting
for its group waits in the Rebalance purgatory (DelayedJoin / InitialDelayedJoin), a
follower's SyncGroup too (bounded by the DelayedSync), while the leader's SyncGroup, a
static member's rejoin and an OffsetCommit wait in the Produce purgatory for their
append to ``__consumer_offsets``. A request answered during its call is recorded
nowhere; one answered because the operation bounding its wait expired leaves it
*expired*, any other *completed*. All on the manual clock.
"""

from __future__ import annotations

import pytest

from broker.group import GroupState
from broker.server.purgatories import PurgatoryName, PurgatoryOutcome
from tests.helpers.group_harness import E, Harness, Request

pytestmark = pytest.mark.usefixtures("timer_tasks_must_not_fail")

REBALANCE = PurgatoryName.REBALANCE
PRODUCE = PurgatoryName.PRODUCE
COMPLETED = PurgatoryOutcome.COMPLETED
EXPIRED = PurgatoryOutcome.EXPIRED
TP = ("orders", 0)


def leader_and_follower(h: Harness, ids: list[str]) -> tuple[str, str]:
    group = h.coord.get_group("g")
    assert group is not None and group.leader_id is not None
    (follower,) = [m for m in ids if m != group.leader_id]
    return group.leader_id, follower


def joined_pair(h: Harness) -> tuple[str, str]:
    """Two members through their join phase, waiting to sync (generation 1)."""
    ids = [h.join_new(rebalance_ms=5_000), h.join_new(rebalance_ms=5_000)]
    box = h.last_join
    h.advance_until(lambda: box.done)
    assert h.state() is GroupState.COMPLETING_REBALANCE
    return leader_and_follower(h, ids)


# ------------------------------------------------------------------------ JoinGroup


def test_a_join_answered_at_once_is_recorded_nowhere() -> None:
    h = Harness()
    request = Request()
    assert h.join(require_known=True, request=request).result.error is E.member_id_required
    assert (request.purgatories, request.outcomes) == ([], [])


def test_a_join_waits_in_rebalance_and_completes_when_the_last_member_rejoins() -> None:
    h = Harness()
    (a, b), _ = h.stable_group(2)
    first, last = Request(), Request()
    parked = h.join(a, request=first)
    assert not parked.done and first.purgatories == [REBALANCE] and first.outcomes == []
    answered = h.join(b, request=last)
    assert parked.result.error is E.none and answered.result.error is E.none
    assert (first.purgatories, first.outcomes) == ([REBALANCE], [COMPLETED])
    # The last joiner completed the phase during its own call: it never waited.
    assert (last.purgatories, last.outcomes) == ([], [])


def test_a_join_answered_by_the_rebalance_timeout_leaves_expired() -> None:
    h = Harness()
    (a, b), generation = h.stable_group(2, session_ms=30_000, rebalance_ms=10_000)
    request = Request()
    box = h.join(a, session_ms=30_000, rebalance_ms=10_000, request=request)
    h.advance(5_000)
    assert h.heartbeat_(b, generation) is E.rebalance_in_progress  # alive, never rejoins
    h.advance_until(lambda: box.done)
    assert box.result.error is E.none and box.result.generation_id == generation + 1
    assert request.purgatory is REBALANCE and request.outcome is EXPIRED


def test_the_initial_rebalance_delay_expires_its_joins() -> None:
    h = Harness(group_initial_rebalance_delay_ms=3_000)
    request = Request()
    h.join_new(request=request)
    box = h.last_join
    h.advance(2_999)
    assert not box.done and request.purgatories == [REBALANCE]
    h.advance(1)
    assert box.result.error is E.none
    assert request.purgatory is REBALANCE and request.outcome is EXPIRED


def test_a_join_superseded_by_its_retry_completes_and_the_retry_waits() -> None:
    h = Harness()
    (a, _b), _ = h.stable_group(2)
    first, retry = Request(), Request()
    old = h.join(a, request=first)
    new = h.join(a, request=retry)
    assert old.result.error is E.rebalance_in_progress
    assert (first.purgatories, first.outcomes) == ([REBALANCE], [COMPLETED])
    assert not new.done and retry.purgatories == [REBALANCE]


def test_a_new_member_dropped_by_its_join_timeout_leaves_expired() -> None:
    """A new member waits at most NEW_MEMBER_JOIN_TIMEOUT_MS (5 min) for its join phase;
    its DelayedHeartbeat's expiry answers it. The others waited on the group."""
    h = Harness()
    (a, b), generation = h.stable_group(2, session_ms=600_000, rebalance_ms=600_000)
    newcomer, old_member = Request(), Request()
    new_id = h.join_new(session_ms=600_000, rebalance_ms=600_000, request=newcomer)
    new_box = h.last_join
    a_box = h.join(a, session_ms=600_000, rebalance_ms=600_000, request=old_member)
    h.advance(5 * 60_000, step=1_000)
    assert new_box.result.error is E.unknown_member_id
    assert newcomer.purgatory is REBALANCE and newcomer.outcome is EXPIRED
    assert not h.coord.get_group("g").has(new_id)  # type: ignore[union-attr]
    assert not a_box.done and old_member.outcomes == []
    h.join(b, session_ms=600_000, rebalance_ms=600_000)  # the last one: phase complete
    assert a_box.result.generation_id == generation + 1
    assert old_member.outcome is COMPLETED


# ------------------------------------------------------------------------ SyncGroup


def test_a_follower_waits_in_rebalance_and_the_leader_is_answered_at_once() -> None:
    h = Harness()
    leader, follower = joined_pair(h)
    follower_request, leader_request = Request(), Request()
    follower_sync = h.sync(follower, 1, request=follower_request)
    assert follower_request.purgatories == [REBALANCE]
    leader_sync = h.sync(leader, 1, {leader: b"l", follower: b"f"}, request=leader_request)
    assert leader_sync.result.error is E.none and follower_sync.result.assignment == b"f"
    assert (follower_request.purgatories, follower_request.outcomes) == ([REBALANCE], [COMPLETED])
    # A single in-sync replica: the leader's append completed during its call.
    assert (leader_request.purgatories, leader_request.outcomes) == ([], [])


def test_the_leader_waits_in_produce_for_its_assignment_to_be_replicated() -> None:
    h = Harness()
    leader, follower = joined_pair(h)
    h.log.hold = True
    follower_request, leader_request = Request(), Request()
    follower_sync = h.sync(follower, 1, request=follower_request)
    leader_sync = h.sync(leader, 1, {leader: b"l", follower: b"f"}, request=leader_request)
    assert not leader_sync.done and not follower_sync.done
    assert leader_request.purgatories == [PRODUCE]  # not Rebalance: it waits for the ISR
    assert follower_request.purgatories == [REBALANCE]
    h.log.complete()
    assert leader_sync.result.assignment == b"l" and follower_sync.result.assignment == b"f"
    assert leader_request.outcome is COMPLETED and follower_request.outcome is COMPLETED


def test_a_timed_out_assignment_append_expires_the_leader_only() -> None:
    h = Harness()
    leader, follower = joined_pair(h)
    h.log.hold = True
    follower_request, leader_request = Request(), Request()
    follower_sync = h.sync(follower, 1, request=follower_request)
    leader_sync = h.sync(leader, 1, {leader: b"l", follower: b"f"}, request=leader_request)
    h.log.complete(E.request_timed_out)  # the DelayedProduce expired
    assert leader_sync.result.error is E.rebalance_in_progress
    assert follower_sync.result.error is E.rebalance_in_progress
    assert leader_request.purgatory is PRODUCE and leader_request.outcome is EXPIRED
    assert follower_request.purgatory is REBALANCE and follower_request.outcome is COMPLETED


def test_a_follower_answered_by_the_delayed_sync_expiry_leaves_expired() -> None:
    h = Harness()
    _leader, follower = joined_pair(h)
    request = Request()
    box = h.sync(follower, 1, request=request)
    h.advance_until(lambda: box.done)  # the leader never syncs: DelayedSync expires
    assert box.result.error is E.rebalance_in_progress
    assert request.purgatory is REBALANCE and request.outcome is EXPIRED


def test_a_static_rejoin_waits_in_produce_for_its_new_member_id() -> None:
    h = Harness()
    instances = ("i-a", "i-b")
    boxes = [h.join(instance=i) for i in instances]
    h.advance_until(lambda: all(b.done for b in boxes))
    members = {b.result.member_id: i for b, i in zip(boxes, instances, strict=True)}
    leader = boxes[0].result.leader_id
    # Followers first, so the leader's SyncGroup completes the generation.
    for member_id in sorted(members, key=lambda m: m == leader):
        h.sync(member_id, 1, dict.fromkeys(members, b"x"), instance=members[member_id])
    assert h.state() is GroupState.STABLE
    h.log.hold = True
    request = Request()
    rejoin = h.join(instance="i-b", request=request)  # a restarted static member
    assert not rejoin.done and request.purgatories == [PRODUCE]
    h.log.complete()
    assert rejoin.result.error is E.none
    assert request.purgatories == [PRODUCE] and request.outcome is COMPLETED


# --------------------------------------------------------------------- OffsetCommit


def test_a_commit_waits_in_produce_and_completes_when_replicated() -> None:
    h = Harness()
    h.log.hold = True
    request = Request()
    box = h.commit_box("s", "", None, -1, {TP: (5, -1, "")}, parked_request=request)
    assert not box.done and request.purgatories == [PRODUCE]
    h.log.complete()
    assert box.result == {TP: E.none}
    assert request.outcome is COMPLETED


def test_a_commit_whose_append_times_out_leaves_expired() -> None:
    h = Harness()
    h.log.hold = True
    request = Request()
    box = h.commit_box("s", "", None, -1, {TP: (5, -1, "")}, parked_request=request)
    h.log.complete(E.request_timed_out)
    assert box.result == {TP: E.coordinator_not_available}
    assert request.purgatory is PRODUCE and request.outcome is EXPIRED


def test_a_refused_commit_is_recorded_nowhere() -> None:
    h = Harness()
    h.log.hold = True
    request = Request()
    box = h.commit_box("s", "", None, 3, {TP: (5, -1, "")}, parked_request=request)
    assert box.result == {TP: E.illegal_generation}
    assert (request.purgatories, request.outcomes) == ([], [])
