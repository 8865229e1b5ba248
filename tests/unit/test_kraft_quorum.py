"""The simulated KRaft quorum DescribeQuorum shows, on a manual wall clock."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from broker.cluster.cluster_metadata import ClusterMetadata
from broker.cluster.controller import Controller
from broker.cluster.kraft_quorum import (
    KRaftQuorum,
    ReplicaState,
    parse_quorum_voters,
)
from broker.config.broker_config import BrokerConfig
from purgatory import ManualClock

T0 = 1_700_000_000_000


def cluster(brokers: int = 3) -> ClusterMetadata:
    metadata = ClusterMetadata(cluster_id="c")
    for broker_id in range(brokers):
        metadata.register_broker(broker_id, "127.0.0.1", 9092 + broker_id)
    return metadata


def test_by_default_every_broker_is_a_voter_and_the_controller_leads() -> None:
    clock = ManualClock(T0)
    metadata = cluster()
    quorum = KRaftQuorum(metadata, wall_clock_ms=clock.now_ms)
    described = quorum.describe()
    assert (described.leader_id, described.leader_epoch) == (0, 1)
    end = metadata.version
    assert described.high_watermark == end
    assert described.voters == [ReplicaState(b, end, T0, T0) for b in range(3)]
    assert described.observers == []
    assert described.nodes == {b: ("127.0.0.1", 9092 + b) for b in range(3)}


def test_a_stopped_voter_keeps_what_it_had_and_lags() -> None:
    clock = ManualClock(T0)
    metadata = cluster()
    quorum = KRaftQuorum(metadata, wall_clock_ms=clock.now_ms)
    controller = Controller(metadata, quorum)
    clock.advance(100)
    quorum.on_broker_stopped(2)  # as MiniKafka.stop_broker tells it, before the stop
    at_stop = metadata.version
    controller.on_broker_failure(2)
    metadata.create_topic("t", 1, 1, {})
    clock.advance(5_000)
    described = quorum.describe()
    stopped = described.voters[2]
    assert stopped == ReplicaState(2, at_stop, T0 + 100, T0 + 100)
    assert stopped.log_end_offset < described.high_watermark == metadata.version
    assert described.voters[1].last_fetch_timestamp == T0 + 5_100


def test_the_leader_moves_with_the_controller_and_the_epoch_counts_it() -> None:
    clock = ManualClock(T0)
    metadata = cluster()
    quorum = KRaftQuorum(metadata, wall_clock_ms=clock.now_ms)
    controller = Controller(metadata, quorum)
    assert quorum.describe().leader_epoch == 1
    controller.on_broker_failure(0)
    described = quorum.describe()
    assert (described.leader_id, described.leader_epoch) == (1, 2)


def test_without_a_majority_the_high_watermark_stays() -> None:
    clock = ManualClock(T0)
    metadata = cluster()
    quorum = KRaftQuorum(metadata, wall_clock_ms=clock.now_ms)
    controller = Controller(metadata, quorum)
    committed = quorum.describe().high_watermark
    controller.on_broker_failure(1)
    controller.on_broker_failure(2)
    described = quorum.describe()
    assert described.high_watermark == committed < metadata.version
    assert described.leader_id == 0


def test_configured_voters_make_the_other_brokers_observers() -> None:
    clock = ManualClock(T0)
    metadata = cluster()
    voters = parse_quorum_voters("1@ctl-1:9093, 7@ctl-7:9093")
    quorum = KRaftQuorum(metadata, voters, wall_clock_ms=clock.now_ms)
    described = quorum.describe()
    assert [v.replica_id for v in described.voters] == [1, 7]
    assert described.voters[1] == ReplicaState(7)  # never fetched: unknown
    assert [o.replica_id for o in described.observers] == [0, 2]
    assert described.leader_id == 1  # the controller (0) is no voter: the lowest live one
    assert described.nodes == {1: ("ctl-1", 9093), 7: ("ctl-7", 9093)}


@pytest.mark.parametrize("value", ["1@host", "x@h:1", "1@h:99999", "@h:1", "-1@h:1"])
def test_bad_voters_are_refused_at_start(value: str) -> None:
    with pytest.raises(ValueError, match="Invalid voter"):
        parse_quorum_voters(value)
    with pytest.raises(ValidationError):
        BrokerConfig.model_validate({"controller.quorum.voters": value})


def test_the_voters_config_is_modelled() -> None:
    config = BrokerConfig.model_validate({"controller.quorum.voters": "0@localhost:9093"})
    assert config.controller_quorum_voters == "0@localhost:9093"
