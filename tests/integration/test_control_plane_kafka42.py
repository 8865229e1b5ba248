"""The control plane of Kafka 4.2 with real clients: KIP-966's ELR and cluster-level
min.insync.replicas, UnregisterBroker (64), AddRaftVoter / RemoveRaftVoter (80/81).

confluent-kafka's admin sees ``min.insync.replicas`` on every topic as a
DYNAMIC_DEFAULT_BROKER_CONFIG (what confluent-kafka-python's own
``test_incremental_alter_configs`` expects of a 4.1+ broker); kafka-python's
``describe_topic_partitions`` reads the ELR and last-known ELR; UnregisterBroker and the
voter changes go through the project's raw client (no client here speaks them) and are
checked with DescribeCluster and kafka-python's ``describe_metadata_quorum``.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)
from kafka.admin import KafkaAdminClient
from kio.schema.errors import ErrorCode

from broker.app import MiniKafka
from protocol.builders import request_builder
from testkit.raw_client import RawClient
from tests.integration.conftest import running_cluster

UNREGISTER_BROKER, ADD_RAFT_VOTER, REMOVE_RAFT_VOTER, DESCRIBE_CLUSTER = 64, 80, 81, 60


def _configs(bootstrap: str, topic: str) -> dict[str, Any]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("retention.ms", "10000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    for future in admin.incremental_alter_configs([res]).values():
        future.result(timeout=10)
    [future] = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values()
    return dict(future.result(timeout=10))


async def test_confluent_kafka_sees_the_cluster_level_min_insync_replicas() -> None:
    async with running_cluster(1) as app:
        app.cluster.create_topic("elr-configs", 2, 1, {"compression.type": "gzip"})
        entries = await asyncio.to_thread(_configs, app.bootstrap, "elr-configs")
        non_default = sorted(str(e) for e in entries.values() if not e.is_default)
        assert non_default == [
            'compression.type="gzip"',
            'min.insync.replicas="1"',
            'retention.ms="10000"',
        ]
        min_isr = entries["min.insync.replicas"]
        assert min_isr.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value


def _partitions(bootstrap: str, topic: str) -> dict[str, Any]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        [described] = admin.describe_topic_partitions([topic])["topics"]
        [partition] = described["partitions"]
        return dict(partition)
    finally:
        admin.close()


def _address(app: MiniKafka, broker_id: int) -> str:
    broker = app.brokers[broker_id]
    return f"{broker.advertised_host}:{broker.port}"


async def test_kafka_python_reads_the_elr_as_brokers_stop() -> None:
    async with running_cluster(3, **{"min.insync.replicas": "2"}) as app:
        app.cluster.create_topic("elr", 1, 3, {}, assignment=[[0, 1, 2]])
        await app.stop_broker(2)
        await app.stop_broker(1)
        partition = await asyncio.to_thread(_partitions, _address(app, 0), "elr")
        assert (partition["leader_id"], partition["isr_nodes"]) == (0, [0])
        assert partition["eligible_leader_replicas"] == [1]
        assert not partition["last_known_elr"]  # empty (kafka-python may read it as None)
        # Broker 2 left while the ISR was still at min ISR: it is not eligible.
        assert sorted(partition["offline_replicas"]) == [1, 2]


async def _raw(app: MiniKafka, api_key: int, version: int, message: str, **fields: Any) -> Any:
    broker = app.brokers[0]
    client = await RawClient.connect(broker.advertised_host, broker.port)
    try:
        return await client.request(api_key, version, message, **fields)
    finally:
        await client.close()


async def _listed_brokers(app: MiniKafka) -> list[int]:
    response = await _raw(
        app,
        DESCRIBE_CLUSTER,
        2,
        "DescribeClusterRequest",
        include_cluster_authorized_operations=False,
        endpoint_type=1,
        include_fenced_brokers=True,
    )
    return sorted(int(b.broker_id) for b in response.brokers)


async def test_unregister_broker_removes_a_stopped_broker_from_describe_cluster() -> None:
    async with running_cluster(3) as app:
        await app.stop_broker(2)
        assert await _listed_brokers(app) == [0, 1, 2]  # fenced, still registered
        response = await _raw(app, UNREGISTER_BROKER, 0, "UnregisterBrokerRequest", broker_id=2)
        assert response.error_code is ErrorCode.none
        assert await _listed_brokers(app) == [0, 1]
        again = await _raw(app, UNREGISTER_BROKER, 0, "UnregisterBrokerRequest", broker_id=2)
        assert again.error_code is ErrorCode.broker_id_not_registered
        assert again.error_message == "Broker ID 2 is not currently registered"


def _quorum(bootstrap: str) -> tuple[list[int], list[int], dict[int, uuid.UUID]]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        [topic] = admin.describe_metadata_quorum()["topics"]
        [partition] = topic["partitions"]
        voters = [v["replica_id"] for v in partition["current_voters"]]
        observers = [o["replica_id"] for o in partition["observers"]]
        dirs = {
            r["replica_id"]: uuid.UUID(str(r["replica_directory_id"]))
            for r in partition["current_voters"] + partition["observers"]
        }
        return sorted(voters), sorted(observers), dirs
    finally:
        admin.close()


async def test_remove_and_add_a_raft_voter_show_in_describe_quorum(kafka: MiniKafka) -> None:
    app = kafka
    voters, observers, _ = await asyncio.to_thread(_quorum, app.bootstrap)
    assert (voters, observers) == ([0], [])
    directory = app.controller.quorum.directory_id(0)
    removed = await _raw(
        app,
        REMOVE_RAFT_VOTER,
        0,
        "RemoveRaftVoterRequest",
        cluster_id=app.cluster.cluster_id,
        voter_id=0,
        voter_directory_id=directory,
    )
    # The only voter: Kafka's VoterSet refuses to become empty.
    assert removed.error_code is ErrorCode.voter_not_found
    b = request_builder(ADD_RAFT_VOTER, 1)
    added = await _raw(
        app,
        ADD_RAFT_VOTER,
        1,
        "AddRaftVoterRequest",
        cluster_id="another-cluster",
        timeout=30_000,
        voter_id=0,
        voter_directory_id=directory,
        listeners=(b.Listener(name="CONTROLLER", host="127.0.0.1", port=9093),),
        ack_when_committed=True,
    )
    assert added.error_code is ErrorCode.inconsistent_cluster_id


async def test_voter_changes_in_a_three_node_quorum() -> None:
    async with running_cluster(3) as app:
        _, _, dirs = await asyncio.to_thread(_quorum, app.bootstrap)
        removed = await _raw(
            app,
            REMOVE_RAFT_VOTER,
            0,
            "RemoveRaftVoterRequest",
            cluster_id=None,
            voter_id=2,
            voter_directory_id=dirs[2],
        )
        assert removed.error_code is ErrorCode.none
        assert (await asyncio.to_thread(_quorum, app.bootstrap))[:2] == ([0, 1], [2])
        b = request_builder(ADD_RAFT_VOTER, 1)
        fields = {
            "cluster_id": app.cluster.cluster_id,
            "timeout": 30_000,
            "voter_id": 2,
            "voter_directory_id": dirs[2],
            "listeners": (b.Listener(name="CONTROLLER", host="127.0.0.1", port=9095),),
            "ack_when_committed": True,
        }
        added = await _raw(app, ADD_RAFT_VOTER, 1, "AddRaftVoterRequest", **fields)
        assert added.error_code is ErrorCode.none
        assert (await asyncio.to_thread(_quorum, app.bootstrap))[:2] == ([0, 1, 2], [])
        duplicate = await _raw(app, ADD_RAFT_VOTER, 1, "AddRaftVoterRequest", **fields)
        assert duplicate.error_code is ErrorCode.duplicate_voter
