"""Paged topic descriptions, log directories and the ACL APIs, through the admin clients.

Issue 11's describe-side admin APIs: DescribeTopicPartitions (Kafka 3.7+) pages with
its cursor as Kafka's handler does; DescribeLogDirs shows the broker's log directory
(a pseudo one for in-memory brokers) and the size of each partition; without an
authorizer the ACL APIs answer SECURITY_DISABLED, "No Authorizer is configured.".
Exact codes through the raw client; kafka-python and confluent-kafka on top.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from kio.schema.errors import ErrorCode

from broker.app import MiniKafka
from protocol.builders import request_builder
from testkit.raw_client import RawClient
from tests.integration.conftest import running_cluster

pytestmark = pytest.mark.asyncio

DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS, DESCRIBE_LOG_DIRS = 29, 30, 31, 35
DESCRIBE_TOPIC_PARTITIONS = 75


# -- DescribeTopicPartitions -------------------------------------------------------------------


async def _page(
    raw: RawClient, topics: list[str], limit: int, cursor: tuple[str, int] | None
) -> tuple[list[tuple[str, int, list[int]]], tuple[str, int] | None]:
    b = request_builder(DESCRIBE_TOPIC_PARTITIONS, 0)
    response = await raw.request(
        DESCRIBE_TOPIC_PARTITIONS,
        0,
        "DescribeTopicPartitionsRequest",
        topics=tuple(b.TopicRequest(name=t) for t in topics),
        response_partition_limit=limit,
        cursor=None
        if cursor is None
        else b.Cursor(topic_name=cursor[0], partition_index=cursor[1]),
    )
    answered = [
        (t.name, int(t.error_code), [p.partition_index for p in t.partitions])
        for t in response.topics
    ]
    nxt = response.next_cursor
    return answered, None if nxt is None else (nxt.topic_name, nxt.partition_index)


async def test_describe_topic_partitions_pages_with_its_cursor(kafka: MiniKafka) -> None:
    for name, count in (("a", 3), ("b", 2), ("c", 1)):
        kafka.cluster.create_topic(name, count, 1, {})
    raw = await RawClient.connect(kafka.bootstrap)
    try:
        pages = []
        cursor: tuple[str, int] | None = None
        while True:
            answered, cursor = await _page(raw, [], 2, cursor)
            pages.append((answered, cursor))
            if cursor is None:
                break
        assert pages == [
            ([("a", 0, [0, 1])], ("a", 2)),
            ([("a", 0, [2]), ("b", 0, [0])], ("b", 1)),
            ([("b", 0, [1]), ("c", 0, [0])], None),
        ]
        # a page that ends on a topic boundary points at the next topic's partition 0
        assert await _page(raw, ["b", "c"], 2, None) == ([("b", 0, [0, 1])], ("c", 0))
        # named topics: in name order, an unknown one with its error, from the cursor on
        answered, cursor = await _page(raw, ["zz", "c", "a"], 10, ("c", 0))
        assert (answered, cursor) == ([("c", 0, [0]), ("zz", 3, [])], None)
        # a cursor outside the named topics fails the request
        answered, _ = await _page(raw, ["a"], 10, ("b", 0))
        assert answered == [("a", int(ErrorCode.invalid_request), [])]
    finally:
        await raw.close()


def _kafka_python_describe_topic_partitions(bootstrap: str) -> Any:
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        first = admin.describe_topic_partitions(["dtp"], response_partition_limit=2)
        rest = admin.describe_topic_partitions(
            ["dtp"], response_partition_limit=2, cursor=first["next_cursor"]
        )
        return first, rest
    finally:
        admin.close()


async def test_kafka_python_describes_topic_partitions(kafka: MiniKafka) -> None:
    kafka.cluster.create_topic("dtp", 3, 1, {})
    first, rest = await asyncio.to_thread(_kafka_python_describe_topic_partitions, kafka.bootstrap)
    assert first["next_cursor"] == {"topic_name": "dtp", "partition_index": 2}
    (topic,) = first["topics"]
    assert topic["topic_id"] == kafka.cluster.topics["dtp"].topic_id
    assert [p["partition_index"] for p in topic["partitions"]] == [0, 1]
    assert topic["partitions"][0]["leader_id"] == 0
    assert topic["partitions"][0]["offline_replicas"] == []
    assert [p["partition_index"] for p in rest["topics"][0]["partitions"]] == [2]
    assert rest["next_cursor"] is None


# -- DescribeLogDirs ---------------------------------------------------------------------------


async def test_describe_log_dirs_on_disk(tmp_path: Path) -> None:
    async with running_cluster(1, tmp_path) as app:
        app.cluster.create_topic("sized", 2, 1, {})
        producer = AIOKafkaProducer(bootstrap_servers=app.bootstrap)
        await producer.start()
        try:
            await producer.send_and_wait("sized", b"x" * 100, partition=1)
        finally:
            await producer.stop()
        raw = await RawClient.connect(app.bootstrap)
        b = request_builder(DESCRIBE_LOG_DIRS, 4)
        try:
            response = await raw.request(
                DESCRIBE_LOG_DIRS, 4, "DescribeLogDirsRequest", topics=None
            )
            only = await raw.request(
                DESCRIBE_LOG_DIRS,
                4,
                "DescribeLogDirsRequest",
                topics=(b.DescribableLogDirTopic(topic="sized", partitions=(1, 5)),),
            )
        finally:
            await raw.close()
    (result,) = response.results
    assert result.log_dir == str((tmp_path / "broker-0").resolve())
    assert result.total_bytes > 0 and result.usable_bytes > 0
    partitions = {(t.name, p.partition_index): p for t in result.topics for p in t.partitions}
    assert partitions[("sized", 0)].partition_size == 0
    assert partitions[("sized", 1)].partition_size > 100
    assert all(p.offset_lag == 0 and not p.is_future_key for p in partitions.values())
    (limited,) = only.results
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in limited.topics] == [
        ("sized", [1])
    ]


def _kafka_python_log_dirs(bootstrap: str) -> Any:
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        return admin.describe_log_dirs()
    finally:
        admin.close()


async def test_kafka_python_describes_in_memory_log_dirs() -> None:
    async with running_cluster(2) as app:
        app.cluster.create_topic("mem", 2, 1, {})
        described = await asyncio.to_thread(_kafka_python_log_dirs, app.bootstrap)
    by_broker = {entry["broker"]: entry["log_dirs"] for entry in described}
    assert set(by_broker) == {0, 1}
    for broker_id, (log_dir,) in by_broker.items():
        assert log_dir["log_dir"] == f"memory://broker-{broker_id}"
        assert log_dir["error_code"] == 0
        assert [t["name"] for t in log_dir["topics"]] == ["mem"]


# -- ACLs ----------------------------------------------------------------------------------


async def test_acl_apis_answer_security_disabled(kafka: MiniKafka) -> None:
    raw = await RawClient.connect(kafka.bootstrap)
    b30 = request_builder(CREATE_ACLS, 3)
    b31 = request_builder(DELETE_ACLS, 3)
    acl = {"principal": "User:alice", "host": "*", "operation": 3, "permission_type": 3}
    try:
        described = await raw.request(
            DESCRIBE_ACLS,
            3,
            "DescribeAclsRequest",
            resource_type_filter=1,
            resource_name_filter=None,
            pattern_type_filter=1,
            principal_filter=None,
            host_filter=None,
            operation=1,
            permission_type=1,
        )
        created = await raw.request(
            CREATE_ACLS,
            3,
            "CreateAclsRequest",
            creations=(
                b30.AclCreation(resource_type=2, resource_name="t", resource_pattern_type=3, **acl),
            ),
        )
        deleted = await raw.request(
            DELETE_ACLS,
            3,
            "DeleteAclsRequest",
            filters=(
                b31.DeleteAclsFilter(
                    resource_type_filter=2,
                    resource_name_filter="t",
                    pattern_type_filter=3,
                    principal_filter=None,
                    host_filter=None,
                    operation=1,
                    permission_type=1,
                ),
            ),
        )
    finally:
        await raw.close()
    message = "No Authorizer is configured."
    assert (described.error_code, described.error_message, described.resources) == (
        ErrorCode.security_disabled,
        message,
        (),
    )
    ((create_error, create_message),) = [(r.error_code, r.error_message) for r in created.results]
    assert (create_error, create_message) == (ErrorCode.security_disabled, message)
    (result,) = deleted.filter_results
    assert (result.error_code, result.error_message, result.matching_acls) == (
        ErrorCode.security_disabled,
        message,
        (),
    )


def _client_acls(bootstrap: str) -> tuple[Any, Any]:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )
    from kafka.admin import (
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePatternFilter,
    )
    from kafka.admin import ResourceType as KafkaResourceType
    from kafka.errors import SecurityDisabledError

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        acl_filter = ACLFilter(
            principal=None,
            host="*",
            operation=ACLOperation.ANY,
            permission_type=ACLPermissionType.ANY,
            resource_pattern=ResourcePatternFilter(
                KafkaResourceType.TOPIC, None, ACLResourcePatternType.ANY
            ),
        )
        try:
            kafka_python: Any = admin.describe_acls(acl_filter)
        except SecurityDisabledError as exc:
            kafka_python = exc
    finally:
        admin.close()
    confluent = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    binding = AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    # librdkafka drops DescribeAcls' top-level error: an empty listing, as against Kafka
    listed = confluent.describe_acls(binding, request_timeout=15).result()
    acl = AclBinding(
        ResourceType.TOPIC,
        "t",
        ResourcePatternType.LITERAL,
        "User:alice",
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )
    (future,) = confluent.create_acls([acl], request_timeout=15).values()
    try:
        future.result()
        confluent_error: Any = None
    except KafkaException as exc:
        confluent_error = exc.args[0]
    return kafka_python, (listed, confluent_error)


async def test_kafka_python_and_confluent_see_security_disabled(kafka: MiniKafka) -> None:
    from confluent_kafka import KafkaError
    from kafka.errors import SecurityDisabledError

    kafka_python, (listed, confluent_error) = await asyncio.to_thread(_client_acls, kafka.bootstrap)
    if isinstance(kafka_python, tuple):  # (acls, error) in some kafka-python versions
        assert kafka_python[1] is SecurityDisabledError
    else:
        assert isinstance(kafka_python, SecurityDisabledError)
    assert listed == []
    assert confluent_error.code() == KafkaError.SECURITY_DISABLED
    assert confluent_error.str() == "No Authorizer is configured."
