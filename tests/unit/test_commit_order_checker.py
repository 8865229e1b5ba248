"""The never-back checkers. Committed offsets are ordered by real time: one sent after
another was acknowledged may not go lower; two whose spans overlap have no order (seed 5 of
the swizzle fault: an answer held on a clogged link arrived after later commits). A high
watermark may be lower only after a leader change (seed 27 of the all-faults campaign)."""

from __future__ import annotations

from simulation.history import History
from simulation.invariants import check_all

KEY = ("sim-group", "sim-events", 0)


def _verdict(commits: list[tuple[int, tuple[float, float]]]) -> tuple[bool, str]:
    history = History()
    for offset, span in commits:
        history.committed(*KEY, offset, span)
    (verdict,) = [v for v in check_all(history) if v.name == "committed offsets never move back"]
    return verdict.held, verdict.detail


def test_increasing_commits_hold() -> None:
    assert _verdict([(5, (1.0, 1.1)), (9, (2.0, 2.1)), (12, (3.0, 3.1))])[0]


def test_a_commit_sent_after_a_higher_one_was_acknowledged_moves_back() -> None:
    held, detail = _verdict([(9, (1.0, 1.1)), (5, (2.0, 2.1))])
    assert not held
    assert "9 -> 5" in detail


def test_a_late_answer_to_an_earlier_commit_is_not_a_step_back() -> None:
    # sent at 1.0, answered at 6.0 (held on a link) after a higher commit sent at 2.0
    assert _verdict([(9, (2.0, 2.1)), (5, (1.0, 6.0))])[0]


def _hw_verdict(seen: list[tuple[int, int]]) -> tuple[bool, str]:
    """High watermarks one consumer saw, each with the leader epoch when it saw it."""
    history = History()
    epochs = iter([e for _, e in seen])
    history.leader_epoch = lambda topic, partition: next(epochs)
    for value, _ in seen:
        history.high_watermark("watcher", "sim-out", 0, value)
    (verdict,) = [v for v in check_all(history) if v.name == "high watermark never moves back"]
    return verdict.held, verdict.detail


def test_a_high_watermark_lower_under_the_same_leader_moves_back() -> None:
    held, detail = _hw_verdict([(10, 3), (18, 3), (12, 3)])
    assert not held and "18 -> 12" in detail


def test_a_new_leaders_older_high_watermark_is_allowed() -> None:
    # seed 27 of the all-faults campaign: the lagging follower that was elected knew of 10
    held, detail = _hw_verdict([(10, 3), (18, 3), (10, 4), (18, 4)])
    assert held and "1 lower after a leader change" in detail


def test_a_high_value_first_seen_after_the_epoch_moved_is_judged_by_the_epoch_before() -> None:
    # 18 came in an answer that may have left the old leader (epoch 3) before epoch 4 began
    assert _hw_verdict([(10, 3), (18, 4), (12, 5)])[0]
    assert not _hw_verdict([(10, 4), (18, 4), (12, 4)])[0]
