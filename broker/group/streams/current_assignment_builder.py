"""Kafka's streams ``CurrentAssignmentBuilder``: one reconciliation step of a member
towards its target assignment.

By the member's state:

* STABLE at an older epoch, or UNRELEASED_TASKS: compute the next assignment;
* UNREVOKED_TASKS: wait until the member's heartbeat no longer lists the tasks pending
  revocation (or lists none at all: a heartbeat without its owned tasks cannot prove
  anything), then move to the next epoch (current + 1) and compute the next assignment;
* UNKNOWN: fenced (FENCED_MEMBER_EPOCH) unless it owns nothing.

The next assignment of each kind (active, standby, warm-up) is: keep the current tasks
that are in the target; ask the member to revoke the others; add the target's new tasks
unless they are unreleased. An active task is unreleased while any process holds it
active, or this member's process holds it as a standby or warm-up; a standby or
warm-up task while this process holds it in any role. Then:

* tasks to revoke that the member still owns: UNREVOKED_TASKS at its current epoch, with
  only the kept tasks (the new ones wait for the revocation);
* else new tasks: the target epoch, STABLE (UNRELEASED_TASKS if some are not free yet);
* else: the target epoch, STABLE or UNRELEASED_TASKS.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from kio.schema.errors import ErrorCode

from broker.group.consumer.errors import ApiError
from broker.group.streams.streams_group import StreamsGroup
from broker.group.streams.streams_group_member import MemberState, StreamsGroupMember
from broker.group.streams.tasks_tuple import EMPTY, Tasks, TasksTuple, tasks

Unreleased = Callable[[str, int], bool]


def reconcile(
    group: StreamsGroup,
    member: StreamsGroupMember,
    target_epoch: int,
    target: TasksTuple,
    owned: TasksTuple | None,
) -> StreamsGroupMember:
    """The member after one step (itself when nothing moves)."""
    state = member.state
    if state is MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return member
        return _next(group, member, member.member_epoch, target_epoch, target, owned)
    if state is MemberState.UNREVOKED_TASKS:
        if owned is None or owned.contains_any(member.tasks_pending_revocation):
            return member
        return _next(group, member, member.member_epoch + 1, target_epoch, target, owned)
    if state is MemberState.UNRELEASED_TASKS:
        return _next(group, member, member.member_epoch, target_epoch, target, owned)
    if owned is None or not owned.is_empty():
        raise ApiError(
            ErrorCode.fenced_member_epoch,
            "The streams group member is in a unknown state. The member must abandon all "
            "its tasks and rejoin.",
        )
    return _next(group, member, target_epoch, target_epoch, target, owned)


def _difference(
    current: Tasks, target: Tasks, unreleased: Unreleased
) -> tuple[dict[str, frozenset[int]], dict[str, frozenset[int]], dict[str, frozenset[int]], bool]:
    kept, revoke, assign, waiting = {}, {}, {}, False
    for s in {*current, *target}:
        now, wanted = current.get(s, frozenset()), target.get(s, frozenset())
        kept[s] = now & wanted
        revoke[s] = now - kept[s]
        new = wanted - kept[s]
        free = frozenset(p for p in new if not unreleased(s, p))
        waiting |= free != new
        assign[s] = free
    return tasks(kept), tasks(revoke), tasks(assign), waiting


def _next(
    group: StreamsGroup,
    member: StreamsGroupMember,
    member_epoch: int,
    target_epoch: int,
    target: TasksTuple,
    owned: TasksTuple | None,
) -> StreamsGroupMember:
    process = member.process_id

    def held_here(s: str, p: int) -> bool:
        return (
            group.current_active_task_process_id(s, p) == process
            or process in group.current_standby_task_process_ids(s, p)
            or process in group.current_warmup_task_process_ids(s, p)
        )

    def active_unreleased(s: str, p: int) -> bool:
        return group.current_active_task_process_id(s, p) is not None or (
            process in group.current_standby_task_process_ids(s, p)
            or process in group.current_warmup_task_process_ids(s, p)
        )

    current = member.assigned_tasks
    a = _difference(current.active, target.active, active_unreleased)
    s = _difference(current.standby, target.standby, held_here)
    w = _difference(current.warmup, target.warmup, held_here)
    kept = TasksTuple(a[0], s[0], w[0])
    revoke = TasksTuple(a[1], s[1], w[1])
    assign = TasksTuple(a[2], s[2], w[2])
    waiting = a[3] or s[3] or w[3]
    if not revoke.is_empty() and (owned is None or owned.contains_any(revoke)):
        return replace(
            member.with_epochs(member_epoch),
            state=MemberState.UNREVOKED_TASKS,
            assigned_tasks=kept,
            tasks_pending_revocation=revoke,
        )
    state = MemberState.UNRELEASED_TASKS if waiting else MemberState.STABLE
    return replace(
        member.with_epochs(target_epoch),
        state=state,
        assigned_tasks=kept.merge(assign),
        tasks_pending_revocation=EMPTY,
    )
