"""TxnOffsetCommit's validation of who commits, on the manual clock, as Kafka 4's group
coordinator answers it (``OffsetMetadataManager.validateTransactionalOffsetCommit``,
``ConsumerGroup`` / ``ClassicGroup.validateOffsetCommit(isTransactional = true)``):
one test per answer, and the zombie of exactly-once processing — a member whose
partitions moved to another in a rebalance — fenced while the new owner commits.

A transactional commit differs from a plain OffsetCommit where the tests say so: a stale
member epoch is ILLEGAL_GENERATION (not STALE_MEMBER_EPOCH), a commit naming nobody is
accepted whatever the group holds, and CompletingRebalance refuses nothing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.coordinator.coordinator_loader import ManualLoadScheduler
from broker.group import GroupCoordinator, GroupState, TopicPartition
from broker.group.group_txn import handle_txn_commit_offsets, handle_txn_completion
from protocol.builders import request_builder
from tests.helpers.dispatch_node import Node, dispatch_node
from tests.helpers.group_harness import Box, Harness
from tests.unit.test_consumer_group_coordinator import SESSION_MS, World
from tests.unit.test_consumer_group_migration import upgraded
from tests.unit.test_group_membership import static_group

pytestmark = pytest.mark.usefixtures("timer_tasks_must_not_fail")

E = ErrorCode
TP = TopicPartition("t", 0)
PID, EPOCH = 42, 3


def txn_commit(
    coordinator: GroupCoordinator,
    member_id: str,
    generation: int,
    instance: str | None = None,
    group: str = "g",
    offset: int = 10,
    producer_id: int = PID,
) -> ErrorCode:
    box = Box()
    handle_txn_commit_offsets(
        coordinator,
        group,
        producer_id,
        EPOCH,
        member_id,
        instance,
        generation,
        {TP: (offset, -1, "")},
        box,
    )
    (error,) = box.result.values()
    assert isinstance(error, ErrorCode)
    return error


def committed(h: Harness, group: str = "g", producer_id: int = PID) -> int:
    """The transaction commits: its marker lands; the group's offset then."""
    partition = h.manager.partition_for(group)
    h.log.write_marker(partition, producer_id, True)
    handle_txn_completion(h.manager, producer_id, {partition}, True)
    return h.manager.get_offsets(group, [TP], True)[TP].offset


# ------------------------------------------------------- KIP-848 consumer group
def test_a_consumer_group_member_commits_with_its_member_epoch() -> None:
    w = World()
    a = w.member("a")
    w.converge()
    assert txn_commit(w.classic, "a", a.epoch) is E.none
    # Pending until the marker, in the offsets store of the group's id.
    assert w.h.manager.get_offsets("g", [TP], True)[TP].error is E.unstable_offset_commit
    assert committed(w.h) == 10


def test_an_unknown_member_of_a_consumer_group_is_unknown_member_id() -> None:
    w = World()
    w.member("a")
    w.converge()
    assert txn_commit(w.classic, "nobody", 1) is E.unknown_member_id
    # Generation -1 with a member id while the group has members: not a bare commit.
    assert txn_commit(w.classic, "nobody", -1) is E.unknown_member_id


def test_a_stale_member_epoch_is_illegal_generation_in_a_transaction() -> None:
    w = World()
    a = w.member("a")
    w.converge()
    assert txn_commit(w.classic, "a", a.epoch - 1) is E.illegal_generation
    assert txn_commit(w.classic, "a", a.epoch + 1) is E.illegal_generation
    assert txn_commit(w.classic, "a", -1) is E.illegal_generation
    # The same epoch in a plain OffsetCommit is STALE_MEMBER_EPOCH, as in Kafka.
    assert w.coord.validate_offset_commit("g", "a", a.epoch - 1) is E.stale_member_epoch
    assert w.h.manager.get_offsets("g", [TP], True)[TP].error is E.none  # nothing pending


