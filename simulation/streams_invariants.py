"""The streams group's invariants (KIP-1071), checked on `History.streams`.

1. **One active owner per task per epoch**: at each member epoch (a target assignment
   epoch) at most one member holds a task as active -- the target gives each task to one
   member, and a member at an epoch holds part of that epoch's target.
2. **A task moves only after its owner revoked it**: Kafka's reconciliation gives an active
   task to its new owner only once no process holds it (``CurrentAssignmentBuilder``'s
   unreleased tasks): the old owner drops it, heartbeats that it did, and only then is the
   new one told. So, in the order the clients saw it, a member must never be given a task
   another member still holds -- unless that member's hold ended by being fenced: the
   coordinator expired it (its session ran out while it could not reach the coordinator),
   which is how Kafka moves a zombie's tasks, and the zombie learns it at its next
   heartbeat.
3. **Never active and standby at once**: no member holds a task in two roles.
4. **The group converges**: once the faults healed and the clients stopped, every task is
   active on exactly one live member and each stateful task has a standby on another.

Each violation prints the few history entries that show it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from simulation.clients.streams_app import STATEFUL
from simulation.history import History, StreamsAssignment, Task
from simulation.verdict import Verdict

__all__ = ["check_streams"]


def check_streams(history: History) -> list[Verdict]:
    return [
        _one_active_owner_per_epoch(history),
        _task_moves_only_after_revoked(history),
        _never_active_and_standby(history),
        _group_converges(history),
    ]


def _task(task: Task) -> str:
    return f"{task[0]}_{task[1]}"


def _tasks(tasks: tuple[Task, ...]) -> str:
    return ",".join(_task(t) for t in tasks) or "-"


def _entry(a: StreamsAssignment) -> str:
    tasks, standby = _tasks(a.active), _tasks(a.standby)
    return (
        f"{a.at_s:.3f}s {a.member} {a.event} epoch {a.member_epoch} "
        f"active {tasks} standby {standby}"
    )


def _one_active_owner_per_epoch(history: History) -> Verdict:
    owners: dict[tuple[Task, int], dict[str, StreamsAssignment]] = {}
    for a in history.streams:
        for task in a.active:
            owners.setdefault((task, a.member_epoch), {}).setdefault(a.member, a)
    shared = [(key, held) for key, held in owners.items() if len(held) > 1]
    epochs = len({a.member_epoch for a in history.streams if a.active})
    detail = f"{len(history.streams)} assignments over {epochs} epochs, {len(shared)} shared"
    if shared:
        (task, epoch), held = shared[0]
        detail += (
            f" (first: task {_task(task)} at epoch {epoch}: "
            + "; ".join(_entry(a) for a in held.values())
            + ")"
        )
    return Verdict("one active owner per streams task per epoch", not shared, detail)


@dataclass
class _Hold:
    """A member's hold of a task as active: the entry that gave it, and others' takes."""

    given: StreamsAssignment
    taken_by: list[StreamsAssignment] = field(default_factory=list)


def _task_moves_only_after_revoked(history: History) -> Verdict:
    holds: dict[Task, dict[str, _Hold]] = {}
    previous: dict[str, frozenset[Task]] = {}
    violations: list[str] = []
    moves = 0
    for a in history.streams:
        before, now = previous.get(a.member, frozenset()), frozenset(a.active)
        previous[a.member] = now
        for task in sorted(before - now):  # the hold ends: how?
            hold = holds.get(task, {}).pop(a.member, None)
            if hold is not None and hold.taken_by and a.event != "fenced":
                violations.append(_overlap(task, hold, a))
        for task in sorted(now - before):
            current = holds.setdefault(task, {})
            moves += bool(current)
            for hold in current.values():
                hold.taken_by.append(a)
            current[a.member] = _Hold(a)
    for task, current in sorted(holds.items()):  # still held at the end by two
        for hold in current.values():
            if hold.taken_by:
                violations.append(_overlap(task, hold, None))
    detail = f"{moves} tasks given while held, {len(violations)} not by a fenced holder"
    if violations:
        detail += f" (first: {violations[0]})"
    return Verdict("a streams task moves only after its owner revoked it", not violations, detail)


def _overlap(task: Task, hold: _Hold, ended: StreamsAssignment | None) -> str:
    end = f"revoked: {_entry(ended)}" if ended is not None else "never revoked"
    return (
        f"task {_task(task)} held since {_entry(hold.given)}; given to another: "
        f"{_entry(hold.taken_by[0])}; {end}"
    )


def _never_active_and_standby(history: History) -> Verdict:
    both = [a for a in history.streams if set(a.active) & (set(a.standby) | set(a.warmup))]
    detail = f"{len(history.streams)} assignments, {len(both)} with a task in two roles"
    if both:
        detail += f" (first: {_entry(both[0])})"
    return Verdict("no streams task both active and standby", not both, detail)


def _group_converges(history: History) -> Verdict:
    final = history.streams_final
    if not history.streams_tasks:
        return Verdict("the streams group converges", True, "no streams group in the run")
    actives = [t for active, _ in final.values() for t in active]
    missing = sorted(set(history.streams_tasks) - set(actives))
    twice = sorted({t for t in actives if actives.count(t) > 1})
    unguarded = _without_standby(final.values(), history.streams_tasks) if len(final) > 1 else []
    held = bool(final) and not missing and not twice and not unguarded
    detail = (
        f"{len(final)} live members, {len(history.streams_tasks)} tasks: "
        f"{len(missing)} unowned, {len(twice)} owned twice, {len(unguarded)} without a standby"
    )
    if not held:
        detail += (
            " (final: "
            + "; ".join(
                f"{m} active {_tasks(a)} standby {_tasks(s)}" for m, (a, s) in sorted(final.items())
            )
            + ")"
        )
    return Verdict("the streams group converges", held, detail)


def _without_standby(
    final: Iterable[tuple[tuple[Task, ...], tuple[Task, ...]]], tasks: tuple[Task, ...]
) -> list[Task]:
    """Stateful tasks with no standby on a member other than their active one."""
    members = list(final)
    missing = []
    for task in tasks:
        if task[0] not in STATEFUL:
            continue
        if not any(task in standby and task not in active for active, standby in members):
            missing.append(task)
    return missing
