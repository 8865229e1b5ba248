"""KIP-848 per-group configs over TCP with confluent-kafka's AdminClient: GROUP config
resources in IncrementalAlterConfigs and DescribeConfigs (sources GROUP_CONFIG /
DEFAULT_CONFIG, the override as its synonym) and Kafka's INVALID_CONFIG for a value out
of the broker's bounds."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from tests.integration.conftest import running_cluster

pytestmark = pytest.mark.asyncio

_QUIET = {"log_level": 3}


def _alter(bootstrap: str, group: str, changes: dict[str, str | None]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **_QUIET})
    entries = [
        ConfigEntry(
            name,
            value,
            incremental_operation=(
                AlterConfigOpType.SET if value is not None else AlterConfigOpType.DELETE
            ),
        )
        for name, value in changes.items()
    ]
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
    for future in admin.incremental_alter_configs([resource], request_timeout=15).values():
        future.result(timeout=30)


def _describe(bootstrap: str, group: str) -> dict[str, Any]:
    admin = AdminClient({"bootstrap.servers": bootstrap, **_QUIET})
    resource = ConfigResource(ResourceType.GROUP, group)
    futures = admin.describe_configs([resource], request_timeout=15)
    result: dict[str, Any] = futures[resource].result(timeout=30)
    return result


async def test_group_configs_are_altered_and_described_per_group() -> None:
    group = f"configs-{uuid.uuid4().hex[:8]}"
    async with running_cluster(**{"group.consumer.session.timeout.ms": "50000"}) as app:
        described = await asyncio.to_thread(_describe, app.bootstrap, group)
        assert set(described) == {
            "consumer.session.timeout.ms",
            "consumer.heartbeat.interval.ms",
            "share.session.timeout.ms",
            "share.heartbeat.interval.ms",
            "share.record.lock.duration.ms",
            "share.auto.offset.reset",
            "share.delivery.count.limit",
            "share.partition.max.record.locks",
            "share.isolation.level",
            "share.renew.acknowledge.enable",
            "errors.deadletterqueue.topic.name",
            "errors.deadletterqueue.copy.record.enable",
            "streams.session.timeout.ms",
            "streams.heartbeat.interval.ms",
            "streams.num.standby.replicas",
        }
        renew = described["share.renew.acknowledge.enable"]
        assert (renew.value, renew.source) == ("false", ConfigSource.DEFAULT_CONFIG.value)
        session = described["consumer.session.timeout.ms"]
        assert (session.value, session.source) == ("50000", ConfigSource.DEFAULT_CONFIG.value)

        await asyncio.to_thread(
            _alter, app.bootstrap, group, {"consumer.session.timeout.ms": "55000"}
        )
        described = await asyncio.to_thread(_describe, app.bootstrap, group)
        session = described["consumer.session.timeout.ms"]
        assert (session.value, session.source) == ("55000", ConfigSource.GROUP_CONFIG.value)
        assert [(s.name, s.value) for s in session.synonyms.values()] == [
            ("consumer.session.timeout.ms", "55000")
        ]
        # Every broker reads the cluster's store; another group keeps the broker's value.
        coordinator = app.brokers[0].services.coordinators.consumer_group
        assert coordinator.group_configs.consumer_session_timeout_ms(group) == 55000
        assert coordinator.group_configs.consumer_session_timeout_ms("other") == 50000

        # Out of the broker's bounds: INVALID_CONFIG with Kafka's message, nothing changed.
        with pytest.raises(KafkaException) as info:
            await asyncio.to_thread(
                _alter, app.bootstrap, group, {"consumer.heartbeat.interval.ms": "60000"}
            )
        assert "must be less than or equal to group.consumer.max.heartbeat.interval.ms" in str(
            info.value
        )
        await asyncio.to_thread(_alter, app.bootstrap, group, {"consumer.session.timeout.ms": None})
        described = await asyncio.to_thread(_describe, app.bootstrap, group)
        assert described["consumer.session.timeout.ms"].value == "50000"
