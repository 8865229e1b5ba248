"""Planted bugs are switches of the simulation alone: in for a block, gone after it; and
the share and streams-assignor bugs, on a share partition or an assignor alone, do the
wrong thing they name."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from broker.group.group_metadata import GroupMetadata
from broker.group.group_state import GroupState
from broker.group.member_metadata import MemberMetadata
from broker.group.streams.sticky_task_assignor import (
    AssignmentMemberSpec,
    StickyTaskAssignor,
    SubtopologyTasks,
)
from broker.group.streams.streams_group import StreamsGroup
from broker.group.streams.streams_group_member import StreamsGroupMember
from broker.group.streams.tasks_tuple import TaskId, TasksTuple, task_ids
from broker.replica.partition import Partition
from broker.share.share_partition import (
    AcknowledgementBatch,
    AcknowledgeType,
    SharePartition,
    SharePartitionConfig,
)
from purgatory import ManualClock, SystemTimer
from simulation.planted import PLANTED, planted
from tests.helpers.share_writes import recording


@pytest.mark.parametrize("name", sorted(PLANTED))
def test_each_bug_replaces_what_it_names_and_only_inside_the_block(name: str) -> None:
    import broker.group.consumer.current_assignment_builder as cab
    import broker.group.group_coordinator as gc
    import broker.group.group_metadata as gm
    import broker.group.share.share_group_coordinator as sgc
    import broker.group.streams.sticky_task_assignor as sta
    import broker.group.streams.streams_group as sg
    import broker.log.memory_log as ml
    import broker.replica.delayed_produce as dp
    import broker.replica.producer_state as ps
    import broker.replica.replica_fetcher as rf
    import broker.security.authorizer.standard_authorizer as sa
    import broker.security.plain as pl
    import broker.share.share_partition as sp
    import broker.txn.transaction_marker_channel_manager as tm

    owners = {
        "Partition": Partition,
        "DelayedProduce": dp.DelayedProduce,
        "ReplicaFetcher": rf.ReplicaFetcher,
        "TransactionMarkerChannelManager": tm.TransactionMarkerChannelManager,
        "GroupCoordinator": gc.GroupCoordinator,
        "GroupMetadata": gm.GroupMetadata,
        "MemoryLog": ml.MemoryLog,
        "ProducerStateEntry": ps.ProducerStateEntry,
        "CurrentAssignmentBuilder": cab.CurrentAssignmentBuilder,
        "SharePartition": sp.SharePartition,
        "ShareGroupCoordinator": sgc.ShareGroupCoordinator,
        "StreamsGroup": sg.StreamsGroup,
        "StickyAssignment": sta._Assignment,
        "StandardAuthorizer": sa.StandardAuthorizer,
        "PlainSaslServer": pl.PlainSaslServer,
    }
    owner_name, method = PLANTED[name].where.rsplit(".", 1)
    owner = owners[owner_name]
    before = owner.__dict__[method]
    with planted(name):
        assert owner.__dict__[method] is not before
    assert owner.__dict__[method] is before


def test_no_bug_is_planted_by_default_and_an_unknown_name_is_refused() -> None:
    before = dict(Partition.__dict__)
    with planted(None):
        assert dict(Partition.__dict__) == before
    with pytest.raises(ValueError, match="--list-planted"), planted("no-such-bug"):
        pass
    assert len(PLANTED) >= 10


def _share_partition(limit: int = 5) -> tuple[SharePartition, ManualClock, SystemTimer]:
    """As on a simulated broker: with a persister, whose writes are made at once."""
    clock = ManualClock()
    timer = SystemTimer(clock)
    config = SharePartitionConfig(record_lock_duration_ms=1000, delivery_count_limit=limit)
    on_write = recording([])
    sp = SharePartition("g", "t", 0, 0, config, timer, initialized=False, on_write=on_write)
    sp.initialize(0, [])
    return sp, clock, timer


def _deliveries_of_offset_0(limit: int) -> list[int]:
    """Every delivery count offset 0 is acquired with, RELEASEd every time (as the share
    members do to every 37th offset), until it is acquired no more."""
    sp, _, _ = _share_partition(limit)
    counts: list[int] = []
    while len(counts) <= limit + 2 and (acquired := sp.acquire("m1", [(0, 0)], 10)):
        counts.append(acquired[0].delivery_count)
        release = AcknowledgementBatch(0, 0, (int(AcknowledgeType.RELEASE),))
        assert sp.acknowledge("m1", [release]) == (ErrorCode.none, None)
    return counts


def test_share_delivery_limit_off_by_one_delivers_once_past_the_limit() -> None:
    assert _deliveries_of_offset_0(3) == [1, 2, 3]
    with planted("share-delivery-limit-off-by-one"):
        assert _deliveries_of_offset_0(3) == [1, 2, 3, 4]
    assert _deliveries_of_offset_0(3) == [1, 2, 3]


def _accepted_offset_1_after_the_lock_expires() -> tuple[list[tuple[int, int]], ErrorCode]:
    """Offsets 0-1 acquired by m1 under one lock; 1 ACCEPTed, 0 left to its lock (it holds
    the start offset back); after the lock expires, what m2 acquires, as (first, last),
    and the answer to m2's ACCEPT of offset 1."""
    sp, clock, timer = _share_partition()
    sp.acquire("m1", [(0, 1)], 10)
    accept = AcknowledgementBatch(1, 1, (int(AcknowledgeType.ACCEPT),))
    assert sp.acknowledge("m1", [accept]) == (ErrorCode.none, None)
    clock.advance(1000)
    timer.advance_clock()
    again = [(r.first_offset, r.last_offset) for r in sp.acquire("m2", [(0, 1)], 10)]
    return again, sp.acknowledge("m2", [accept])[0]


