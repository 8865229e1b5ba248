"""The controller's reassignment and election model, and the broker config layers, without
a network: ``broker/cluster/replication_control.py`` and
``broker/config/dynamic_config.py`` over a bare
``ClusterMetadata`` (no brokers running, so nothing catches up unless the test says so).
"""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import ClusterMetadata, MetadataError, PartitionState
from broker.cluster.controller import Controller
from broker.cluster.replication_control import (
    PREFERRED,
    UNCLEAN,
    alter_partition_reassignment,
    elect_leader,
    ongoing_reassignments,
)
from broker.config.broker_config import BrokerConfig
from broker.config.broker_config_defs import ConfigSource
from broker.config.dynamic_config import (
    BrokerConfigLayers,
    broker_layers,
    broker_topic_defaults,
    validate_dynamic_configs,
)


def _cluster(brokers: int = 3) -> ClusterMetadata:
    cluster = ClusterMetadata()
    for broker_id in range(brokers):
        cluster.register_broker(broker_id, "127.0.0.1", 9092 + broker_id)
    return cluster


def _state(cluster: ClusterMetadata, topic: str = "t") -> PartitionState:
    return cluster.topics[topic].partitions[0]


def test_a_reassignment_completes_when_its_targets_join_the_isr() -> None:
    cluster = _cluster()
    cluster.create_topic("t", 1, 2, {}, assignment=[[0, 1]])
    controller = Controller(cluster)
    alter_partition_reassignment(cluster, "t", 0, [1, 2])
    state = _state(cluster)
    assert (state.replicas, state.adding_replicas, state.removing_replicas) == ([1, 2, 0], [2], [0])
    assert [o.partition for o in ongoing_reassignments(cluster)] == [0]
    epoch = state.leader_epoch
    # broker 2 caught up: the leader (0) asks for it in the ISR, which completes it
    assert controller.alter_partition_isr("t", 0, 0, epoch, [0, 1, 2]) is ErrorCode.none
    assert (state.replicas, state.isr, state.leader) == ([1, 2], [1, 2], 1)
    assert (state.adding_replicas, state.removing_replicas) == ([], [])
    assert state.leader_epoch == epoch + 1
    assert list(ongoing_reassignments(cluster)) == []


def test_a_shrink_or_reorder_completes_at_once_and_the_same_replicas_change_nothing() -> None:
    cluster = _cluster()
    cluster.create_topic("t", 1, 3, {}, assignment=[[0, 1, 2]])
    state = _state(cluster)
    partition_epoch = state.partition_epoch
    alter_partition_reassignment(cluster, "t", 0, [0, 1, 2])
    assert state.partition_epoch == partition_epoch
    alter_partition_reassignment(cluster, "t", 0, [2, 1])
    assert (state.replicas, state.isr, state.leader) == ([2, 1], [1, 2], 2)
    assert state.leader_epoch == 1


def test_a_new_target_keeps_a_replica_still_being_added() -> None:
    cluster = _cluster(4)
    cluster.create_topic("t", 1, 1, {}, assignment=[[0]])
    alter_partition_reassignment(cluster, "t", 0, [0, 2])
    alter_partition_reassignment(cluster, "t", 0, [2, 3])
    state = _state(cluster)
    assert (state.replicas, state.adding_replicas, state.removing_replicas) == (
        [2, 3, 0],
        [2, 3],
        [0],
    )


def test_cancelling_reverts_and_refuses_an_unclean_revert() -> None:
    cluster = _cluster()
    cluster.create_topic("t", 1, 1, {}, assignment=[[0]])
    with pytest.raises(MetadataError) as none_in_progress:
        alter_partition_reassignment(cluster, "t", 0, None)
    assert none_in_progress.value.error is ErrorCode.no_reassignment_in_progress
    alter_partition_reassignment(cluster, "t", 0, [1])
    state = _state(cluster)
    state.isr = [1]  # only the replica being added is in sync
    with pytest.raises(MetadataError) as unclean:
        alter_partition_reassignment(cluster, "t", 0, None)
    assert unclean.value.error is ErrorCode.invalid_replica_assignment
    alter_partition_reassignment(cluster, "t", 0, None, unclean_allowed=True)
    assert (state.replicas, state.isr, state.leader) == ([0], [0], 0)


