"""Broker configs through the config APIs: DescribeConfigs, AlterConfigs, IncrementalAlterConfigs.

What Kafka's admin tools rely on (issue 11): a BROKER resource lists every config a
Kafka 4.0 broker lists (``listeners`` and ``advertised.listeners`` included) with its
source, type, read-only flag and Kafka's synonyms; dynamic broker configs (per broker
and cluster-wide) are accepted where Kafka accepts them, refused with Kafka's errors
where it refuses them, kept in the cluster metadata (across a restart), described with
Kafka's sources, and reach the topics that inherit them. Exact codes through the raw
client; the same through kafka-python's and confluent-kafka's admin clients.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.app import MiniKafka
from protocol.builders import request_builder
from testkit.raw_client import RawClient
from tests.integration.conftest import running_cluster

pytestmark = pytest.mark.asyncio

DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 33, 44
TOPIC, BROKER = 2, 4
SET, DELETE, APPEND = 0, 1, 2
# Kafka's ConfigSource codes
TOPIC_CONFIG, DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT = 1, 2, 3, 4, 5
# Kafka's ConfigType codes
BOOLEAN, STRING, INT, LONG, LIST, CLASS, PASSWORD = 1, 2, 3, 5, 7, 8, 9


async def _describe(
    raw: RawClient, kind: int, name: str, *, synonyms: bool = True, keys: Any = None
) -> tuple[ErrorCode, dict[str, Any]]:
    b = request_builder(DESCRIBE_CONFIGS, 4)
    response = await raw.request(
        DESCRIBE_CONFIGS,
        4,
        "DescribeConfigsRequest",
        resources=(
            b.DescribeConfigsResource(
                resource_type=kind, resource_name=name, configuration_keys=keys
            ),
        ),
        include_synonyms=synonyms,
        include_documentation=False,
    )
    (result,) = response.results
    return result.error_code, {c.name: c for c in result.configs}


async def _incremental(
    raw: RawClient,
    kind: int,
    name: str,
    *changes: tuple[str, int, str | None],
    validate_only: bool = False,
) -> tuple[ErrorCode, str | None]:
    b = request_builder(INCREMENTAL_ALTER_CONFIGS, 1)
    response = await raw.request(
        INCREMENTAL_ALTER_CONFIGS,
        1,
        "IncrementalAlterConfigsRequest",
        resources=(
            b.AlterConfigsResource(
                resource_type=kind,
                resource_name=name,
                configs=tuple(
                    b.AlterableConfig(name=n, config_operation=op, value=v) for n, op, v in changes
                ),
            ),
        ),
        validate_only=validate_only,
    )
    (result,) = response.responses
    return result.error_code, result.error_message


async def _alter(
    raw: RawClient, kind: int, name: str, configs: dict[str, str | None]
) -> tuple[ErrorCode, str | None]:
    b = request_builder(ALTER_CONFIGS, 2)
    response = await raw.request(
        ALTER_CONFIGS,
        2,
        "AlterConfigsRequest",
        resources=(
            b.AlterConfigsResource(
                resource_type=kind,
                resource_name=name,
                configs=tuple(b.AlterableConfig(name=n, value=v) for n, v in configs.items()),
            ),
        ),
        validate_only=False,
    )
    (result,) = response.responses
    return result.error_code, result.error_message


def _synonyms(entry: Any) -> list[tuple[str, str | None, int]]:
    return [(s.name, s.value, int(s.source)) for s in entry.synonyms]


async def test_a_broker_resource_lists_every_kafka_broker_config(kafka: MiniKafka) -> None:
    raw = await RawClient.connect(kafka.bootstrap)
    try:
        error, configs = await _describe(raw, BROKER, "0")
    finally:
        await raw.close()
    assert error is ErrorCode.none
    assert len(configs) >= 280  # Kafka 4.0 lists 289
    port = kafka.brokers[0].port
    listeners = configs["listeners"]
    assert listeners.value == f"PLAINTEXT://127.0.0.1:{port}"
    assert listeners.config_source == STATIC and not listeners.read_only  # per-broker
    advertised = configs["advertised.listeners"]
    assert advertised.value == f"PLAINTEXT://127.0.0.1:{port}" and advertised.read_only
    # Kafka's types, read-only flags and sources
    assert (configs["num.partitions"].config_type, configs["num.partitions"].read_only) == (
        INT,
        True,
    )
    retention = configs["log.retention.ms"]
    assert (retention.value, retention.config_type, retention.read_only) == (None, LONG, False)
    assert retention.config_source == DEFAULT and _synonyms(retention) == []
    hours = configs["log.retention.hours"]
    assert _synonyms(hours) == [("log.retention.hours", "168", DEFAULT)]
    assert configs["auto.create.topics.enable"].config_type == BOOLEAN
    assert configs["log.cleanup.policy"].config_type == LIST
    assert configs["principal.builder.class"].config_type == CLASS
    password = configs["ssl.key.password"]
    assert (password.config_type, password.is_sensitive, password.value) == (PASSWORD, True, None)
    assert configs["group.initial.rebalance.delay.ms"].config_source == STATIC  # the tests set it
    assert configs["delete.topic.enable"].config_source == DEFAULT
    assert configs["broker.id"].value == "0" and configs["node.id"].value == "0"
    assert all(c.documentation is None for c in configs.values())


async def test_dynamic_broker_configs_take_kafkas_sources_and_synonyms() -> None:
    async with running_cluster(1, None, **{"log.retention.hours": "24"}) as app:
        app.cluster.create_topic("inherits", 1, 1, {})
        app.cluster.create_topic("overrides", 1, 1, {"retention.ms": "1000"})
        raw = await RawClient.connect(app.bootstrap)
        try:
            _, before = await _describe(raw, TOPIC, "inherits")
            # retention.ms inherits log.retention.hours, but Kafka lists no synonym for
            # it while log.retention.ms itself is set nowhere.
            assert before["retention.ms"].value == str(24 * 3_600_000)
            assert before["retention.ms"].config_source == DEFAULT
            assert _synonyms(before["retention.ms"]) == []
            assert _synonyms(before["segment.bytes"]) == [
                ("log.segment.bytes", "1073741824", DEFAULT)
            ]
            assert _synonyms(before["remote.storage.enable"]) == []  # no broker synonym

            assert await _incremental(raw, BROKER, "", ("log.retention.ms", SET, "2000")) == (
                ErrorCode.none,
                None,
            )
            assert await _incremental(raw, BROKER, "0", ("log.retention.ms", SET, "1000")) == (
                ErrorCode.none,
                None,
            )
            _, broker = await _describe(raw, BROKER, "0")
            retention = broker["log.retention.ms"]
            assert (retention.value, retention.config_source) == ("1000", DYNAMIC_BROKER)
            assert _synonyms(retention) == [
                ("log.retention.ms", "1000", DYNAMIC_BROKER),
                ("log.retention.ms", "2000", DYNAMIC_DEFAULT),
                ("log.retention.hours", "24", STATIC),
                ("log.retention.hours", "168", DEFAULT),
            ]
            # The cluster-wide resource lists only the dynamic defaults, with only their
            # own synonyms (min.insync.replicas: KIP-966's cluster-level record).
            _, defaults = await _describe(raw, BROKER, "")
            assert list(defaults) == ["log.retention.ms", "min.insync.replicas"]
            assert defaults["log.retention.ms"].value == "2000"
            assert defaults["log.retention.ms"].config_source == DYNAMIC_DEFAULT
            assert _synonyms(defaults["log.retention.ms"]) == [
                ("log.retention.ms", "2000", DYNAMIC_DEFAULT)
            ]

            _, inherits = await _describe(raw, TOPIC, "inherits")
            assert inherits["retention.ms"].value == "1000"
            assert inherits["retention.ms"].config_source == DYNAMIC_BROKER
            _, overrides = await _describe(raw, TOPIC, "overrides")
            entry = overrides["retention.ms"]
            assert (entry.value, entry.config_source) == ("1000", TOPIC_CONFIG)
            assert _synonyms(entry)[:2] == [
                ("retention.ms", "1000", TOPIC_CONFIG),
                ("log.retention.ms", "1000", DYNAMIC_BROKER),
            ]
            # ... and the log follows the broker's new default at once.
            partition = app.brokers[0].replica_manager.partitions[("inherits", 0)]
            assert partition.log.config.retention_ms == 1000

            # DELETE goes back to the layer below.
            await _incremental(raw, BROKER, "0", ("log.retention.ms", DELETE, None))
            assert partition.log.config.retention_ms == 2000
            assert app.cluster.broker_configs == {
                "": {"log.retention.ms": "2000", "min.insync.replicas": "1"}
            }
        finally:
            await raw.close()


async def test_a_cluster_default_reaches_min_insync_replicas(kafka: MiniKafka) -> None:
    kafka.cluster.create_topic("durable", 1, 1, {})
    raw = await RawClient.connect(kafka.bootstrap)
    try:
        assert (await _incremental(raw, BROKER, "", ("min.insync.replicas", SET, "2")))[0] is (
            ErrorCode.none
        )
        _, configs = await _describe(raw, TOPIC, "durable")
        assert configs["min.insync.replicas"].value == "2"
        assert configs["min.insync.replicas"].config_source == DYNAMIC_DEFAULT
        manager = kafka.brokers[0].replica_manager
        assert manager.min_insync_replicas(("durable", 0)) == 2
    finally:
        await raw.close()


async def test_broker_config_changes_are_refused_as_kafka_refuses_them(kafka: MiniKafka) -> None:
    raw = await RawClient.connect(kafka.bootstrap)
    try:
        error, message = await _incremental(raw, BROKER, "0", ("num.partitions", SET, "3"))
        assert error is ErrorCode.invalid_request
        assert message == "Cannot update these configs dynamically: Set(num.partitions)"
        error, message = await _incremental(raw, BROKER, "0", ("log.retention.ms", SET, "x"))
        assert error is ErrorCode.invalid_request
        assert message == (
            "Invalid value x for configuration log.retention.ms: Not a number of type LONG"
        )
        error, message = await _incremental(
            raw, BROKER, "", ("listeners", SET, "PLAINTEXT://:9093")
        )
        assert error is ErrorCode.invalid_request
        assert message is not None and "broker id must be specified" in message
        error, message = await _incremental(raw, BROKER, "1", ("log.retention.ms", SET, "1"))
        assert error is ErrorCode.invalid_request
        assert message == "Unexpected broker id, expected 0, but received 1"
        error, message = await _incremental(raw, BROKER, "x", ("log.retention.ms", SET, "1"))
        assert (error, message) == (
            ErrorCode.invalid_request,
            "Node id must be an integer, but it is: x",
        )
        error, message = await _incremental(raw, BROKER, "0", ("log.retention.ms", SET, None))
        assert (error, message) == (
            ErrorCode.invalid_request,
            "Null value not supported for : log.retention.ms",
        )
        error, _ = await _incremental(
            raw, BROKER, "0", ("log.retention.ms", SET, "1"), ("log.retention.ms", DELETE, None)
        )
        assert error is ErrorCode.invalid_request  # a config named twice
        error, message = await _incremental(raw, BROKER, "0", ("log.retention.ms", APPEND, "1"))
        assert (error, message) == (
            ErrorCode.invalid_config,
            "Config value append is not allowed for config key: log.retention.ms",
        )
        error, _ = await _incremental(
            raw, BROKER, "0", ("log.retention.ms", SET, "5"), validate_only=True
        )
        assert error is ErrorCode.none
        # validate_only changes nothing (the cluster-level min.insync.replicas is KIP-966's)
        assert kafka.cluster.broker_configs == {"": {"min.insync.replicas": "1"}}

        # APPEND to a LIST starts from Kafka's default; a name Kafka does not know is
        # stored (as Kafka does) and described as an unknown, sensitive config.
        assert (await _incremental(raw, BROKER, "", ("log.cleanup.policy", APPEND, "compact")))[
            0
        ] is ErrorCode.none
        assert (await _incremental(raw, BROKER, "0", ("custom.plugin.setting", SET, "on")))[
            0
        ] is ErrorCode.none
        assert kafka.cluster.broker_configs == {
            "": {"log.cleanup.policy": "delete,compact", "min.insync.replicas": "1"},
            "0": {"custom.plugin.setting": "on"},
        }
        _, configs = await _describe(raw, BROKER, "0")
        custom = configs["custom.plugin.setting"]
        assert (custom.value, custom.is_sensitive, custom.config_source) == (
            None,
            True,
            DYNAMIC_BROKER,
        )
        assert configs["log.cleanup.policy"].value == "delete,compact"
        assert configs["log.cleanup.policy"].config_source == DYNAMIC_DEFAULT
    finally:
        await raw.close()


async def test_legacy_alter_configs_replaces_a_brokers_dynamic_set(kafka: MiniKafka) -> None:
    raw = await RawClient.connect(kafka.bootstrap)
    try:
        assert await _alter(
            raw, BROKER, "0", {"log.retention.ms": "1000", "log.retention.bytes": "4096"}
        ) == (ErrorCode.none, None)
        assert kafka.cluster.broker_configs["0"] == {
            "log.retention.ms": "1000",
            "log.retention.bytes": "4096",
        }
        assert await _alter(raw, BROKER, "0", {"log.retention.bytes": "8192"}) == (
            ErrorCode.none,
            None,
        )
        assert kafka.cluster.broker_configs["0"] == {"log.retention.bytes": "8192"}
        error, message = await _alter(raw, BROKER, "0", {"auto.create.topics.enable": "false"})
        assert error is ErrorCode.invalid_request
        assert message == "Cannot update these configs dynamically: Set(auto.create.topics.enable)"
        error, _ = await _alter(raw, TOPIC, "no-such-topic", {"retention.ms": "1"})
        assert error is ErrorCode.unknown_topic_or_partition
    finally:
        await raw.close()


async def test_dynamic_broker_configs_survive_a_restart(tmp_path: Path) -> None:
    async with running_cluster(1, tmp_path) as app:
        raw = await RawClient.connect(app.bootstrap)
        try:
            await _incremental(raw, BROKER, "", ("log.segment.bytes", SET, "2097152"))
            await _incremental(raw, BROKER, "0", ("log.retention.bytes", SET, "65536"))
        finally:
            await raw.close()
    async with running_cluster(1, tmp_path) as app:
        assert app.cluster.broker_configs == {
            "": {"log.segment.bytes": "2097152", "min.insync.replicas": "1"},
            "0": {"log.retention.bytes": "65536"},
        }
        raw = await RawClient.connect(app.bootstrap)
        try:
            _, configs = await _describe(raw, BROKER, "0")
        finally:
            await raw.close()
        assert configs["log.segment.bytes"].config_source == DYNAMIC_DEFAULT
        assert configs["log.retention.bytes"].value == "65536"
        assert configs["log.dirs"].value == str(tmp_path / "broker-0")


def _kafka_python_round_trip(bootstrap: str) -> tuple[dict[str, Any], Any, dict[str, Any]]:
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        described = admin.describe_configs(
            [ConfigResource(ConfigResourceType.BROKER, "0")], config_filter="all"
        )
        altered = admin.alter_configs(
            [ConfigResource(ConfigResourceType.BROKER, "0", {"log.retention.ms": "5000"})]
        )
        after = admin.describe_configs(
            [ConfigResource(ConfigResourceType.BROKER, "0")], include_synonyms=True
        )
        return described["broker"]["0"], altered, after["broker"]["0"]
    finally:
        admin.close()


async def test_kafka_python_describes_and_alters_broker_configs(kafka: MiniKafka) -> None:
    described, altered, modified = await asyncio.to_thread(
        _kafka_python_round_trip, kafka.bootstrap
    )
    assert {"advertised.listeners", "listeners", "log.retention.ms"} <= set(described)
    assert described["num.partitions"]["read_only"] is True
    assert described["log.retention.ms"]["read_only"] is False
    assert altered == {"broker": {"0": "OK"}}
    # config_filter="modified" (the default): what is not a default -- the dynamic one.
    retention = modified["log.retention.ms"]
    assert retention["value"] == "5000"
    assert retention["config_source"] == "DYNAMIC_BROKER_CONFIG"
    assert retention["synonyms"][0]["source"] == "DYNAMIC_BROKER_CONFIG"
    assert kafka.cluster.broker_configs == {
        "": {"min.insync.replicas": "1"},  # KIP-966's cluster-level record
        "0": {"log.retention.ms": "5000"},
    }


def _confluent_round_trip(bootstrap: str) -> tuple[Any, Any, Any]:
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    change = ConfigResource(
        "BROKER",
        "0",
        incremental_configs=[
            ConfigEntry("log.retention.ms", "7000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    (future,) = admin.incremental_alter_configs([change], request_timeout=15).values()
    altered = future.result()
    bad = ConfigResource(
        "BROKER",
        "0",
        incremental_configs=[
            ConfigEntry("num.partitions", "7", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    (future,) = admin.incremental_alter_configs([bad], request_timeout=15).values()
    try:
        future.result()
        refused = None
    except Exception as exc:  # confluent_kafka.KafkaException
        refused = exc.args[0]
    (future,) = admin.describe_configs([ConfigResource("BROKER", "0")], request_timeout=15).values()
    return altered, refused, future.result()


async def test_confluent_kafka_alters_and_describes_with_synonyms(kafka: MiniKafka) -> None:
    from confluent_kafka import KafkaError

    altered, refused, configs = await asyncio.to_thread(_confluent_round_trip, kafka.bootstrap)
    assert altered is None
    assert refused.code() == KafkaError.INVALID_REQUEST
    retention = configs["log.retention.ms"]
    assert retention.value == "7000"
    assert retention.source == 2  # DYNAMIC_BROKER_CONFIG
    assert [(s.name, s.source) for s in retention.synonyms.values()] == [
        ("log.retention.ms", 2),
        ("log.retention.hours", 5),
    ]
    assert configs["advertised.listeners"].is_read_only
    assert not retention.is_read_only
