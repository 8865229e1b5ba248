"""Loading a ``__consumer_offsets`` partition in slices: its groups answer
COORDINATOR_LOAD_IN_PROGRESS until it is loaded, every other group is served meanwhile,
and a load is given up when the leadership moves on. The test runs the slices itself
(``ManualLoadScheduler``); the broker's scheduler runs one per event-loop iteration."""

from __future__ import annotations

import asyncio

import pytest
from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import OFFSETS_TOPIC
from broker.coordinator.coordinator_loader import (
    EventLoopLoadScheduler,
    LoadJob,
    LoadSteps,
    ManualLoadScheduler,
)
from broker.group import TopicPartition, group_admin, partition_for
from broker.group.group_txn import handle_txn_commit_offsets, handle_txn_completion
from tests.helpers.group_harness import Box, Harness

pytestmark = pytest.mark.usefixtures("timer_tasks_must_not_fail")

E = ErrorCode
PARTITIONS = 4
SLOW = "slow"  # its partition is the one reloaded


def other_group(same_partition: bool) -> str:
    """A group id in SLOW's partition, or in another one."""
    target = partition_for(SLOW, PARTITIONS)
    return next(
        name
        for i in range(1000)
        if (partition_for(name := f"g{i}", PARTITIONS) == target) == same_partition
    )


FAST = other_group(same_partition=False)
NEIGHBOUR = other_group(same_partition=True)


def cluster_harness() -> tuple[Harness, ManualLoadScheduler]:
    """Broker 0 leads every offsets partition (broker 1 follows), all loaded."""
    scheduler = ManualLoadScheduler()
    h = Harness(load_scheduler=scheduler, offsets_topic_num_partitions=PARTITIONS)
    h.metadata.register_broker(0, "127.0.0.1", 9092)
    h.metadata.register_broker(1, "127.0.0.1", 9093)
    h.metadata.create_topic(OFFSETS_TOPIC, PARTITIONS, 2, {}, assignment=[[0, 1]] * PARTITIONS)
    h.manager.startup(h.coord)
    scheduler.run_all()
    assert h.manager.check_coordinator(SLOW) is E.none
    return h, scheduler


def move_away_and_back(h: Harness, group: str) -> None:
    """The partition's leadership goes to broker 1 and comes back (a new epoch)."""
    partition = h.manager.partition_for(group)
    h.metadata.change_partition(OFFSETS_TOPIC, partition, leader=1)
    assert h.manager.check_coordinator(group) is E.not_coordinator
    assert h.coord.get_group(group) is None
    h.metadata.change_partition(OFFSETS_TOPIC, partition, leader=0)


def fetch(h: Harness, group: str) -> dict[tuple[str, int], int]:
    return {(tp.topic, tp.partition): p.offset for tp, p in h.manager.get_offsets(group).items()}


def test_a_partition_loads_in_slices_while_every_other_group_is_served() -> None:
    h, scheduler = cluster_harness()
    for i in range(1000):
        assert h.commit(SLOW, "", None, -1, {("t", i % 10): (i, -1, "")}) == {("t", i % 10): E.none}
    (member,), generation = h.stable_group(1, group=NEIGHBOUR)
    h.commit(NEIGHBOUR, member, None, generation, {("t", 0): (5, -1, "")})
    tp = TopicPartition("t", 0)
    assert h.commit(FAST, "", None, -1, {tp: (7, -1, "")}) == {tp: E.none}

    move_away_and_back(h, SLOW)
    slices = 0
    while scheduler.run_slice(max_units=100):
        slices += 1
        for group in (SLOW, NEIGHBOUR):
            assert h.manager.check_coordinator(group) is E.coordinator_load_in_progress
        # Another partition's group commits, fetches and rebalances meanwhile.
        assert h.manager.check_coordinator(FAST) is E.none
        assert h.commit(FAST, "", None, -1, {tp: (100 + slices, -1, "")}) == {tp: E.none}
        assert fetch(h, FAST) == {("t", 0): 100 + slices}
        error, listed = group_admin.handle_list_groups(h.manager)
        assert error is E.coordinator_load_in_progress  # as Kafka: the list is incomplete
        assert FAST in {g.group_id for g in listed}
    assert slices >= 10  # 1,000 records read 100 at a time, then decoded
    assert group_admin.handle_list_groups(h.manager)[0] is E.none

    assert h.manager.check_coordinator(SLOW) is E.none
    assert fetch(h, SLOW) == {("t", p): 990 + p for p in range(10)}
    assert fetch(h, NEIGHBOUR) == {("t", 0): 5}
    # The loaded member must heartbeat from now on, as anyone else.
    assert h.heartbeat_(member, generation, group=NEIGHBOUR) is E.none
    h.advance(10_001)
    group = h.coord.get_group(NEIGHBOUR)
    assert group is not None and not group.has(member)