def test_share_accept_keeps_lock_redelivers_an_accepted_record() -> None:
    correct = ([(0, 0)], ErrorCode.invalid_record_state)
    assert _accepted_offset_1_after_the_lock_expires() == correct
    with planted("share-accept-keeps-lock"):
        assert _accepted_offset_1_after_the_lock_expires() == ([(0, 1)], ErrorCode.none)
    assert _accepted_offset_1_after_the_lock_expires() == correct


def _tasks_in_two_roles_of_a_lone_member() -> set[TaskId]:
    """A streams group's first member alone, one standby replica asked for: the tasks the
    assignor gives it as active and as standby."""
    member = {"a": AssignmentMemberSpec("process-a", TasksTuple())}
    topology = [SubtopologyTasks("0", 2, stateful=True)]
    assigned = StickyTaskAssignor().assign(member, topology, {"num.standby.replicas": "1"})["a"]
    return set(task_ids(assigned.active)) & set(task_ids(assigned.standby))


def test_streams_standby_beside_active_gives_a_task_in_two_roles() -> None:
    assert _tasks_in_two_roles_of_a_lone_member() == set()
    with planted("streams-standby-beside-active"):
        assert _tasks_in_two_roles_of_a_lone_member() == {("0", 0), ("0", 1)}
    assert _tasks_in_two_roles_of_a_lone_member() == set()


def _generations_of_a_group_that_loses_a_member() -> list[int]:
    """A classic group's generations: two members, then one left (and one joined)."""
    group = GroupMetadata("g", GroupState.EMPTY, ManualClock())
    seen = []
    for change in (("add", "a"), ("add", "b"), ("remove", "a"), ("add", "c")):
        if change[0] == "add":
            group.add(
                MemberMetadata(change[1], None, "c", "h", 1000, 1000, "consumer", [("range", b"")])
            )
        else:
            group.remove(change[1])
        group.transition_to(GroupState.PREPARING_REBALANCE)
        group.init_next_generation()
        seen.append(group.generation_id)
    return seen


def test_generation_kept_when_members_leave_reuses_the_leavers_generation() -> None:
    assert _generations_of_a_group_that_loses_a_member() == [1, 2, 3, 4]
    with planted("generation-kept-when-members-leave"):
        assert _generations_of_a_group_that_loses_a_member() == [1, 2, 2, 3]
    assert _generations_of_a_group_that_loses_a_member() == [1, 2, 3, 4]


def _holder_of_task_0_0_after_its_member_left() -> str | None:
    """A streams member running task 0_0 is removed: who the group says still holds it."""
    group = StreamsGroup("app")
    member = StreamsGroupMember(
        "m1", process_id="process-1", assigned_tasks=TasksTuple.of({"0": [0]})
    )
    group.update_member(member)
    assert group.current_active_task_process_id("0", 0) == "process-1"
    group.remove_member("m1")
    return group.current_active_task_process_id("0", 0)


def test_streams_removed_member_keeps_its_tasks_in_the_index() -> None:
    assert _holder_of_task_0_0_after_its_member_left() is None
    with planted("streams-removed-member-keeps-its-tasks"):
        assert _holder_of_task_0_0_after_its_member_left() == "process-1"
    assert _holder_of_task_0_0_after_its_member_left() is None
