"""Kafka 4.2's ``StickyTaskAssignor`` (KIP-1071's default, ``sticky``).

Input: each member's process and its current target tasks (``AssignmentMemberSpec``),
the subtopologies with their task counts and whether they are stateful
(``TopologyDescriber``), and ``num.standby.replicas``. Output: each member's tasks.

Quotas: ``active_tasks_per_member`` is ceil(active tasks / members),
``total_tasks_per_member`` ceil((active + standby tasks) / members); each shrinks as
members fill up (Kafka's ``maybeUpdate*TasksPerMember``), so the spread stays within one.

Active tasks, in three passes (sorted by partition, then subtopology):

1. each task goes back to the member that had it, while that member is under quota;
2. then to the least loaded member that had it as a standby, under quota;
3. the rest (sorted by subtopology, then partition: a range-like first assignment) to
   the least loaded process (tasks / members), and there to its least loaded member.

Standby tasks (stateful subtopologies only, ``num.standby.replicas`` copies each): first
to the member that had the task active, then to one that had it as a standby (least
loaded), if under quota and its process holds no copy of the task yet; the copies left go
to the least loaded processes that hold no copy of the task. A process never gets two
copies of one task, so a standby is never on the process running the active; when
there are not enough processes the copy is left out, with Kafka's warning.

Kafka 4.2's assignor assigns no warm-up tasks (its heartbeat refuses warm-up tasks as
"not supported yet"); the result carries them empty.

Where this differs from Kafka: ties (equal loads) are broken by process id and member
id, so the result is deterministic (Kafka's priority queue and hash maps leave them to
iteration order).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from broker.group.streams.tasks_tuple import TaskId, TasksTuple, of_task_ids, task_ids

log = logging.getLogger("broker.group.streams")

NUM_STANDBY_REPLICAS = "num.standby.replicas"


@dataclass(frozen=True, slots=True)
class AssignmentMemberSpec:
    process_id: str
    current: TasksTuple  # the member's target assignment so far


@dataclass(frozen=True, slots=True)
class SubtopologyTasks:
    """What the assignor knows of a subtopology (Kafka's ``TopologyDescriber``)."""

    subtopology_id: str
    num_tasks: int
    stateful: bool


class TaskAssignorError(Exception):
    """Kafka's ``TaskAssignorException``."""


@dataclass
class _Process:
    process_id: str
    counts: dict[str, int] = field(default_factory=dict)  # member -> tasks
    active: dict[str, set[TaskId]] = field(default_factory=dict)
    standby: dict[str, set[TaskId]] = field(default_factory=dict)
    tasks: set[TaskId] = field(default_factory=set)

    def add_member(self, member_id: str) -> None:
        self.counts[member_id] = 0
        self.active[member_id] = set()
        self.standby[member_id] = set()

    @property
    def load(self) -> float:
        return len(self.tasks) / len(self.counts)

    def add_task(self, member_id: str, task: TaskId, active: bool) -> int:
        (self.active if active else self.standby)[member_id].add(task)
        self.tasks.add(task)
        self.counts[member_id] += 1
        return self.counts[member_id]

    def add_task_to_least_loaded_member(self, task: TaskId, active: bool) -> int:
        member_id = min(self.counts, key=lambda m: (self.counts[m], m))
        return self.add_task(member_id, task, active)


class StickyTaskAssignor:
    """See the module docstring; one ``assign`` call holds no state afterwards."""

    name = "sticky"

    def assign(
        self,
        members: Mapping[str, AssignmentMemberSpec],
        subtopologies: list[SubtopologyTasks],
        configs: Mapping[str, str],
    ) -> dict[str, TasksTuple]:
        return _Assignment(
            members, subtopologies, int(configs.get(NUM_STANDBY_REPLICAS, "0"))
        ).run()


def _tasks_per_member(tasks: int, members: int) -> int:
    return math.ceil(tasks / members) if members else 0


class _Assignment:
    def __init__(
        self,
        members: Mapping[str, AssignmentMemberSpec],
        subtopologies: list[SubtopologyTasks],
        standby_replicas: int,
    ) -> None:
        self.members = members
        self.standby_replicas = standby_replicas
        ordered = sorted(subtopologies, key=lambda s: s.subtopology_id)
        self.active_tasks = [(s.subtopology_id, p) for s in ordered for p in range(s.num_tasks)]
        self.stateful_tasks = [
            (s.subtopology_id, p) for s in ordered if s.stateful for p in range(s.num_tasks)
        ]
        self.total_active = len(self.active_tasks)
        self.total = self.total_active + len(self.stateful_tasks) * standby_replicas
        self.members_with_active_capacity = self.members_with_capacity = len(members)
        self.active_per_member = _tasks_per_member(self.total_active, len(members))
        self.total_per_member = _tasks_per_member(self.total, len(members))
        self.processes: dict[str, _Process] = {}
        self.prev_active: dict[TaskId, tuple[str, str]] = {}  # task -> (process, member)
        self.prev_standby: dict[TaskId, list[tuple[str, str]]] = {}
        for member_id in sorted(members):
            spec = members[member_id]
            self.processes.setdefault(spec.process_id, _Process(spec.process_id)).add_member(
                member_id
            )
            for task in task_ids(spec.current.active):
                self.prev_active[task] = (spec.process_id, member_id)
            for task in task_ids(spec.current.standby):
                self.prev_standby.setdefault(task, []).append((spec.process_id, member_id))

    def run(self) -> dict[str, TasksTuple]:
        if self.active_tasks and not self.members:
            raise TaskAssignorError("No member available to assign active tasks.")
        self._assign_active()
        if self.standby_replicas > 0:
            self._assign_standby()
        result = {}
        for process in self.processes.values():
            for member_id in process.counts:
                result[member_id] = TasksTuple(
                    of_task_ids(process.active[member_id]), of_task_ids(process.standby[member_id])
                )
        return result

    # ---------------------------------------------------------------- quotas
    def _added(self, count: int, active: bool) -> None:
        if active and count == self.active_per_member:
            self.members_with_active_capacity -= 1
            self.total_active -= count
            self.active_per_member = _tasks_per_member(
                self.total_active, self.members_with_active_capacity
            )
        if count == self.total_per_member:
            self.members_with_capacity -= 1
            self.total -= count
            self.total_per_member = _tasks_per_member(self.total, self.members_with_capacity)

    def _give(self, process_id: str, member_id: str, task: TaskId, active: bool) -> None:
        self._added(self.processes[process_id].add_task(member_id, task, active), active)

    def _least_loaded(self, exclude_task: TaskId | None = None) -> _Process | None:
        candidates = [
            p
            for p in self.processes.values()
            if exclude_task is None or exclude_task not in p.tasks
        ]
        return min(candidates, key=lambda p: (p.load, p.process_id), default=None)

    def _prev_with_least_load(
        self, holders: list[tuple[str, str]] | None, task: TaskId | None
    ) -> tuple[str, str] | None:
        """Kafka's ``findPrevMemberWithLeastLoad``."""
        if not holders:
            return None
        best = holders[0]
        for holder in holders[1:]:
            process, candidate = self.processes[holder[0]], self.processes[best[0]]
            if (
                process.load < candidate.load
                and (task is None or task not in process.tasks)
                and process.counts[holder[1]] < candidate.counts[best[1]]
            ):
                best = holder
        if task is None or task not in self.processes[best[0]].tasks:
            return best
        return None

    # ---------------------------------------------------------------- active
    def _assign_active(self) -> None:
        remaining = sorted(self.active_tasks, key=lambda t: (t[1], t[0]))

        def previous_active(task: TaskId) -> tuple[str, str] | None:
            return self.prev_active.get(task)

        def previous_standby(task: TaskId) -> tuple[str, str] | None:
            return self._prev_with_least_load(self.prev_standby.get(task), None)

        for previous in (previous_active, previous_standby):
            left = []
            for task in remaining:
                holder = previous(task)
                if holder is not None and (
                    self.processes[holder[0]].counts[holder[1]] < self.active_per_member
                ):
                    self._give(holder[0], holder[1], task, active=True)
                else:
                    left.append(task)
            remaining = left
        for task in sorted(remaining):
            process = self._least_loaded()
            if process is None:
                raise TaskAssignorError(f"No process available to assign active task {task}.")
            self._added(process.add_task_to_least_loaded_member(task, True), active=True)

    # --------------------------------------------------------------- standby
    def _assign_standby(self) -> None:
        to_least_loaded: list[tuple[TaskId, int]] = []
        for task in sorted(self.stateful_tasks, key=lambda t: (t[1], t[0]), reverse=True):
            for copy in range(self.standby_replicas):
                if not self._standby_to_previous_holder(task):
                    to_least_loaded.append((task, self.standby_replicas - copy))
                    break
        for task, copies in sorted(to_least_loaded, reverse=True):
            for copy in range(copies):
                process = self._least_loaded(exclude_task=task)
                if process is None:
                    log.warning(
                        "Unable to assign %d of %d standby tasks for task [%s_%d]. There is not "
                        "enough available capacity. You should increase the number of threads "
                        "and/or application instances to maintain the requested number of "
                        "standby replicas.",
                        copies - copy,
                        self.standby_replicas,
                        *task,
                    )
                    break
                self._added(process.add_task_to_least_loaded_member(task, False), active=False)

    def _standby_to_previous_holder(self, task: TaskId) -> bool:
        active = self.prev_active.get(task)
        if active is not None:
            process = self.processes[active[0]]
            if task not in process.tasks and process.counts[active[1]] < self.total_per_member:
                self._give(active[0], active[1], task, active=False)
                return True
        holder = self._prev_with_least_load(self.prev_standby.get(task), task)
        if (
            holder is not None
            and self.processes[holder[0]].counts[holder[1]] < self.total_per_member
        ):
            self._give(holder[0], holder[1], task, active=False)
            return True
        return False
