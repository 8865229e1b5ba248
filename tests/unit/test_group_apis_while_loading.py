"""Every group and offset API's answer while the group's ``__consumer_offsets`` partition
loads, through the dispatcher, as Kafka answers it (GroupCoordinatorService in Kafka 4,
the classic GroupCoordinator before it), and the normal answers once it is loaded.

The load is held by a ``ManualLoadScheduler`` until the test runs it. Kafka answers per
API: Heartbeat NONE (respond blindly: the member keeps its generation), SyncGroup
REBALANCE_IN_PROGRESS (the rebalance was lost with the failover; Kafka 4 passes
COORDINATOR_LOAD_IN_PROGRESS, which clients do not expect there: see the handler),
ListGroups COORDINATOR_LOAD_IN_PROGRESS at the top (its list would be incomplete), and
every other API COORDINATOR_LOAD_IN_PROGRESS where it puts its errors (the group, each
partition), which every client retries.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.coordinator.coordinator_loader import ManualLoadScheduler
from protocol.builders import request_builder
from tests.helpers.dispatch_node import Node, dispatch_node

E = ErrorCode
GROUP = "loading-group"
TOPIC = "t"
LOADING = E.coordinator_load_in_progress

JOIN_GROUP, SYNC_GROUP, HEARTBEAT, LEAVE_GROUP = 11, 14, 12, 13
OFFSET_COMMIT, OFFSET_FETCH, TXN_OFFSET_COMMIT = 8, 9, 28
DESCRIBE_GROUPS, LIST_GROUPS, DELETE_GROUPS, OFFSET_DELETE = 15, 16, 42, 47


@pytest.fixture
async def loading() -> AsyncIterator[tuple[Node, ManualLoadScheduler]]:
    """Broker 0 leads ``__consumer_offsets``; its load waits for the test."""
    scheduler = ManualLoadScheduler()
    node = dispatch_node(load_scheduler=lambda: scheduler)
    services = node.dispatcher.services
    await services.replica_manager.start()
    await services.coordinators.group.start()
    services.metadata.create_topic(TOPIC, 1, 1, {})
    services.coordinators.group_metadata_manager.ensure_offsets_topic()
    assert services.coordinators.group_metadata_manager.check_coordinator(GROUP) is LOADING
    yield node, scheduler
    await services.coordinators.group.stop()
    await services.replica_manager.stop()


def request(node: Node, api_key: int, version: int, message: str, **fields: Any) -> Any:
    body = getattr(request_builder(api_key, version), message)(**fields)
    return node.answer(node.send(api_key, version, body))


def join_group(node: Node) -> Any:
    b = request_builder(JOIN_GROUP, 9)
    return request(
        node,
        JOIN_GROUP,
        9,
        "JoinGroupRequest",
        group_id=GROUP,
        session_timeout=10_000,
        rebalance_timeout=10_000,
        member_id="m-1",
        group_instance_id=None,
        protocol_type="consumer",
        protocols=(b.JoinGroupRequestProtocol(name="range", metadata=b""),),
        reason=None,
    )


def sync_group(node: Node) -> Any:
    return request(
        node,
        SYNC_GROUP,
        5,
        "SyncGroupRequest",
        group_id=GROUP,
        generation_id=3,
        member_id="m-1",
        group_instance_id=None,
        protocol_type="consumer",
        protocol_name="range",
        assignments=(),
    )


def heartbeat(node: Node) -> Any:
    return request(
        node,
        HEARTBEAT,
        4,
        "HeartbeatRequest",
        group_id=GROUP,
        generation_id=3,
        member_id="m-1",
        group_instance_id=None,
    )


def leave_group(node: Node) -> Any:
    b = request_builder(LEAVE_GROUP, 5)
    member = b.MemberIdentity(member_id="m-1", group_instance_id=None, reason=None)
    return request(node, LEAVE_GROUP, 5, "LeaveGroupRequest", group_id=GROUP, members=(member,))


def offset_commit(node: Node) -> Any:
    b = request_builder(OFFSET_COMMIT, 8)
    partition = b.OffsetCommitRequestPartition(
        partition_index=0, committed_offset=5, committed_leader_epoch=-1, committed_metadata=""
    )
    return request(
        node,
        OFFSET_COMMIT,
        8,
        "OffsetCommitRequest",
        group_id=GROUP,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=(b.OffsetCommitRequestTopic(name=TOPIC, partitions=(partition,)),),
    )


def offset_fetch(node: Node) -> Any:
    b = request_builder(OFFSET_FETCH, 8)
    topics = (b.OffsetFetchRequestTopics(name=TOPIC, partition_indexes=(0,)),)
    group = b.OffsetFetchRequestGroup(group_id=GROUP, topics=topics)
    return request(
        node, OFFSET_FETCH, 8, "OffsetFetchRequest", groups=(group,), require_stable=False
    )


def txn_offset_commit(node: Node) -> Any:
    b = request_builder(TXN_OFFSET_COMMIT, 3)
    partition = b.TxnOffsetCommitRequestPartition(
        partition_index=0, committed_offset=5, committed_leader_epoch=-1, committed_metadata=""
    )
    return request(
        node,
        TXN_OFFSET_COMMIT,
        3,
        "TxnOffsetCommitRequest",
        transactional_id="tx",
        group_id=GROUP,
        producer_id=1,
        producer_epoch=0,
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        topics=(b.TxnOffsetCommitRequestTopic(name=TOPIC, partitions=(partition,)),),
    )


def describe_groups(node: Node) -> Any:
    return request(
        node,
        DESCRIBE_GROUPS,
        5,
        "DescribeGroupsRequest",
        groups=(GROUP,),
        include_authorized_operations=False,
    )


def list_groups(node: Node) -> Any:
    return request(node, LIST_GROUPS, 4, "ListGroupsRequest", states_filter=())


def delete_groups(node: Node) -> Any:
    return request(node, DELETE_GROUPS, 2, "DeleteGroupsRequest", groups_names=(GROUP,))


def offset_delete(node: Node) -> Any:
    b = request_builder(OFFSET_DELETE, 0)
    topics = (
        b.OffsetDeleteRequestTopic(
            name=TOPIC, partitions=(b.OffsetDeleteRequestPartition(partition_index=0),)
        ),
    )
    return request(node, OFFSET_DELETE, 0, "OffsetDeleteRequest", group_id=GROUP, topics=topics)


def partition_errors(response: Any) -> list[ErrorCode]:
    return [p.error_code for t in response.topics for p in t.partitions]


# (API, how to ask, the error(s) it answers while loading)
WHILE_LOADING: list[tuple[str, Callable[[Node], Any], Callable[[Any], Any], Any]] = [
    ("Heartbeat", heartbeat, lambda r: r.error_code, E.none),
    ("SyncGroup", sync_group, lambda r: r.error_code, E.rebalance_in_progress),
    ("JoinGroup", join_group, lambda r: (r.error_code, r.member_id), (LOADING, "m-1")),
    ("LeaveGroup", leave_group, lambda r: (r.error_code, r.members), (LOADING, ())),
    ("OffsetCommit", offset_commit, partition_errors, [LOADING]),
    ("TxnOffsetCommit", txn_offset_commit, partition_errors, [LOADING]),
    ("OffsetFetch", offset_fetch, lambda r: r.groups[0].error_code, LOADING),
    ("DescribeGroups", describe_groups, lambda r: r.groups[0].error_code, LOADING),
    ("ListGroups", list_groups, lambda r: r.error_code, LOADING),
    ("DeleteGroups", delete_groups, lambda r: r.results[0].error_code, LOADING),
    ("OffsetDelete", offset_delete, lambda r: r.error_code, LOADING),
]


@pytest.mark.parametrize(
    ("ask", "answer", "expected"),
    [case[1:] for case in WHILE_LOADING],
    ids=[case[0] for case in WHILE_LOADING],
)
async def test_each_group_api_answers_as_kafka_while_the_group_loads(
    loading: tuple[Node, ManualLoadScheduler],
    ask: Callable[[Node], Any],
    answer: Callable[[Any], Any],
    expected: Any,
) -> None:
    node, _ = loading
    assert answer(ask(node)) == expected


async def test_once_loaded_the_group_is_served(
    loading: tuple[Node, ManualLoadScheduler],
) -> None:
    node, scheduler = loading
    scheduler.run_all()
    assert partition_errors(offset_commit(node)) == [E.none]
    fetched = offset_fetch(node).groups[0]
    assert fetched.error_code is E.none
    assert [p.committed_offset for t in fetched.topics for p in t.partitions] == [5]
    # A member the loaded group does not know is told so, and rejoins.
    assert heartbeat(node).error_code is E.unknown_member_id
    assert list_groups(node).error_code is E.none
