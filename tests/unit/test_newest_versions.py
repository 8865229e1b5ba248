"""The newest versions of existing APIs (issue 31) through the dispatcher, as Kafka 4.2
answers them: Produce v13 and OffsetCommit/OffsetFetch v10 by topic id (UNKNOWN_TOPIC_ID
for an id the cluster does not know, answers by id, offsets shared with the by-name
versions), ListOffsets v11's -6, DescribeGroups v6's error messages, and
ListConfigResources (74).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.coordinator.coordinator_loader import ManualLoadScheduler
from protocol.builders import request_builder
from protocol.record_builder import build_record_batch
from tests.helpers.dispatch_node import Node, dispatch_node

E = ErrorCode
TOPIC = "t"
GROUP = "g"
PRODUCE, LIST_OFFSETS, OFFSET_COMMIT, OFFSET_FETCH = 0, 2, 8, 9
DESCRIBE_GROUPS, INCREMENTAL_ALTER_CONFIGS, LIST_CONFIG_RESOURCES = 15, 44, 74
UNKNOWN_ID = uuid.UUID(int=0xDEADBEEF)
RECORDS = build_record_batch([(None, b"v", ())], timestamp_ms=0)


@pytest.fixture
async def node() -> AsyncIterator[Node]:
    """Broker 0 with topic ``t`` (2 partitions) and ``__consumer_offsets`` loaded."""
    scheduler = ManualLoadScheduler()
    node = dispatch_node(load_scheduler=lambda: scheduler)
    services = node.dispatcher.services
    await services.replica_manager.start()
    await services.coordinators.group.start()
    services.metadata.create_topic(TOPIC, 2, 1, {})
    services.coordinators.group_metadata_manager.ensure_offsets_topic()
    scheduler.run_all()
    yield node
    await services.coordinators.group.stop()
    await services.replica_manager.stop()


def ask(node: Node, api_key: int, version: int, message: str, **fields: Any) -> Any:
    body = getattr(request_builder(api_key, version), message)(**fields)
    return node.answer(node.send(api_key, version, body))


def topic_id(node: Node) -> uuid.UUID:
    return node.dispatcher.services.metadata.topics[TOPIC].topic_id


def produce_v13(node: Node, topic: uuid.UUID, acks: int = 1) -> Any:
    b = request_builder(PRODUCE, 13)
    return ask(
        node,
        PRODUCE,
        13,
        "ProduceRequest",
        transactional_id=None,
        acks=acks,
        timeout=5000,
        topic_data=(
            b.TopicProduceData(
                topic_id=topic,
                partition_data=(b.PartitionProduceData(index=1, records=RECORDS),),
            ),
        ),
    )


def commit(node: Node, version: int, offset: int, **topic: Any) -> Any:
    b = request_builder(OFFSET_COMMIT, version)
    return ask(
        node,
        OFFSET_COMMIT,
        version,
        "OffsetCommitRequest",
        group_id=GROUP,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        retention_time=-1,
        topics=(
            b.OffsetCommitRequestTopic(
                **topic,
                partitions=(
                    b.OffsetCommitRequestPartition(
                        partition_index=0, committed_offset=offset, committed_metadata="m"
                    ),
                ),
            ),
        ),
    )


def fetch_offsets(node: Node, version: int, topics: Any) -> Any:
    b = request_builder(OFFSET_FETCH, version)
    (group,) = ask(
        node,
        OFFSET_FETCH,
        version,
        "OffsetFetchRequest",
        require_stable=False,
        groups=(b.OffsetFetchRequestGroup(group_id=GROUP, member_id=None, topics=topics),),
    ).groups
    return group


def fetch_v10(node: Node, topic: uuid.UUID) -> Any:
    b = request_builder(OFFSET_FETCH, 10)
    return fetch_offsets(
        node, 10, (b.OffsetFetchRequestTopics(topic_id=topic, partition_indexes=(0,)),)
    )


# -- Produce v13 ----------------------------------------------------------------------


async def test_produce_v13_appends_by_topic_id_and_answers_by_id(node: Node) -> None:
    (topic,) = produce_v13(node, topic_id(node)).responses
    assert topic.topic_id == topic_id(node)
    (partition,) = topic.partition_responses
    assert (partition.index, partition.error_code, partition.base_offset) == (1, E.none, 0)
    log = node.dispatcher.services.replica_manager.online_partition((TOPIC, 1))
    assert log is not None and log.log_end_offset == 1


async def test_produce_v13_to_an_unknown_topic_id_is_unknown_topic_id(node: Node) -> None:
    (topic,) = produce_v13(node, UNKNOWN_ID).responses
    assert topic.topic_id == UNKNOWN_ID
    assert [(p.index, p.error_code) for p in topic.partition_responses] == [(1, E.unknown_topic_id)]


async def test_produce_v13_with_acks_0_to_an_unknown_id_closes_the_connection(
    node: Node,
) -> None:
    b = request_builder(PRODUCE, 13)
    body = b.ProduceRequest(
        transactional_id=None,
        acks=0,
        timeout=5000,
        topic_data=(
            b.TopicProduceData(
                topic_id=UNKNOWN_ID,
                partition_data=(b.PartitionProduceData(index=0, records=RECORDS),),
            ),
        ),
    )
    node.send(PRODUCE, 13, body)
    assert node.closed


# -- OffsetCommit / OffsetFetch v10 ---------------------------------------------------


async def test_offsets_committed_by_id_are_fetched_by_id_and_by_name(node: Node) -> None:
    (topic,) = commit(node, 10, 42, topic_id=topic_id(node)).topics
    assert topic.topic_id == topic_id(node)
    assert [p.error_code for p in topic.partitions] == [E.none]

    (by_id,) = fetch_v10(node, topic_id(node)).topics
    assert by_id.topic_id == topic_id(node)
    assert [(p.committed_offset, p.metadata) for p in by_id.partitions] == [(42, "m")]

    b9 = request_builder(OFFSET_FETCH, 9)
    named = (b9.OffsetFetchRequestTopics(name=TOPIC, partition_indexes=(0,)),)
    (by_name,) = fetch_offsets(node, 9, named).topics
    assert (by_name.name, by_name.partitions[0].committed_offset) == (TOPIC, 42)


async def test_offsets_committed_by_name_are_fetched_by_id(node: Node) -> None:
    commit(node, 9, 7, name=TOPIC)
    (by_id,) = fetch_v10(node, topic_id(node)).topics
    assert [p.committed_offset for p in by_id.partitions] == [7]
    # all topics (null): every topic by its id
    (every,) = fetch_offsets(node, 10, None).topics
    assert (every.topic_id, every.partitions[0].committed_offset) == (topic_id(node), 7)


async def test_commit_and_fetch_of_an_unknown_topic_id_is_unknown_topic_id(node: Node) -> None:
    (topic,) = commit(node, 10, 1, topic_id=UNKNOWN_ID).topics
    assert (topic.topic_id, [p.error_code for p in topic.partitions]) == (
        UNKNOWN_ID,
        [E.unknown_topic_id],
    )
    group = fetch_v10(node, UNKNOWN_ID)
    assert group.error_code is E.none
    (topic,) = group.topics
    assert topic.topic_id == UNKNOWN_ID
    assert [(p.committed_offset, p.error_code) for p in topic.partitions] == [
        (-1, E.unknown_topic_id)
    ]


# -- ListOffsets v11, DescribeGroups v6 -----------------------------------------------


async def test_list_offsets_earliest_pending_upload_without_tiered_storage_is_no_offset(
    node: Node,
) -> None:
    produce_v13(node, topic_id(node))
    b = request_builder(LIST_OFFSETS, 11)
    (topic,) = ask(
        node,
        LIST_OFFSETS,
        11,
        "ListOffsetsRequest",
        replica_id=-1,
        isolation_level=0,
        timeout=1000,
        topics=(
            b.ListOffsetsTopic(
                name=TOPIC,
                partitions=(
                    b.ListOffsetsPartition(
                        partition_index=1, current_leader_epoch=-1, timestamp=-6
                    ),
                ),
            ),
        ),
    ).topics
    (p,) = topic.partitions
    assert (p.error_code, p.timestamp, p.offset, p.leader_epoch) == (E.none, -1, -1, -1)


async def test_describe_groups_v6_says_why_a_group_is_not_found(node: Node) -> None:
    (group,) = ask(
        node,
        DESCRIBE_GROUPS,
        6,
        "DescribeGroupsRequest",
        groups=("nobody",),
        include_authorized_operations=False,
    ).groups
    assert (group.error_code, group.error_message) == (
        E.group_id_not_found,
        "Group nobody not found.",
    )
    (old,) = ask(
        node,
        DESCRIBE_GROUPS,
        5,
        "DescribeGroupsRequest",
        groups=("nobody",),
        include_authorized_operations=False,
    ).groups
    assert (old.error_code, old.group_state) == (E.none, "Dead")


# -- ListConfigResources ----------------------------------------------------------------


def list_resources(node: Node, version: int, *types: int) -> Any:
    return ask(
        node, LIST_CONFIG_RESOURCES, version, "ListConfigResourcesRequest", resource_types=types
    )


async def test_list_config_resources_lists_each_type_asked_in_kafkas_order(node: Node) -> None:
    node.dispatcher.services.coordinators.consumer_group.group_configs.store.put(
        "configured", {"consumer.session.timeout.ms": "50000"}
    )
    answer = list_resources(node, 1)
    assert answer.error_code is E.none
    found = [(int(r.resource_type), r.resource_name) for r in answer.config_resources]
    assert found == [
        (32, "configured"),
        (8, "0"),
        (4, "0"),
        (2, TOPIC),
        (2, "__consumer_offsets"),
    ]
    only = list_resources(node, 1, 2)
    assert [r.resource_name for r in only.config_resources] == [TOPIC, "__consumer_offsets"]


async def test_list_config_resources_of_an_unsupported_type_is_unsupported_version(
    node: Node,
) -> None:
    answer = list_resources(node, 1, 2, 1)
    assert (answer.error_code, answer.config_resources) == (E.unsupported_version, ())


async def test_list_config_resources_v0_lists_client_metrics_only(node: Node) -> None:
    answer = list_resources(node, 0)
    assert (answer.error_code, answer.config_resources) == (E.none, ())
