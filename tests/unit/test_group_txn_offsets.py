"""Transactional offset commits in the group coordinator: pending until the marker,
UNSTABLE_OFFSET_COMMIT meanwhile, committed or dropped by the marker, and reloaded."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from broker.group import InMemoryGroupLog, TopicPartition
from broker.group.group_txn import handle_txn_commit_offsets, handle_txn_completion
from broker.server.purgatories import PurgatoryName
from tests.helpers.group_harness import Box, Harness, Request

pytestmark = pytest.mark.usefixtures("timer_tasks_must_not_fail")

E = ErrorCode
TP = TopicPartition("orders", 0)
PID, EPOCH = 42, 3


def txn_commit(
    h: Harness,
    offset: int,
    group: str = "g",
    member_id: str = "",
    generation: int = -1,
    producer_id: int = PID,
    request: Request | None = None,
) -> Box:
    box = Box()
    handle_txn_commit_offsets(
        h.coord,
        group,
        producer_id,
        EPOCH,
        member_id,
        None,
        generation,
        {TP: (offset, 7, "meta")},
        box,
        request,
    )
    return box


def fetch(h: Harness, group: str = "g", require_stable: bool = False) -> tuple[int, ErrorCode]:
    result = h.manager.get_offsets(group, [TP], require_stable)[TP]
    return result.offset, result.error


def marker(h: Harness, commit: bool, group: str = "g", producer_id: int = PID) -> int:
    partition = h.manager.partition_for(group)
    h.log.write_marker(partition, producer_id, commit)
    return handle_txn_completion(h.manager, producer_id, {partition}, commit)


def test_offsets_are_pending_until_the_commit_marker() -> None:
    h = Harness()
    assert txn_commit(h, 10).result == {TP: E.none}
    assert fetch(h) == (-1, E.none)
    assert fetch(h, require_stable=True) == (-1, E.unstable_offset_commit)
    assert marker(h, commit=True) == 1
    assert fetch(h, require_stable=True) == (10, E.none)
    group = h.coord.get_group("g")
    assert group is not None and group.offsets[TP].leader_epoch == 7


def test_an_abort_marker_drops_them() -> None:
    h = Harness()
    h.commit("g", "", None, -1, {TP: (5, -1, "")})
    txn_commit(h, 10)
    marker(h, commit=False)
    assert fetch(h, require_stable=True) == (5, E.none)


def test_a_marker_of_another_producer_or_partition_changes_nothing() -> None:
    h = Harness()
    txn_commit(h, 10)
    assert marker(h, commit=True, producer_id=PID + 1) == 0
    other_partition = h.manager.partition_for("g") + 1
    assert handle_txn_completion(h.manager, PID, {other_partition}, True) == 0
    assert fetch(h, require_stable=True) == (-1, E.unstable_offset_commit)


def test_the_commit_is_written_as_the_producers_transactional_batch() -> None:
    h = Harness()
    h.log.hold = True
    request = Request()
    box = txn_commit(h, 10, request=request)
    assert not box.done and request.purgatory is PurgatoryName.PRODUCE
    h.log.complete()
    assert box.result == {TP: E.none}
    (entry,) = h.log.read_log(h.manager.partition_for("g"))
    assert getattr(entry, "producer_id", None) == PID


def test_a_failed_append_forgets_the_offsets_and_fenced_producers_learn_it() -> None:
    h = Harness()
    h.log.fail_next = E.not_enough_replicas
    assert txn_commit(h, 10).result == {TP: E.coordinator_not_available}
    assert fetch(h, require_stable=True) == (-1, E.none)
    h.log.fail_next = E.producer_fenced
    assert txn_commit(h, 10).result == {TP: E.producer_fenced}


def test_members_are_validated_when_they_say_who_they_are() -> None:
    h = Harness()
    (member,), generation = h.stable_group(1)
    assert txn_commit(h, 1, member_id=member, generation=generation + 1).result == {
        TP: E.illegal_generation
    }
    assert txn_commit(h, 1, member_id="stranger", generation=generation).result == {
        TP: E.unknown_member_id
    }
    assert txn_commit(h, 1, member_id=member, generation=generation).result == {TP: E.none}
    # Older clients name no member: accepted whatever the group's state (as Kafka).
    assert txn_commit(h, 2).result == {TP: E.none}


def test_a_group_with_only_pending_offsets_is_not_expired() -> None:
    h = Harness()
    txn_commit(h, 10)
    h.manager.cleanup_group_metadata()
    assert h.coord.get_group("g") is not None


def test_a_reload_keeps_open_transactions_pending_and_applies_finished_ones() -> None:
    log = InMemoryGroupLog()
    h = Harness(log=log)
    txn_commit(h, 10, group="g")
    txn_commit(h, 20, group="done", producer_id=PID + 1)
    marker(h, commit=True, group="done", producer_id=PID + 1)
    txn_commit(h, 30, group="aborted", producer_id=PID + 2)
    marker(h, commit=False, group="aborted", producer_id=PID + 2)

    restarted = Harness(log=log)
    restarted.load()
    assert fetch(restarted, "g", require_stable=True) == (-1, E.unstable_offset_commit)
    assert fetch(restarted, "done", require_stable=True) == (20, E.none)
    assert fetch(restarted, "aborted", require_stable=True) == (-1, E.none)
    # The open transaction's marker arrives at the new coordinator.
    marker(restarted, commit=True, group="g")
    assert fetch(restarted, "g", require_stable=True) == (10, E.none)
