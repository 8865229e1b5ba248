"""Kafka's ``TasksTuple``: a member's active, standby and warm-up tasks, immutable.

A task is a subtopology and a partition (Kafka's ``TaskId``); a set of tasks is kept as
``{subtopology_id: frozenset(partitions)}`` without empty entries, so that two equal sets
compare equal and a member before and after a heartbeat can be compared whole (as
``ConsumerGroupMember``'s assignments are).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

Tasks = Mapping[str, frozenset[int]]
TaskId = tuple[str, int]


def tasks(assignment: Mapping[str, Iterable[int]]) -> dict[str, frozenset[int]]:
    """``assignment`` normalized: frozensets, no subtopology without partitions."""
    return {s: frozenset(ps) for s, ps in sorted(assignment.items()) if ps}


def task_ids(assignment: Tasks) -> Iterator[TaskId]:
    for subtopology_id, partitions in sorted(assignment.items()):
        for partition in sorted(partitions):
            yield subtopology_id, partition


def of_task_ids(ids: Iterable[TaskId]) -> dict[str, frozenset[int]]:
    grouped: dict[str, set[int]] = {}
    for subtopology_id, partition in ids:
        grouped.setdefault(subtopology_id, set()).add(partition)
    return tasks(grouped)


def _union(a: Tasks, b: Tasks) -> dict[str, frozenset[int]]:
    return tasks({s: a.get(s, frozenset()) | b.get(s, frozenset()) for s in {*a, *b}})


def _intersects(a: Tasks, b: Tasks) -> bool:
    return any(a.get(s, frozenset()) & ps for s, ps in b.items())


@dataclass(frozen=True, slots=True)
class TasksTuple:
    """Active, standby and warm-up tasks (Kafka's ``TasksTuple``)."""

    active: Tasks = field(default_factory=dict)
    standby: Tasks = field(default_factory=dict)
    warmup: Tasks = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        active: Mapping[str, Iterable[int]] | None = None,
        standby: Mapping[str, Iterable[int]] | None = None,
        warmup: Mapping[str, Iterable[int]] | None = None,
    ) -> TasksTuple:
        return cls(tasks(active or {}), tasks(standby or {}), tasks(warmup or {}))

    def is_empty(self) -> bool:
        return not (self.active or self.standby or self.warmup)

    def merge(self, other: TasksTuple) -> TasksTuple:
        """Kafka's ``merge``: the union of each kind."""
        return TasksTuple(
            _union(self.active, other.active),
            _union(self.standby, other.standby),
            _union(self.warmup, other.warmup),
        )

    def contains_any(self, other: TasksTuple) -> bool:
        """Kafka's ``containsAny``: a task of ``other`` is here, of the same kind."""
        return (
            _intersects(self.active, other.active)
            or _intersects(self.standby, other.standby)
            or _intersects(self.warmup, other.warmup)
        )

    def num_tasks(self) -> int:
        return sum(
            len(ps) for kind in (self.active, self.standby, self.warmup) for ps in kind.values()
        )


EMPTY = TasksTuple()
