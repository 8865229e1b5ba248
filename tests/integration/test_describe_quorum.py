"""DescribeQuorum with kafka-python's admin client against three combined-mode voters.

kafka-python's ``describe_metadata_quorum`` (what ``kafka-metadata-quorum.sh describe``
reads) sees the simulated KRaft quorum: broker 0 leads, every broker votes; a stopped
voter keeps the log end it had and lags the high watermark. A request for another
partition answers UNKNOWN_TOPIC_OR_PARTITION, as Kafka's raft client does.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kafka.admin import KafkaAdminClient
from kio.schema.errors import ErrorCode

from broker.app import MiniKafka
from protocol.builders import request_builder
from testkit.raw_client import RawClient
from tests.integration.conftest import running_cluster

DESCRIBE_QUORUM = 55


def describe(bootstrap: str) -> dict[str, Any]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        result: dict[str, Any] = admin.describe_metadata_quorum()
        return result
    finally:
        admin.close()


def only_partition(result: dict[str, Any]) -> dict[str, Any]:
    [topic] = result["topics"]
    assert topic["topic_name"] == "__cluster_metadata"
    [partition] = topic["partitions"]
    assert partition["error"] is None
    return dict(partition)


async def test_kafka_python_describes_the_quorum_and_a_stopped_voter_lags() -> None:
    async with running_cluster(3) as app:
        result = await asyncio.to_thread(describe, app.bootstrap)
        partition = only_partition(result)
        assert partition["leader_id"] == 0
        assert partition["leader_epoch"] >= 1
        high_watermark = partition["high_watermark"]
        assert high_watermark > 0
        voters = {v["replica_id"]: v for v in partition["current_voters"]}
        assert sorted(voters) == [0, 1, 2]
        assert all(v["log_end_offset"] == high_watermark for v in voters.values())
        assert all(v["last_fetch_timestamp"] > 0 for v in voters.values())
        assert partition["observers"] == []
        assert sorted(n["node_id"] for n in result["nodes"]) == [0, 1, 2]

        await app.stop_broker(2)
        app.cluster.create_topic("after-the-stop", 1, 1, {})
        # Ask broker 0 only: the stopped broker's address is in the bootstrap list.
        result = await asyncio.to_thread(describe, _address(app, 0))
        partition = only_partition(result)
        voters = {v["replica_id"]: v for v in partition["current_voters"]}
        assert partition["high_watermark"] > high_watermark
        assert voters[2]["log_end_offset"] < partition["high_watermark"]
        assert voters[1]["log_end_offset"] == partition["high_watermark"]
        assert voters[2]["last_fetch_timestamp"] <= voters[1]["last_fetch_timestamp"]


async def test_another_partition_is_unknown(kafka: MiniKafka) -> None:
    client = await RawClient.connect(kafka.brokers[0].advertised_host, kafka.brokers[0].port)
    try:
        response = await client.request(
            DESCRIBE_QUORUM,
            1,
            "DescribeQuorumRequest",
            topics=(_topic("__cluster_metadata", 1),),
        )
    finally:
        await client.close()
    [topic] = response.topics
    [partition] = topic.partitions
    assert partition.error_code is ErrorCode.unknown_topic_or_partition


def _topic(name: str, partition: int) -> Any:
    b = request_builder(DESCRIBE_QUORUM, 1)
    return b.TopicData(topic_name=name, partitions=(b.PartitionData(partition_index=partition),))


def _address(app: MiniKafka, broker_id: int) -> str:
    broker = app.brokers[broker_id]
    return f"{broker.advertised_host}:{broker.port}"
