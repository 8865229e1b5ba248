"""The never-back checker for committed offsets orders commits by real time: one sent after
another was acknowledged may not go lower; two whose spans overlap have no order (seed 5 of
the swizzle fault: an answer held on a clogged link arrived after later commits)."""

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
