"""Replication quotas (Kafka's ReplicationQuotaManager) on the manual clock.

The quota itself (SimpleRate, the bound, the throttled-replicas lists and their
validation), how a broker reads it from the cluster's configs, and the leader side as
Kafka's ReplicaManager: an out-of-sync follower of a throttled partition gets no
records while the leader quota is exceeded (at once and from the Fetch purgatory),
an in-sync one always does, and both count. The follower side is in
``tests/integration/test_replication_quotas.py`` (it needs a real fetcher).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest
from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import ClusterMetadata, MetadataError
from broker.cluster.controller import Controller
from broker.config.broker_config import BrokerConfig
from broker.config.dynamic_config import validate_dynamic_configs
from broker.handlers.topic_configs import validate_topic_configs
from broker.log import LogManager
from broker.quota.quota_metrics import replication_quota_families
from broker.quota.replication_quota_manager import (
    ALL_REPLICAS,
    ReplicationQuotaManager,
    ReplicationQuotas,
    ReplicationQuotaType,
    parse_throttled_partitions,
    throttled_replicas_error,
)
from broker.replica.partition import Partition, TopicPartition
from broker.replica.replica_fetcher import PartitionFetchState, ReplicaFetcherManager
from broker.replica.replica_manager import ReplicaManager
from broker.server.purgatories import PurgatorySet
from purgatory import ManualClock
from tests.unit.test_replica_manager import FetchAnswer, Node, batch, result_of

TOPIC = "t"
TP: TopicPartition = (TOPIC, 0)
START_MS = 1_000
RATE = 50  # bytes a second: one batch (61 bytes of header alone) puts the leader over


# -- the quota -------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["", "*", " * ", "0:1", "0:1,1:2", " 0:1 , 1:2 "])
def test_valid_throttled_replicas_lists(value: str) -> None:
    assert throttled_replicas_error("leader.replication.throttled.replicas", value) is None


@pytest.mark.parametrize("value", ["a", "0:1,*", "0-1", "0:", "0:1:2"])
def test_invalid_throttled_replicas_lists_get_kafkas_message(value: str) -> None:
    message = throttled_replicas_error("follower.replication.throttled.replicas", value)
    assert message == (
        "follower.replication.throttled.replicas must be the literal '*' or a list of "
        "replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."
    )


def test_a_broker_keeps_the_partitions_listed_with_its_own_id() -> None:
    assert parse_throttled_partitions("0:0,1:1,2:0", 0) == frozenset({0, 2})
    assert parse_throttled_partitions("0:0,1:1,2:0", 1) == frozenset({1})
    assert parse_throttled_partitions("0:0", 5) == frozenset()
    assert parse_throttled_partitions(" * ", 5) == ALL_REPLICAS


def test_the_rate_is_a_simple_rate_over_at_least_one_window() -> None:
    clock = ManualClock(START_MS)
    quota = ReplicationQuotaManager(ReplicationQuotaType.LEADER, clock)
    quota.record(10_000)
    assert not quota.is_quota_exceeded()  # no bound: never exceeded
    quota.update_quota(1_000.0)
    assert quota.byte_rate() == 10_000.0  # over one window, not samples - 1 of them
    assert quota.is_quota_exceeded()
    clock.advance(9_000)
    assert quota.byte_rate() == pytest.approx(10_000 / 9)
    assert quota.is_quota_exceeded()
    clock.advance(1_000)
    assert quota.byte_rate() == 1_000.0
    assert not quota.is_quota_exceeded()  # an upper bound, inclusive
    quota.update_quota(float(2**63 - 1))  # Kafka's default: Long.MAX_VALUE
    assert quota.upper_bound is None


def test_a_broker_reads_its_rates_and_throttled_replicas_from_the_cluster() -> None:
    metadata = ClusterMetadata()
    metadata.register_broker(0, "127.0.0.1", 1)
    metadata.register_broker(1, "127.0.0.1", 2)
    metadata.create_topic("a", 2, 2, {}, assignment=[[0, 1], [1, 0]])
    metadata.create_topic("b", 1, 1, {}, assignment=[[0]])
    quotas = ReplicationQuotas(0, metadata, ManualClock(START_MS))
    quotas.refresh()
    assert quotas.leader.upper_bound is None and quotas.follower.upper_bound is None
    assert not quotas.leader.is_throttled("a", 0)

    metadata.set_broker_configs("", {"leader.replication.throttled.rate": "500"})
    metadata.set_broker_configs("0", {"follower.replication.throttled.rate": "300"})
    metadata.update_configs(
        "a",
        {
            "leader.replication.throttled.replicas": "0:0,1:1",
            "follower.replication.throttled.replicas": "1:0",
        },
    )
    metadata.update_configs("b", {"leader.replication.throttled.replicas": "*"})
    quotas.refresh()
    assert quotas.leader.upper_bound == 500.0  # the cluster default
    assert quotas.follower.upper_bound == 300.0  # this broker's
    assert quotas.leader.is_throttled("a", 0) and not quotas.leader.is_throttled("a", 1)
    assert quotas.follower.is_throttled("a", 1) and not quotas.follower.is_throttled("a", 0)
    assert quotas.leader.is_throttled("b", 0)

    metadata.replace_configs("a", {})
    metadata.set_broker_configs("", {})
    quotas.refresh()
    assert not quotas.leader.is_throttled("a", 0)
    assert not quotas.follower.is_throttled("a", 1)
    assert quotas.leader.upper_bound is None


def test_only_a_lagging_follower_is_throttled_on_the_follower_side() -> None:
    metadata = ClusterMetadata()
    metadata.register_broker(0, "127.0.0.1", 1)
    metadata.create_topic(TOPIC, 1, 1, {"follower.replication.throttled.replicas": "*"})
    metadata.set_broker_configs("0", {"follower.replication.throttled.rate": str(RATE)})
    quotas = ReplicationQuotas(0, metadata, ManualClock(START_MS))
    quotas.follower.record(10 * RATE)
    state = PartitionFetchState(TP, 0)
    assert not state.is_replica_in_sync  # no answer yet: Kafka's lag is undefined
    assert quotas.should_follower_throttle(*TP, state.is_replica_in_sync)
    state.lag = 0
    assert not quotas.should_follower_throttle(*TP, state.is_replica_in_sync)


def test_rates_and_lists_are_validated_as_kafka_does() -> None:
    static = BrokerConfig.model_validate({})
    with pytest.raises(MetadataError) as refused:
        validate_dynamic_configs("0", {"leader.replication.throttled.rate": "-1"}, static)
    assert refused.value.error is ErrorCode.invalid_request
    assert str(refused.value) == (
        "Invalid value -1 for configuration leader.replication.throttled.rate: "
        "Value must be at least 0"
    )
    validate_dynamic_configs("", {"follower.replication.throttled.rate": "0"}, static)
    with pytest.raises(MetadataError) as bad_list:
        validate_topic_configs([("leader.replication.throttled.replicas", "0:a")])
    assert bad_list.value.error is ErrorCode.invalid_config
    assert str(bad_list.value).startswith(
        "Invalid value 0:a for configuration leader.replication.throttled.replicas: "
        "leader.replication.throttled.replicas must be the literal '*'"
    )


# -- the leader side -----------------------------------------------------------------------


@contextlib.asynccontextmanager
async def throttled_leader() -> AsyncIterator[Node]:
    """Broker 0 leads ``t-0`` on [0, 1, 2] with ISR [0, 1]: broker 2 is out of sync; the
    partition is leader-throttled at RATE bytes a second."""
    clock = ManualClock(START_MS)
    config = BrokerConfig.model_validate({"broker.id": 0})
    metadata = ClusterMetadata(cluster_id="test-cluster")
    for broker_id in (0, 1, 2):
        metadata.register_broker(broker_id, "127.0.0.1", 1)
    controller = Controller(metadata)
    metadata.create_topic(
        TOPIC, 1, 3, {"leader.replication.throttled.replicas": "*"}, assignment=[[0, 1, 2]]
    )
    metadata.change_partition(TOPIC, 0, isr=[0, 1])
    metadata.set_broker_configs("0", {"leader.replication.throttled.rate": str(RATE)})
    purgatories = PurgatorySet(clock, config)
    hosted: dict[TopicPartition, Partition] = {}
    quotas = ReplicationQuotas(0, metadata, clock)
    fetchers = ReplicaFetcherManager(0, config, metadata, clock, hosted)
    fetchers.pause_replication()
    manager = ReplicaManager(
        0,
        metadata,
        config,
        clock,
        purgatories,
        LogManager(None),
        controller,
        fetchers,
        wall_clock_ms=clock.now_ms,
        replication_quotas=quotas,
    )
    await manager.start()
    try:
        yield Node(clock, metadata, controller, purgatories, fetchers, manager)
    finally:
        await manager.stop()


def _leader_quota(node: Node) -> ReplicationQuotaManager:
    quotas = node.manager.replication_quotas
    assert quotas is not None
    return quotas.leader


def _append_and_replicate_to_1(node: Node, records: int) -> None:
    """Append to the leader; broker 1 (in sync) reports the new log end: the HW moves."""
    node.manager.append_to_leader(TP, batch(records), required_acks=1)
    node.follower_fetch(1, node.partition.log_end_offset)


async def test_an_out_of_sync_follower_gets_no_records_while_the_leader_is_over() -> None:
    async with throttled_leader() as node:
        _append_and_replicate_to_1(node, 3)
        first = node.fetch(0, replica_id=2, max_wait_ms=0)
        assert result_of(first)[1] == [0, 1, 2]  # not over yet: served, and counted
        assert _leader_quota(node).is_quota_exceeded()

        _append_and_replicate_to_1(node, 2)
        throttled = node.fetch(3, replica_id=2, max_wait_ms=0)
        assert result_of(throttled) == (ErrorCode.none, [], 5)  # as Kafka: no records
        assert node.isr() == [0, 1]

        served_before = _leader_quota(node).byte_rate()
        in_sync = node.fetch(3, replica_id=1, max_wait_ms=0)
        assert result_of(in_sync)[1] == [3, 4]  # never throttled...
        assert _leader_quota(node).byte_rate() > served_before  # ...but counted

        while _leader_quota(node).is_quota_exceeded():
            node.tick(1_000)
        assert result_of(node.fetch(3, replica_id=2, max_wait_ms=0))[1] == [3, 4]


async def test_a_parked_throttled_fetch_is_not_completed_by_appends() -> None:
    async with throttled_leader() as node:
        _append_and_replicate_to_1(node, 3)
        node.fetch(0, replica_id=2, max_wait_ms=0)  # served: puts the leader over
        _append_and_replicate_to_1(node, 1)
        # Broker 2 at 3, below the HW (4): out of sync, with a byte to read, yet parked.
        parked: FetchAnswer = node.fetch(3, replica_id=2, max_wait_ms=500)
        in_sync: FetchAnswer = node.fetch(4, replica_id=1, max_wait_ms=500)
        assert not parked.answered and not in_sync.answered
        node.manager.append_to_leader(TP, batch(1), required_acks=1)
        assert result_of(in_sync)[1] == [4]
        assert not parked.answered  # its bytes do not count while throttled
        node.tick(500)
        assert result_of(parked)[1] == []  # expired, still over: no records


def test_metrics_have_kafkas_names_per_broker() -> None:
    metadata = ClusterMetadata()
    quotas = ReplicationQuotas(3, metadata, ManualClock(START_MS))
    quotas.leader.record(2_000)
    families = {f.name: f for f in replication_quota_families([(3, quotas), (4, None)])}
    assert set(families) == {
        "kafka_server_leaderreplication_byte_rate",
        "kafka_server_followerreplication_byte_rate",
    }
    [leader] = families["kafka_server_leaderreplication_byte_rate"].samples
    assert (leader.labels, leader.value) == ({"broker": "3"}, 2_000.0)
    [follower] = families["kafka_server_followerreplication_byte_rate"].samples
    assert follower.value == 0.0
