"""List-valued topic configs emptied with IncrementalAlterConfigs, as Kafka allows.

confluent-kafka's AdminClient SUBTRACTs every item of a topic's ``cleanup.policy``: Kafka
accepts the empty list (its validator checks each item, and there are none), and the
topic then has no cleanup policy: DescribeConfigs shows "" as a topic override, the log
is neither deleted by retention nor compacted, and DeleteRecords is POLICY_VIOLATION.
The broker's default ``log.cleanup.policy`` may be emptied as well.
"""

from __future__ import annotations

import asyncio
from typing import Any

from broker.app import MiniKafka

TOPIC = "no-policy"


def _empty_the_policy(bootstrap: str) -> tuple[Any, Any, Any]:
    from confluent_kafka import KafkaException
    from confluent_kafka import TopicPartition as CKTopicPartition
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewTopic,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    (created,) = admin.create_topics(
        [NewTopic(TOPIC, 1, 1, config={"cleanup.policy": "compact,delete"})],
        request_timeout=15,
    ).values()
    created.result()
    subtract = ConfigResource(
        "TOPIC",
        TOPIC,
        incremental_configs=[
            ConfigEntry(
                "cleanup.policy", "delete,compact", incremental_operation=AlterConfigOpType.SUBTRACT
            ),
            # the throttled-replica lists may be empty too (their default)
            ConfigEntry(
                "leader.replication.throttled.replicas",
                "",
                incremental_operation=AlterConfigOpType.SET,
            ),
        ],
    )
    (future,) = admin.incremental_alter_configs([subtract], request_timeout=15).values()
    altered = future.result()
    (future,) = admin.describe_configs(
        [ConfigResource("TOPIC", TOPIC)], request_timeout=15
    ).values()
    described = future.result()
    (deleting,) = admin.delete_records([CKTopicPartition(TOPIC, 0, 0)], request_timeout=15).values()
    try:
        deleting.result()
        refused = None
    except KafkaException as exc:
        refused = exc.args[0]
    # The broker's default, log.cleanup.policy, may be emptied the same way.
    broker_default = ConfigResource(
        "BROKER",
        "0",
        incremental_configs=[
            ConfigEntry(
                "log.cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SUBTRACT
            )
        ],
    )
    (future,) = admin.incremental_alter_configs([broker_default], request_timeout=15).values()
    assert future.result() is None
    return altered, described, refused


async def test_subtracting_every_cleanup_policy_leaves_the_empty_list(kafka: MiniKafka) -> None:
    from confluent_kafka import KafkaError

    altered, described, refused = await asyncio.to_thread(_empty_the_policy, kafka.bootstrap)
    assert altered is None
    policy = described["cleanup.policy"]
    assert policy.value == ""
    assert policy.source == 1  # DYNAMIC_TOPIC_CONFIG: an override, not the default
    assert described["leader.replication.throttled.replicas"].value == ""
    assert kafka.cluster.topics[TOPIC].configs["cleanup.policy"] == ""
    log_config = kafka.brokers[0].replica_manager.partitions[(TOPIC, 0)].log.config
    assert not log_config.deletes and not log_config.compacts
    assert refused.code() == KafkaError.POLICY_VIOLATION
    assert kafka.cluster.broker_configs["0"]["log.cleanup.policy"] == ""