@pytest.mark.parametrize(
    ("target", "error"),
    [
        ([], ErrorCode.invalid_replica_assignment),
        ([0, 0], ErrorCode.invalid_replica_assignment),
        ([0, 5], ErrorCode.invalid_replica_assignment),
    ],
)
def test_bad_targets(target: list[int], error: ErrorCode) -> None:
    cluster = _cluster()
    cluster.create_topic("t", 1, 1, {})
    with pytest.raises(MetadataError) as refused:
        alter_partition_reassignment(cluster, "t", 0, target)
    assert refused.value.error is error


def test_elections() -> None:
    cluster = _cluster()
    cluster.create_topic("t", 1, 3, {}, assignment=[[0, 1, 2]])
    state = _state(cluster)
    assert elect_leader(cluster, "t", 0, PREFERRED)[0] is ErrorCode.election_not_needed
    assert elect_leader(cluster, "t", 0, UNCLEAN)[0] is ErrorCode.election_not_needed
    state.leader = 1
    cluster.mark_broker_stopped(0)
    assert elect_leader(cluster, "t", 0, PREFERRED)[0] is ErrorCode.preferred_leader_not_available
    cluster.brokers[0].alive = True
    assert elect_leader(cluster, "t", 0, PREFERRED)[0] is ErrorCode.none
    assert state.leader == 0
    # leaderless, its ISR member down, another replica alive: unclean picks that one
    state.leader, state.isr = -1, [0]
    cluster.mark_broker_stopped(0)
    assert elect_leader(cluster, "t", 0, UNCLEAN)[0] is ErrorCode.none
    assert (state.leader, state.isr) == (1, [1])
    assert elect_leader(cluster, "nope", 0, PREFERRED)[0] is ErrorCode.unknown_topic_or_partition


def test_config_layers_list_synonyms_as_kafka() -> None:
    layers = BrokerConfigLayers(
        {"log.retention.ms": "1000"},
        {},
        {"log.retention.hours": "24"},
        {"log.retention.hours": "168"},
    )
    assert layers.synonyms("log.retention.ms") == [
        ("log.retention.ms", "1000", ConfigSource.DYNAMIC_BROKER_CONFIG),
        ("log.retention.hours", "24", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG),
    ]
    assert layers.topic_default("retention.ms") == "1000"
    unset = BrokerConfigLayers(
        {}, {}, {"log.retention.hours": "24"}, {"log.retention.hours": "168"}
    )
    assert unset.synonyms("log.retention.ms") == []  # Kafka drops what precedes the name
    assert unset.topic_default("retention.ms") == str(24 * 3_600_000)


def test_dynamic_defaults_reach_the_topic_defaults() -> None:
    cluster = _cluster(1)
    config = BrokerConfig.model_validate({})
    assert broker_topic_defaults(config, cluster, 0)["min.insync.replicas"] == "1"
    cluster.set_broker_configs("", {"min.insync.replicas": "2", "log.segment.bytes": "2097152"})
    defaults = broker_topic_defaults(config, cluster, 0)
    assert (defaults["min.insync.replicas"], defaults["segment.bytes"]) == ("2", "2097152")
    layers = broker_layers(config, cluster, 0)
    assert layers.value("listeners") == "PLAINTEXT://127.0.0.1:9092"


@pytest.mark.parametrize(
    ("resource", "configs", "fragment"),
    [
        ("0", {"num.partitions": "2"}, "Cannot update these configs dynamically"),
        ("0", {"ssl.keystore.location": "/x"}, "only per-listener"),
        ("0", {"min.insync.replicas": "0"}, "configuration min.insync.replicas"),
        ("0", {"log.cleaner.min.cleanable.ratio": "x"}, "Not a number of type DOUBLE"),
        ("", {"listeners": "PLAINTEXT://:1"}, "broker id must be specified"),
    ],
)
def test_dynamic_config_validation(resource: str, configs: dict[str, str], fragment: str) -> None:
    with pytest.raises(MetadataError) as refused:
        validate_dynamic_configs(resource, configs, BrokerConfig.model_validate({}))
    assert refused.value.error is ErrorCode.invalid_request
    assert fragment in refused.value.message
