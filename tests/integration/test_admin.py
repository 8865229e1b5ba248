"""The admin APIs through aiokafka's admin client, against a real minikafka broker.

What a user of ``AIOKafkaAdminClient`` relies on: topics it creates exist with the
partitions, replicas and configs it asked for; errors arrive as the aiokafka error
classes of Kafka's codes; deleted topics are gone; DescribeConfigs tells overrides from
defaults; DeleteRecords moves the earliest offset and consumers follow it.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic, RecordsToDelete
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import (
    InvalidConfigurationError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    OffsetOutOfRangeError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
    for_code,
)
from kio.schema.errors import ErrorCode

from broker.app import MiniKafka
from protocol.builders import request_builder
from testkit.raw_client import RawClient
from tests.integration.conftest import running_cluster

pytestmark = pytest.mark.asyncio

CREATE_TOPICS = 19
INCREMENTAL_ALTER_CONFIGS = 44
TOPIC_CONFIG = 1
DEFAULT_CONFIG = 5
STATIC_BROKER_CONFIG = 4


@pytest.fixture
async def admin(kafka: MiniKafka) -> AsyncIterator[AIOKafkaAdminClient]:
    client = AIOKafkaAdminClient(bootstrap_servers=kafka.bootstrap)
    await client.start()
    try:
        yield client
    finally:
        await client.close()


def _errors(response: Any) -> dict[str, tuple[Any, str | None]]:
    """topic -> (aiokafka error class, message) from a CreateTopics response."""
    return {topic: (for_code(code), message) for topic, code, message, *_ in response.topic_errors}


async def _metadata_topics(admin: AIOKafkaAdminClient) -> dict[str, dict[str, Any]]:
    return {t["topic"]: t for t in await admin.describe_topics()}


async def test_create_topic_with_partitions_replicas_and_configs(
    admin: AIOKafkaAdminClient, kafka: MiniKafka
) -> None:
    response = await admin.create_topics(
        [
            NewTopic(
                "orders",
                num_partitions=3,
                replication_factor=1,
                topic_configs={"retention.ms": "3600000", "cleanup.policy": "delete"},
            )
        ]
    )
    assert _errors(response)["orders"][0].errno == 0

    topics = await _metadata_topics(admin)
    assert [
        p["partition"] for p in sorted(topics["orders"]["partitions"], key=lambda p: p["partition"])
    ] == [0, 1, 2]
    assert "orders" in await admin.list_topics()
    assert kafka.cluster.topics["orders"].configs == {
        "retention.ms": "3600000",
        "cleanup.policy": "delete",
    }

    # The new topic takes records on every partition at once.
    producer = AIOKafkaProducer(bootstrap_servers=kafka.bootstrap)
    await producer.start()
    try:
        for partition in range(3):
            md = await producer.send_and_wait("orders", b"x", partition=partition)
            assert md.offset == 0
    finally:
        await producer.stop()


async def test_create_topic_defaults_and_v7_answer() -> None:
    """-1 counts take the broker's defaults; v5+ answers with counts, configs, topic id.

    aiokafka's NewTopic cannot send -1 without an assignment, so this speaks raw v7.
    """
    async with running_cluster(
        2, None, **{"num.partitions": "4", "default.replication.factor": "2"}
    ) as app:
        raw = await RawClient.connect(app.bootstrap)
        b = request_builder(CREATE_TOPICS, 7)
        try:
            response = await raw.request(
                CREATE_TOPICS,
                7,
                "CreateTopicsRequest",
                topics=(
                    b.CreatableTopic(
                        name="defaults",
                        num_partitions=-1,
                        replication_factor=-1,
                        assignments=(),
                        configs=(b.CreatableTopicConfig(name="retention.ms", value="60000"),),
                    ),
                ),
                timeout=10000,
                validate_only=False,
            )
        finally:
            await raw.close()
        (result,) = response.topics
        assert result.error_code == ErrorCode.none
        assert result.num_partitions == 4
        assert result.replication_factor == 2
        assert result.topic_id == app.cluster.topics["defaults"].topic_id
        configs = {c.name: (c.value, c.config_source) for c in result.configs}
        assert configs["retention.ms"] == ("60000", TOPIC_CONFIG)
        assert configs["segment.bytes"] == ("1073741824", DEFAULT_CONFIG)
        partitions = app.cluster.topics["defaults"].partitions
        assert len(partitions) == 4
        assert all(len(p.replicas) == 2 for p in partitions)


async def test_create_topic_with_explicit_assignment() -> None:
    async with running_cluster(brokers=3) as app:
        admin = AIOKafkaAdminClient(bootstrap_servers=app.bootstrap)
        await admin.start()
        try:
            assignment = {0: [2, 0], 1: [1, 2]}
            response = await admin.create_topics(
                [NewTopic("placed", -1, -1, replica_assignments=assignment)]
            )
            assert _errors(response)["placed"][0].errno == 0
            topic = (await _metadata_topics(admin))["placed"]
            by_partition = {p["partition"]: p for p in topic["partitions"]}
            assert by_partition[0]["replicas"] == [2, 0]
            assert by_partition[0]["leader"] == 2
            assert by_partition[1]["replicas"] == [1, 2]
            assert by_partition[1]["leader"] == 1

            bad = await admin.create_topics(
                [
                    NewTopic("unknown-broker", -1, -1, replica_assignments={0: [7]}),
                    NewTopic("gap", -1, -1, replica_assignments={0: [0], 2: [1]}),
                ]
            )
            errors = _errors(bad)
            assert errors["unknown-broker"][0].errno == 39  # INVALID_REPLICA_ASSIGNMENT
            assert errors["gap"][0].errno == 39
            assert "unknown-broker" not in app.cluster.topics
        finally:
            await admin.close()


async def test_create_topic_errors_are_kafkas(admin: AIOKafkaAdminClient, kafka: MiniKafka) -> None:
    first = await admin.create_topics([NewTopic("dup", 1, 1)])
    assert _errors(first)["dup"][0].errno == 0

    response = await admin.create_topics(
        [
            NewTopic("dup", 1, 1),
            NewTopic("bad/name", 1, 1),
            NewTopic("zero-partitions", 0, 1),
            NewTopic("too-many-replicas", 1, 3),
            NewTopic("bad-config", 1, 1, topic_configs={"retention.msec": "1"}),
            NewTopic("bad-value", 1, 1, topic_configs={"retention.ms": "soon"}),
        ]
    )
    errors = _errors(response)
    assert errors["dup"][0] is TopicAlreadyExistsError
    assert errors["bad/name"][0] is InvalidTopicError
    assert errors["zero-partitions"][0] is InvalidPartitionsError
    assert errors["too-many-replicas"][0] is InvalidReplicationFactorError
    assert errors["bad-config"][0] is InvalidConfigurationError
    assert "retention.msec" in (errors["bad-config"][1] or "")
    assert errors["bad-value"][0] is InvalidConfigurationError
    assert set(kafka.cluster.topics) == {"dup"}


async def test_validate_only_creates_nothing(admin: AIOKafkaAdminClient, kafka: MiniKafka) -> None:
    response = await admin.create_topics([NewTopic("dry-run", 2, 1)], validate_only=True)
    assert _errors(response)["dry-run"][0].errno == 0
    assert "dry-run" not in kafka.cluster.topics
    assert "dry-run" not in await admin.list_topics()


async def test_delete_topics(admin: AIOKafkaAdminClient, kafka: MiniKafka) -> None:
    await admin.create_topics([NewTopic("doomed", 2, 1), NewTopic("kept", 1, 1)])
    producer = AIOKafkaProducer(bootstrap_servers=kafka.bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait("doomed", b"x", partition=1)
    finally:
        await producer.stop()

    response = await admin.delete_topics(["doomed", "never-was"])
    codes = {topic: code for topic, code, *_ in response.topic_error_codes}
    assert codes == {"doomed": 0, "never-was": UnknownTopicOrPartitionError.errno}
    assert "doomed" not in await admin.list_topics()
    assert "kept" in await admin.list_topics()
    assert ("doomed", 1) not in kafka.brokers[0].replica_manager.partitions

    # The name is free again, and the new topic starts empty.
    again = await admin.create_topics([NewTopic("doomed", 1, 1)])
    assert _errors(again)["doomed"][0].errno == 0
    assert kafka.brokers[0].replica_manager.partitions[("doomed", 0)].log_end_offset == 0


async def test_delete_disabled() -> None:
    async with running_cluster(1, None, **{"delete.topic.enable": "false"}) as app:
        admin = AIOKafkaAdminClient(bootstrap_servers=app.bootstrap)
        await admin.start()
        try:
            await admin.create_topics([NewTopic("stays", 1, 1)])
            response = await admin.delete_topics(["stays"])
            codes = {topic: code for topic, code, *_ in response.topic_error_codes}
            assert codes == {"stays": 73}  # TOPIC_DELETION_DISABLED
            assert "stays" in await admin.list_topics()
        finally:
            await admin.close()


async def test_create_partitions(admin: AIOKafkaAdminClient, kafka: MiniKafka) -> None:
    await admin.create_topics([NewTopic("growing", 1, 1)])
    await admin.create_partitions({"growing": NewPartitions(3)})
    topic = (await _metadata_topics(admin))["growing"]
    assert sorted(p["partition"] for p in topic["partitions"]) == [0, 1, 2]

    with pytest.raises(InvalidPartitionsError):
        await admin.create_partitions({"growing": NewPartitions(2)})
    with pytest.raises(InvalidPartitionsError):
        await admin.create_partitions({"growing": NewPartitions(3)})
    with pytest.raises(UnknownTopicOrPartitionError):
        await admin.create_partitions({"nowhere": NewPartitions(2)})

    await admin.create_partitions({"growing": NewPartitions(5)}, validate_only=True)
    assert len(kafka.cluster.topics["growing"].partitions) == 3

    producer = AIOKafkaProducer(bootstrap_servers=kafka.bootstrap)
    await producer.start()
    try:
        md = await producer.send_and_wait("growing", b"new", partition=2)
        assert md.offset == 0
    finally:
        await producer.stop()


async def test_create_partitions_with_assignment() -> None:
    async with running_cluster(brokers=2) as app:
        admin = AIOKafkaAdminClient(bootstrap_servers=app.bootstrap)
        await admin.start()
        try:
            await admin.create_topics([NewTopic("spread", 1, 1)])
            await admin.create_partitions({"spread": NewPartitions(3, [[1], [0]])})
            topic = (await _metadata_topics(admin))["spread"]
            leaders = {p["partition"]: p["leader"] for p in topic["partitions"]}
            assert leaders[1] == 1
            assert leaders[2] == 0
            with pytest.raises(Exception) as excinfo:
                await admin.create_partitions({"spread": NewPartitions(4, [[0, 1]])})
            assert getattr(excinfo.value, "errno", None) == 39  # INVALID_REPLICA_ASSIGNMENT
        finally:
            await admin.close()


def _configs(response: Any) -> dict[str, tuple[str | None, int]]:
    (resource,) = response.resources
    error_code, _message, _type, _name, entries = resource[:5]
    assert error_code == 0, resource
    return {entry[0]: (entry[1], entry[3]) for entry in entries}


async def test_describe_topic_configs(admin: AIOKafkaAdminClient) -> None:
    await admin.create_topics([NewTopic("described", 1, 1, topic_configs={"retention.ms": "1000"})])
    (response,) = await admin.describe_configs(
        [ConfigResource(ConfigResourceType.TOPIC, "described")]
    )
    configs = _configs(response)
    assert configs["retention.ms"] == ("1000", TOPIC_CONFIG)
    assert configs["segment.bytes"] == ("1073741824", DEFAULT_CONFIG)
    assert configs["cleanup.policy"] == ("delete", DEFAULT_CONFIG)
    assert configs["max.message.bytes"] == ("1048588", DEFAULT_CONFIG)

    # Asking for some keys returns only those.
    (filtered,) = await admin.describe_configs(
        [ConfigResource(ConfigResourceType.TOPIC, "described", {"retention.ms": None})]
    )
    assert set(_configs(filtered)) == {"retention.ms"}

    (missing,) = await admin.describe_configs(
        [ConfigResource(ConfigResourceType.TOPIC, "no-such-topic")]
    )
    assert missing.resources[0][0] == UnknownTopicOrPartitionError.errno


async def test_describe_configs_shows_broker_settings_and_synonyms() -> None:
    async with running_cluster(
        1, None, **{"log.retention.ms": "5000", "num.partitions": "2"}
    ) as app:
        admin = AIOKafkaAdminClient(bootstrap_servers=app.bootstrap)
        await admin.start()
        try:
            await admin.create_topics([NewTopic("inherits", 1, 1)])
            (topic,) = await admin.describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, "inherits")], include_synonyms=True
            )
            configs = _configs(topic)
            assert configs["retention.ms"] == ("5000", STATIC_BROKER_CONFIG)
            entry = next(e for e in topic.resources[0][4] if e[0] == "retention.ms")
            # Kafka's synonyms: the broker config's layers, log.retention.ms first.
            assert [(s[0], s[2]) for s in entry[5]] == [
                ("log.retention.ms", STATIC_BROKER_CONFIG),
                ("log.retention.hours", DEFAULT_CONFIG),
            ]

            (broker,) = await admin.describe_configs(
                [ConfigResource(ConfigResourceType.BROKER, "0")]
            )
            broker_configs = _configs(broker)
            assert broker_configs["num.partitions"] == ("2", STATIC_BROKER_CONFIG)
            assert broker_configs["delete.topic.enable"] == ("true", DEFAULT_CONFIG)
            assert broker_configs["log.retention.ms"] == ("5000", STATIC_BROKER_CONFIG)
        finally:
            await admin.close()


async def test_delete_records_moves_the_earliest_offset(
    admin: AIOKafkaAdminClient, kafka: MiniKafka
) -> None:
    await admin.create_topics([NewTopic("trimmed", 1, 1)])
    producer = AIOKafkaProducer(bootstrap_servers=kafka.bootstrap)
    await producer.start()
    try:
        for i in range(10):
            await producer.send_and_wait("trimmed", f"r{i}".encode(), partition=0)
    finally:
        await producer.stop()
    tp = TopicPartition("trimmed", 0)

    low = await admin.delete_records({tp: RecordsToDelete(before_offset=4)})
    assert low == {tp: 4}
    with pytest.raises(OffsetOutOfRangeError):
        await admin.delete_records({tp: RecordsToDelete(before_offset=11)})

    consumer = AIOKafkaConsumer(
        bootstrap_servers=kafka.bootstrap, auto_offset_reset="earliest", enable_auto_commit=False
    )
    await consumer.start()
    try:
        consumer.assign([tp])
        assert (await consumer.beginning_offsets([tp]))[tp] == 4
        # A position below the log start is out of range: the consumer resets to it.
        consumer.seek(tp, 1)
        got: list[Any] = []
        while len(got) < 6:
            batch = await consumer.getmany(tp, timeout_ms=2000)
            assert batch, "no records within 2 s"
            got.extend(batch[tp])
    finally:
        await consumer.stop()
    assert [r.offset for r in got] == list(range(4, 10))
    assert got[0].value == b"r4"

    # -1 means "everything below the high watermark".
    assert await admin.delete_records({tp: RecordsToDelete(before_offset=-1)}) == {tp: 10}


async def test_describe_cluster_and_topic_ids(admin: AIOKafkaAdminClient, kafka: MiniKafka) -> None:
    cluster = await admin.describe_cluster()
    assert cluster["cluster_id"] == kafka.cluster.cluster_id
    assert [b["node_id"] for b in cluster["brokers"]] == [0]
    name = f"t-{uuid.uuid4().hex[:8]}"
    await admin.create_topics([NewTopic(name, 1, 1)])
    assert kafka.cluster.topics[name].topic_id.int != 0


async def test_alter_configs_replaces_the_overrides(
    admin: AIOKafkaAdminClient, kafka: MiniKafka
) -> None:
    await admin.create_topics(
        [
            NewTopic(
                "altered", 1, 1, topic_configs={"retention.ms": "1000", "segment.bytes": "65536"}
            )
        ]
    )
    (response,) = await admin.alter_configs(
        [ConfigResource(ConfigResourceType.TOPIC, "altered", {"retention.bytes": "4096"})]
    )
    assert [r[0] for r in response.resources] == [0]
    # AlterConfigs sets the whole set: the overrides not named are gone.
    assert kafka.cluster.topics["altered"].configs == {"retention.bytes": "4096"}
    (described,) = await admin.describe_configs(
        [ConfigResource(ConfigResourceType.TOPIC, "altered")]
    )
    configs = _configs(described)
    assert configs["retention.bytes"] == ("4096", TOPIC_CONFIG)
    assert configs["retention.ms"] == ("604800000", DEFAULT_CONFIG)

    (bad,) = await admin.alter_configs(
        [ConfigResource(ConfigResourceType.TOPIC, "altered", {"no.such.config": "1"})]
    )
    assert for_code(bad.resources[0][0]) is InvalidConfigurationError
    assert kafka.cluster.topics["altered"].configs == {"retention.bytes": "4096"}


async def test_incremental_alter_configs(kafka: MiniKafka) -> None:
    kafka.cluster.create_topic("incremental", 1, 1, {"retention.ms": "1000"})
    raw = await RawClient.connect(kafka.bootstrap)
    b = request_builder(INCREMENTAL_ALTER_CONFIGS, 1)

    async def alter(*changes: tuple[str, int, str | None]) -> Any:
        response = await raw.request(
            INCREMENTAL_ALTER_CONFIGS,
            1,
            "IncrementalAlterConfigsRequest",
            resources=(
                b.AlterConfigsResource(
                    resource_type=2,
                    resource_name="incremental",
                    configs=tuple(
                        b.AlterableConfig(name=n, config_operation=op, value=v)
                        for n, op, v in changes
                    ),
                ),
            ),
            validate_only=False,
        )
        return response.responses[0]

    try:
        result = await alter(("segment.bytes", 0, "65536"), ("retention.ms", 1, None))
        assert result.error_code == ErrorCode.none
        assert kafka.cluster.topics["incremental"].configs == {"segment.bytes": "65536"}

        result = await alter(("cleanup.policy", 2, "compact"))
        assert result.error_code == ErrorCode.none
        assert kafka.cluster.topics["incremental"].configs["cleanup.policy"] == "delete,compact"

        result = await alter(("retention.ms", 2, "5"))  # APPEND to a non-list config
        assert result.error_code == ErrorCode.invalid_config  # as KRaft's controller
        result = await alter(("segment.bytes", 0, "big"))
        assert result.error_code == ErrorCode.invalid_config
        assert kafka.cluster.topics["incremental"].configs["segment.bytes"] == "65536"
    finally:
        await raw.close()