def test_a_commit_naming_nobody_is_accepted_whatever_the_consumer_group_holds() -> None:
    w = World()
    w.member("a")
    w.converge()
    # An admin client, or a producer given bare group metadata (pre-KIP-447 clients).
    assert txn_commit(w.classic, "", -1) is E.none
    assert committed(w.h) == 10


def test_an_empty_consumer_group_takes_generation_minus_one() -> None:
    w = World()
    a = w.member("a")
    w.converge()
    a.send(member_epoch=-1)  # leaves
    assert w.group.num_members == 0
    assert txn_commit(w.classic, "a", -1) is E.none
    assert txn_commit(w.classic, "a", 1) is E.unknown_member_id


def test_a_classic_member_of_a_migrated_group_commits_with_its_generation() -> None:
    w = World()
    classics, c = upgraded(w)
    k = classics[0]
    assert w.group.members[k.member_id].use_classic_protocol
    assert txn_commit(w.classic, k.member_id, k.generation) is E.none
    assert txn_commit(w.classic, k.member_id, k.generation - 1) is E.illegal_generation
    assert txn_commit(w.classic, c.member_id, c.epoch) is E.none
    assert txn_commit(w.classic, "ghost", k.generation) is E.unknown_member_id


def test_a_static_consumer_group_member_is_known_by_its_member_id() -> None:
    w = World()
    w.member("a", instance_id="ia")
    w.member("b")
    w.converge()
    a = w.members[0]
    a.send(member_epoch=-2)  # leaves for a while, keeping its partitions
    a.active, a.owned = False, {}
    again = w.member("a2", instance_id="ia")
    again.heartbeat()
    w.converge()
    # The old incarnation's id is gone (Kafka ignores the instance id of a consumer
    # group's commit: no FENCED_INSTANCE_ID there); the new one commits.
    assert txn_commit(w.classic, "a", 1, instance="ia") is E.unknown_member_id
    assert txn_commit(w.classic, "a2", again.epoch, instance="ia") is E.none