def test_a_load_is_given_up_when_the_leadership_moves_on() -> None:
    h, scheduler = cluster_harness()
    for i in range(300):
        h.commit(SLOW, "", None, -1, {("t", 0): (i, -1, "")})
    partition = h.manager.partition_for(SLOW)
    move_away_and_back(h, SLOW)
    scheduler.run_slice(max_units=50)
    (job,) = scheduler.jobs
    # Broker 1 takes the partition over mid-load: the load stops, nothing is installed.
    h.metadata.change_partition(OFFSETS_TOPIC, partition, leader=1)
    assert job.cancelled and job.done
    assert partition not in h.manager.loading_partitions
    scheduler.run_all()
    assert h.manager.check_coordinator(SLOW) is E.not_coordinator
    assert h.coord.get_group(SLOW) is None

    # Back at a new epoch; a load under way at an older epoch is started again.
    h.metadata.change_partition(OFFSETS_TOPIC, partition, leader=0)
    scheduler.run_slice(max_units=50)
    (stale,) = scheduler.jobs
    h.metadata.topics[OFFSETS_TOPIC].partitions[partition].leader_epoch += 1
    h.metadata.partition_changed(OFFSETS_TOPIC)
    assert stale.cancelled
    scheduler.run_all()
    assert h.manager.check_coordinator(SLOW) is E.none
    assert fetch(h, SLOW) == {("t", 0): 299}


def test_a_load_that_finds_its_epoch_gone_installs_nothing() -> None:
    h, scheduler = cluster_harness()
    h.commit(SLOW, "", None, -1, {("t", 0): (1, -1, "")})
    partition = h.manager.partition_for(SLOW)
    move_away_and_back(h, SLOW)
    # The metadata moves without telling the manager (a notification it never got).
    h.metadata.topics[OFFSETS_TOPIC].partitions[partition].leader_epoch += 1
    scheduler.run_all()
    assert h.manager.check_coordinator(SLOW) is E.coordinator_load_in_progress
    assert h.coord.get_group(SLOW) is None


def test_a_transaction_marker_that_lands_during_a_load_applies_once_loaded() -> None:
    h, scheduler = cluster_harness()
    tp = TopicPartition("orders", 0)
    box = Box()
    handle_txn_commit_offsets(h.coord, SLOW, 42, 0, "", None, -1, {tp: (10, -1, "")}, box)
    assert box.result == {tp: E.none}
    partition = h.manager.partition_for(SLOW)
    move_away_and_back(h, SLOW)
    # WriteTxnMarkers appends the COMMIT marker (after the load's snapshot) and then
    # completes the producer's offsets: the partition is still loading.
    h.log.write_marker(partition, 42, True)
    assert handle_txn_completion(h.manager, 42, {partition}, True) == 0
    scheduler.run_all()
    offsets = h.manager.get_offsets(SLOW, [tp], require_stable=True)
    assert (offsets[tp].offset, offsets[tp].error) == (10, E.none)


async def test_the_event_loop_scheduler_lets_other_tasks_run_between_slices() -> None:
    ran: list[str] = []

    def busy() -> LoadSteps:
        for i in range(30):
            ran.append(f"load-{i}")
            yield 1

    scheduler = EventLoopLoadScheduler(max_slice_ms=0)  # one unit a slice
    job = LoadJob("busy", busy())
    scheduler.schedule(job)

    async def other() -> None:
        for i in range(3):
            ran.append(f"other-{i}")
            await asyncio.sleep(0)

    await other()
    while not job.done:
        await asyncio.sleep(0)
    assert ran.index("other-2") < ran.index("load-29")
    assert job.slices > 30 and scheduler.pending == 0
