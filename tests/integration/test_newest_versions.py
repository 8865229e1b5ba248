"""The newest versions of issue 31 over TCP.

No client in the environment speaks Produce v13 or OffsetCommit/OffsetFetch v10 yet
(librdkafka 2.16: Produce v10, OffsetCommit/OffsetFetch v9; kafka-python 3.0: v9 and
v8; aiokafka lower), so the project's raw client drives them and the real clients read
what it wrote by name: offsets committed by topic id are the group's offsets for every
client. kafka-python 3.0's admin speaks ListConfigResources v1 (``list_config_resources``).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from broker.app import MiniKafka
from protocol.builders import request_builder
from testkit.polling import wait_until
from testkit.raw_client import RawClient
from testkit.requests import batch

PRODUCE, OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR = 0, 8, 9, 10
TOPIC = "by-id"
GROUP = "by-id-group"


async def _topic(kafka: MiniKafka) -> uuid.UUID:
    kafka.cluster.create_topic(TOPIC, 1, 1, {})
    return kafka.cluster.topics[TOPIC].topic_id


async def _produce_by_id(raw: RawClient, topic_id: uuid.UUID, count: int) -> Any:
    b = request_builder(PRODUCE, 13)
    return await raw.request(
        PRODUCE,
        13,
        "ProduceRequest",
        transactional_id=None,
        acks=-1,
        timeout=5000,
        topic_data=(
            b.TopicProduceData(
                topic_id=topic_id,
                partition_data=(b.PartitionProduceData(index=0, records=batch(count=count)),),
            ),
        ),
    )


async def _commit_by_id(raw: RawClient, topic_id: uuid.UUID, offset: int) -> Any:
    b = request_builder(OFFSET_COMMIT, 10)
    return await raw.request(
        OFFSET_COMMIT,
        10,
        "OffsetCommitRequest",
        group_id=GROUP,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=(
            b.OffsetCommitRequestTopic(
                topic_id=topic_id,
                partitions=(
                    b.OffsetCommitRequestPartition(
                        partition_index=0, committed_offset=offset, committed_metadata=None
                    ),
                ),
            ),
        ),
    )


async def _fetch_by_id(raw: RawClient, topic_id: uuid.UUID) -> Any:
    b = request_builder(OFFSET_FETCH, 10)
    response = await raw.request(
        OFFSET_FETCH,
        10,
        "OffsetFetchRequest",
        require_stable=True,
        groups=(
            b.OffsetFetchRequestGroup(
                group_id=GROUP,
                member_id=None,
                topics=(b.OffsetFetchRequestTopics(topic_id=topic_id, partition_indexes=(0,)),),
            ),
        ),
    )
    (group,) = response.groups
    return group


def _kafka_python_committed(bootstrap: str) -> int | None:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=GROUP)
    try:
        return consumer.committed(TopicPartition(TOPIC, 0))
    finally:
        consumer.close()


def _confluent_commit(bootstrap: str, offset: int) -> None:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP})
    try:
        consumer.commit(offsets=[TopicPartition(TOPIC, 0, offset)], asynchronous=False)
    finally:
        consumer.close()


async def test_offsets_committed_and_fetched_by_topic_id(kafka: MiniKafka) -> None:
    topic_id = await _topic(kafka)
    raw = await RawClient.connect(kafka.bootstrap, timeout_s=10.0, client_id="by-id")
    try:
        (produced,) = (await _produce_by_id(raw, topic_id, 3)).responses
        assert produced.topic_id == topic_id
        assert [(p.error_code, p.base_offset) for p in produced.partition_responses] == [
            (ErrorCode.none, 0)
        ]

        async def coordinator_ready() -> bool:
            answer = await raw.request(
                FIND_COORDINATOR, 4, "FindCoordinatorRequest", key_type=0, coordinator_keys=(GROUP,)
            )
            return bool(answer.coordinators[0].error_code is ErrorCode.none)

        await wait_until(coordinator_ready, "the group coordinator")

        async def committed_by_id() -> bool:
            (committed,) = (await _commit_by_id(raw, topic_id, 3)).topics
            assert committed.topic_id == topic_id
            return bool(committed.partitions[0].error_code is ErrorCode.none)

        # the coordinator may still be loading its partition: retried, as clients do
        await wait_until(committed_by_id, "a commit by topic id")
        (fetched,) = (await _fetch_by_id(raw, topic_id)).topics
        assert (fetched.topic_id, fetched.partitions[0].committed_offset) == (topic_id, 3)
        # kafka-python asks by name (OffsetFetch v8): the same offset
        assert await asyncio.to_thread(_kafka_python_committed, kafka.bootstrap) == 3

        # librdkafka commits by name (OffsetCommit v9); fetched by id
        await asyncio.to_thread(_confluent_commit, kafka.bootstrap, 2)
        (fetched,) = (await _fetch_by_id(raw, topic_id)).topics
        assert fetched.partitions[0].committed_offset == 2

        unknown = uuid.UUID(int=7)
        (refused,) = (await _commit_by_id(raw, unknown, 1)).topics
        assert (refused.topic_id, refused.partitions[0].error_code) == (
            unknown,
            ErrorCode.unknown_topic_id,
        )
        (refused,) = (await _produce_by_id(raw, unknown, 1)).responses
        assert refused.partition_responses[0].error_code is ErrorCode.unknown_topic_id
    finally:
        await raw.close()


def _list_config_resources(bootstrap: str) -> tuple[Any, Any]:
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        return admin.list_config_resources(), admin.list_config_resources(["TOPIC"])
    finally:
        admin.close()


async def test_kafka_python_lists_config_resources(kafka: MiniKafka) -> None:
    await _topic(kafka)
    kafka.group_configs.put("tuned", {"consumer.session.timeout.ms": "50000"})
    every, topics = await asyncio.to_thread(_list_config_resources, kafka.bootstrap)
    assert {kind: sorted(names) for kind, names in every.items()} == {
        "group": ["tuned"],
        "broker_logger": ["0"],
        "broker": ["0"],
        "topic": [TOPIC],
    }
    assert topics == {"topic": [TOPIC]}
