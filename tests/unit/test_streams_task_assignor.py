"""Kafka 4.2's sticky task assignor for streams groups: balance, stickiness, standby
placement (never on the process running the active), and no warm-up tasks."""

from __future__ import annotations

from collections import Counter

from broker.group.streams.sticky_task_assignor import (
    AssignmentMemberSpec,
    StickyTaskAssignor,
    SubtopologyTasks,
)
from broker.group.streams.tasks_tuple import TaskId, TasksTuple, task_ids

TOPOLOGY = [SubtopologyTasks("0", 6, stateful=True), SubtopologyTasks("1", 6, stateful=False)]


def assign(
    members: dict[str, AssignmentMemberSpec],
    standby: int = 0,
    topology: list[SubtopologyTasks] | None = None,
) -> dict[str, TasksTuple]:
    configs = {"num.standby.replicas": str(standby)}
    return StickyTaskAssignor().assign(members, topology or TOPOLOGY, configs)


def fresh(*names: str) -> dict[str, AssignmentMemberSpec]:
    return {n: AssignmentMemberSpec(f"process-{n}", TasksTuple()) for n in names}


def actives(result: dict[str, TasksTuple]) -> dict[str, set[TaskId]]:
    return {m: set(task_ids(t.active)) for m, t in result.items()}


def test_every_active_task_once_and_balanced() -> None:
    result = assign(fresh("a", "b", "c"))
    counts = {m: len(ts) for m, ts in actives(result).items()}
    assert sum(counts.values()) == 12 and set(counts.values()) == {4}
    every = Counter(t for ts in actives(result).values() for t in ts)
    assert set(every.values()) == {1} and len(every) == 12
    assert all(t.warmup == {} for t in result.values())


def test_a_new_member_takes_only_what_balance_needs() -> None:
    first = assign(fresh("a", "b", "c"))
    members = {m: AssignmentMemberSpec(f"process-{m}", t) for m, t in first.items()} | fresh("d")
    second = assign(members)
    before, after = actives(first), actives(second)
    moved = sum(len(before[m] - after[m]) for m in before)
    assert {len(ts) for ts in after.values()} == {3}
    assert moved == 3  # exactly the three tasks d takes
    for m in before:
        assert after[m] <= before[m]


def test_a_member_leaving_hands_only_its_tasks_over() -> None:
    first = assign(fresh("a", "b", "c"))
    members = {m: AssignmentMemberSpec(f"process-{m}", t) for m, t in first.items() if m != "c"}
    second = assign(members)
    before, after = actives(first), actives(second)
    for m in ("a", "b"):
        assert before[m] <= after[m]
        assert len(after[m]) == 6


def test_standbys_only_for_stateful_subtopologies_and_never_beside_the_active() -> None:
    result = assign(fresh("a", "b", "c"), standby=1)
    standby = {m: set(task_ids(t.standby)) for m, t in result.items()}
    assert all(s == "0" for ts in standby.values() for s, _ in ts)
    assert sum(len(ts) for ts in standby.values()) == 6
    for m in result:
        assert not (standby[m] & actives(result)[m])
    totals = [len(actives(result)[m]) + len(standby[m]) for m in result]
    assert max(totals) - min(totals) <= 1


def test_two_members_of_one_process_never_hold_two_copies_of_a_task() -> None:
    members = {
        "a1": AssignmentMemberSpec("p1", TasksTuple()),
        "a2": AssignmentMemberSpec("p1", TasksTuple()),
        "b1": AssignmentMemberSpec("p2", TasksTuple()),
    }
    result = assign(members, standby=1)
    p1 = set().union(*(task_ids(result[m].active) for m in ("a1", "a2")))
    p1_standby = set().union(*(task_ids(result[m].standby) for m in ("a1", "a2")))
    assert not (p1 & p1_standby)
    assert not (set(task_ids(result["b1"].active)) & set(task_ids(result["b1"].standby)))


def test_one_process_gets_no_standby() -> None:
    result = assign(fresh("a"), standby=2)
    assert result["a"].standby == {}
    assert len(actives(result)["a"]) == 12


def test_standbys_stay_where_they_were() -> None:
    first = assign(fresh("a", "b", "c"), standby=1)
    members = {m: AssignmentMemberSpec(f"process-{m}", t) for m, t in first.items()}
    assert assign(members, standby=1) == first


def test_the_assignment_is_deterministic() -> None:
    assert assign(fresh("c", "a", "b"), standby=1) == assign(fresh("a", "b", "c"), standby=1)
