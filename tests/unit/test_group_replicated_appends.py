"""Commits and group metadata take effect only once ``__consumer_offsets`` has them.

Kafka appends both with acks=all and acts in the append's callback: a commit enters the
offset cache, and a SyncGroup hands out the assignment, only when the in-sync replicas
have the records; a failed append is answered with the API's mapped error. The in-memory
log holds each callback (``hold``) until the test completes it, as a lagging ISR would.
"""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from broker.group import GroupState, InMemoryGroupLog, group_admin
from broker.group.append_errors import commit_error, store_group_error
from tests.helpers.group_harness import (
    Box,
    E,
    Harness,
)

pytestmark = pytest.mark.usefixtures("timer_tasks_must_not_fail")

TP = ("orders", 0)


def committed(h: Harness, group: str = "s") -> int:
    return h.manager.get_offsets(group, [TP])[TP].offset  # type: ignore[index]


def commit(h: Harness, offset: int, group: str = "s") -> Box:
    return h.commit_box(group, "", None, -1, {TP: (offset, -1, "")})


def held_harness(**config: int) -> tuple[Harness, InMemoryGroupLog]:
    log = InMemoryGroupLog()
    h = Harness(log=log, **config)
    assert commit(h, 5).result == {TP: E.none}  # at once while nothing is held
    log.hold = True
    return h, log


def test_a_commit_is_answered_and_visible_only_after_the_append_succeeds() -> None:
    h, log = held_harness()
    box = commit(h, 9)
    assert not box.done
    assert committed(h) == 5  # written on the leader, not yet acknowledged
    log.complete()
    assert box.result == {TP: E.none}
    assert committed(h) == 9


@pytest.mark.parametrize(
    ("append_error", "expected"),
    [
        (E.not_enough_replicas, E.coordinator_not_available),
        (E.not_enough_replicas_after_append, E.coordinator_not_available),
        (E.request_timed_out, E.coordinator_not_available),
        (E.unknown_topic_or_partition, E.coordinator_not_available),
        (E.not_leader_or_follower, E.not_coordinator),
        (E.message_too_large, E.invalid_commit_offset_size),
        (E.record_list_too_large, E.invalid_commit_offset_size),
        (E.corrupt_message, E.unknown_server_error),
    ],
)
def test_a_failed_append_answers_the_mapped_error_and_keeps_the_old_offset(
    append_error: ErrorCode, expected: ErrorCode
) -> None:
    h, log = held_harness()
    box = commit(h, 9)
    log.complete(append_error)
    assert box.result == {TP: expected}
    assert committed(h) == 5


def test_an_oversized_metadata_partition_is_answered_with_the_replicated_ones() -> None:
    h, log = held_harness(offset_metadata_max_bytes=4)
    big = ("orders", 1)
    box = h.commit_box("s", "", None, -1, {TP: (9, -1, ""), big: (1, -1, "12345")})
    assert not box.done
    log.complete()
    assert box.result == {TP: E.none, big: E.offset_metadata_too_large}


def test_a_log_that_raises_answers_unknown_server_error() -> None:
    h = Harness()
    h.log.fail_next = OSError("disk full")
    assert commit(h, 9).result == {TP: E.unknown_server_error}
    assert committed(h) == -1


def test_a_group_deleted_while_its_commit_waits_is_not_resurrected() -> None:
    h, log = held_harness()
    box = commit(h, 9)
    assert group_admin.handle_delete_groups(h.manager, ["s"]) == {"s": E.none}
    log.complete()
    assert box.result == {TP: E.none}
    assert h.coord.get_group("s") is None
    assert committed(h) == -1


def test_sync_group_hands_out_assignments_only_once_they_are_stored() -> None:
    log = InMemoryGroupLog()
    h = Harness(log=log)
    ids = [h.join_new(), h.join_new()]
    boxes = [h.last_join]
    h.advance_until(lambda: boxes[0].done)
    generation = boxes[0].result.generation_id
    leader = boxes[0].result.leader_id
    follower = next(m for m in ids if m != leader)
    log.hold = True
    follower_sync = h.sync(follower, generation)
    leader_sync = h.sync(leader, generation, {m: m.encode() for m in ids})
    assert not follower_sync.done and not leader_sync.done
    assert h.state() is GroupState.COMPLETING_REBALANCE
    log.complete()
    assert h.state() is GroupState.STABLE
    assert leader_sync.result.error is E.none and leader_sync.result.assignment == leader.encode()
    assert follower_sync.result.assignment == follower.encode()


def test_sync_group_store_timing_out_asks_the_members_to_rejoin() -> None:
    log = InMemoryGroupLog()
    h = Harness(log=log)
    member = h.join_new()
    box = h.last_join
    h.advance_until(lambda: box.done)
    log.hold = True
    sync = h.sync(member, box.result.generation_id, {member: b"a"})
    log.complete(E.request_timed_out)
    assert sync.result.error is E.rebalance_in_progress
    assert h.state() is GroupState.PREPARING_REBALANCE


def test_error_mappings_follow_kafka() -> None:
    assert commit_error(E.none) is E.none
    assert store_group_error(E.request_timed_out) is E.rebalance_in_progress
    assert store_group_error(E.not_enough_replicas_after_append) is E.coordinator_not_available
    assert store_group_error(E.not_leader_or_follower) is E.not_coordinator
    assert store_group_error(E.message_too_large) is E.unknown_server_error
