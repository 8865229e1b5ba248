"""The streams group's checkers (`simulation/streams_invariants.py`) on small histories:
each says no to the history that breaks its promise, with the entries that show it, and
yes to the moves Kafka makes (a revoked task given on, a zombie's task moved after it was
expired)."""

from __future__ import annotations

from simulation.history import History, StreamsAssignment, Task
from simulation.run_row import history_document
from simulation.streams_invariants import check_streams
from simulation.verdict import Verdict

TASKS: tuple[Task, ...] = (("0", 0), ("0", 1), ("1", 0), ("1", 1))


def _a(
    member: str,
    at_s: float,
    epoch: int,
    active: tuple[Task, ...],
    standby: tuple[Task, ...] = (),
    event: str = "heartbeat",
) -> StreamsAssignment:
    return StreamsAssignment(member, at_s, event, epoch, active, standby, ())


def _history(*entries: StreamsAssignment) -> History:
    history = History(streams=list(entries), streams_tasks=TASKS)
    history.streams_final = {"a": ((("0", 0), ("1", 0)), (("1", 1),))}
    history.streams_final["b"] = ((("0", 1), ("1", 1)), (("1", 0),))
    return history


def _verdict(history: History, name: str) -> Verdict:
    return next(v for v in check_streams(history) if v.name == name)


MOVES = "a streams task moves only after its owner revoked it"


def test_a_task_given_after_its_owner_revoked_it_is_kafkas_handoff() -> None:
    history = _history(
        _a("a", 1.0, 4, (("0", 0), ("0", 1))),
        _a("a", 2.0, 4, (("0", 0),)),  # revokes 0_1 ...
        _a("b", 2.5, 5, (("0", 1),)),  # ... before b is given it
        _a("a", 2.6, 5, (("0", 0),)),
    )
    assert all(v.held for v in check_streams(history))


def test_a_task_given_before_its_owner_revoked_it_is_caught_with_the_three_entries() -> None:
    history = _history(
        _a("a", 1.0, 4, (("0", 0), ("0", 1))),
        _a("b", 2.0, 5, (("0", 1),)),
        _a("a", 2.5, 5, (("0", 0),)),
    )
    verdict = _verdict(history, MOVES)
    assert not verdict.held
    assert "task 0_1 held since 1.000s a" in verdict.detail
    assert "given to another: 2.000s b" in verdict.detail
    assert "revoked: 2.500s a" in verdict.detail


def test_a_zombie_expired_by_the_coordinator_may_hold_its_task_until_it_hears_so() -> None:
    history = _history(
        _a("a", 1.0, 4, (("0", 1),)),
        _a("b", 50.0, 6, (("0", 1),)),
        _a("a", 60.0, 0, (), event="fenced"),
    )
    assert _verdict(history, MOVES).held


def test_two_members_active_on_one_task_at_one_epoch_is_caught() -> None:
    history = _history(_a("a", 1.0, 4, (("0", 1),)), _a("b", 1.0, 4, (("0", 1),)))
    verdict = _verdict(history, "one active owner per streams task per epoch")
    assert not verdict.held
    assert "task 0_1 at epoch 4" in verdict.detail


def test_a_task_active_and_standby_on_one_member_is_caught() -> None:
    history = _history(_a("a", 1.0, 4, (("1", 0),), (("1", 0),)))
    assert not _verdict(history, "no streams task both active and standby").held


def test_a_group_that_left_a_task_unowned_has_not_converged() -> None:
    history = _history()
    assert _verdict(history, "the streams group converges").held
    history.streams_final["b"] = ((("0", 1),), (("1", 0),))
    verdict = _verdict(history, "the streams group converges")
    assert not verdict.held
    assert "1 unowned" in verdict.detail


def test_a_broken_seeds_history_file_has_the_streams_assignments() -> None:
    document = history_document(_history(_a("a", 1.0, 4, (("0", 1),), (("1", 0),))))
    assert document["streams"] == [
        {
            "member": "a",
            "at_s": 1.0,
            "event": "heartbeat",
            "member_epoch": 4,
            "active": ["0_1"],
            "standby": ["1_0"],
            "warmup": [],
        }
    ]
    assert document["streams_final"]["b"] == {"active": ["0_1", "1_1"], "standby": ["1_0"]}