# ------------------------------------------------------------------- the zombie
def test_a_member_whose_partitions_moved_is_fenced_and_the_new_owner_commits() -> None:
    w = World(partitions=2)
    a = w.member("a")
    w.converge()
    zombie_epoch = a.epoch
    assert a.count() == 2
    # b joins: a gives a partition up and moves to the new epoch; a zombie of a (a
    # producer still holding the old group metadata) commits with the old epoch.
    b = w.member("b")
    w.converge()
    assert a.count() == 1 and b.count() == 1 and a.epoch > zombie_epoch
    assert txn_commit(w.classic, "a", zombie_epoch, offset=99) is E.illegal_generation
    assert txn_commit(w.classic, "b", b.epoch, offset=11, producer_id=PID + 1) is E.none
    assert committed(w.h, producer_id=PID + 1) == 11
    # a dies: fenced at its session timeout, its partition goes to b; a's commits are
    # UNKNOWN_MEMBER_ID from then on, b's (at its new epoch) go on.
    a.active, a.owned = False, {}  # what the world checks: live members' partitions
    for _ in range(SESSION_MS // 500 + 2):
        w.h.advance(500)
        b.heartbeat()
    assert set(w.group.members) == {"b"} and b.count() == 2
    assert txn_commit(w.classic, "a", a.epoch, offset=99) is E.unknown_member_id
    assert txn_commit(w.classic, "b", b.epoch, offset=12, producer_id=PID + 1) is E.none
    assert committed(w.h, producer_id=PID + 1) == 12


# -------------------------------------------------------------- classic groups
def test_an_unknown_group_with_a_generation_is_illegal_generation() -> None:
    h = Harness()
    assert txn_commit(h.coord, "m", 1, group="nobody") is E.illegal_generation
    assert h.coord.get_group("nobody") is None
    # Generation -1 creates a simple group and commits.
    assert txn_commit(h.coord, "", -1, group="simple") is E.none
    simple = h.coord.get_group("simple")
    assert simple is not None and simple.is_in(GroupState.EMPTY)


def test_a_classic_member_with_a_wrong_generation_is_illegal_generation() -> None:
    h = Harness()
    (member,), generation = h.stable_group(1)
    assert txn_commit(h.coord, member, generation + 1) is E.illegal_generation
    assert txn_commit(h.coord, member, -1) is E.illegal_generation
    assert txn_commit(h.coord, "stranger", generation) is E.unknown_member_id
    assert txn_commit(h.coord, member, generation) is E.none


def test_a_replaced_static_classic_member_is_fenced_by_its_instance_id() -> None:
    h = Harness()
    ids = static_group(h)
    group = h.coord.get_group("g")
    assert group is not None
    generation = group.generation_id
    assert txn_commit(h.coord, ids["i-a"], generation, instance="i-a") is E.none
    assert txn_commit(h.coord, ids["i-b"], generation, instance="i-a") is E.fenced_instance_id
    assert txn_commit(h.coord, ids["i-a"], generation, instance="i-x") is E.unknown_member_id


def test_a_dead_classic_group_is_coordinator_not_available() -> None:
    h = Harness()
    assert txn_commit(h.coord, "", -1) is E.none
    group = h.coord.get_group("g")
    assert group is not None
    group.transition_to(GroupState.DEAD)
    assert txn_commit(h.coord, "", -1) is E.coordinator_not_available


def test_completing_rebalance_refuses_no_transactional_commit() -> None:
    h = Harness()
    first = h.join_new()
    h.advance_until(lambda: h.last_join.done)
    generation = h.last_join.result.generation_id
    assert h.state() is GroupState.COMPLETING_REBALANCE
    assert txn_commit(h.coord, first, generation) is E.none
    # A plain OffsetCommit is REBALANCE_IN_PROGRESS there.
    plain = h.commit("g", first, None, generation, {("t", 0): (1, -1, "")})
    assert plain == {("t", 0): E.rebalance_in_progress}


def test_a_commit_naming_nobody_is_accepted_in_a_classic_group_with_members() -> None:
    h = Harness()
    h.stable_group(1)
    assert txn_commit(h.coord, "", -1) is E.none


# ------------------------------------------------------------ not a consumer group
@pytest.fixture
async def node() -> AsyncIterator[Node]:
    scheduler = ManualLoadScheduler()
    node = dispatch_node(load_scheduler=lambda: scheduler)
    services = node.dispatcher.services
    await services.replica_manager.start()
    await services.coordinators.group.start()
    services.metadata.create_topic("t", 1, 1, {})
    services.coordinators.group_metadata_manager.ensure_offsets_topic()
    scheduler.run_all()
    yield node
    await services.coordinators.group.stop()
    await services.replica_manager.stop()


def txn_offset_commit(node: Node, group_id: str) -> list[ErrorCode]:
    b = request_builder(28, 3)
    partition = b.TxnOffsetCommitRequestPartition(
        partition_index=0, committed_offset=5, committed_leader_epoch=-1, committed_metadata=""
    )
    body: Any = b.TxnOffsetCommitRequest(
        transactional_id="tx",
        group_id=group_id,
        producer_id=1,
        producer_epoch=0,
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        topics=(b.TxnOffsetCommitRequestTopic(name="t", partitions=(partition,)),),
    )
    response = node.answer(node.send(28, 3, body))
    return [p.error_code for t in response.topics for p in t.partitions]


async def test_a_share_group_is_group_id_not_found(node: Node) -> None:
    coordinators = node.dispatcher.services.coordinators
    assert coordinators.group_metadata_manager.check_coordinator("shared") is E.none
    assert coordinators.share_group.get_or_create_group("shared") is not None
    assert txn_offset_commit(node, "shared") == [E.group_id_not_found]
