"""KIP-966 on the controller: ELR and last-known ELR as the ISR shrinks below min ISR,
leaders from the ELR, unclean elections, the cluster-level min.insync.replicas."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import ClusterMetadata, PartitionState
from broker.cluster.controller import Controller
from broker.cluster.partition_change import Election, build_change

NO_LEADER = -1


def _cluster(min_isr: int = 2, **topic_configs: str) -> tuple[ClusterMetadata, Controller]:
    cluster = ClusterMetadata(cluster_id="elr")
    for broker_id in range(3):
        cluster.register_broker(broker_id, "127.0.0.1", 9092 + broker_id)
    controller = Controller(cluster, static_min_insync_replicas=min_isr)
    configs = {k.replace("_", "."): v for k, v in topic_configs.items()}
    cluster.create_topic("t", 1, 3, configs)
    return cluster, controller


def _state(cluster: ClusterMetadata) -> PartitionState:
    return cluster.topics["t"].partitions[0]


def _view(state: PartitionState) -> tuple[int, list[int], list[int], list[int]]:
    return state.leader, state.isr, sorted(state.elr), state.last_known_elr


def test_the_cluster_level_min_insync_replicas_is_written_from_the_static_value() -> None:
    cluster, _ = _cluster(min_isr=2)
    assert cluster.broker_configs[""] == {"min.insync.replicas": "2"}


def test_broker_level_min_insync_replicas_is_removed_when_elr_comes_on() -> None:
    cluster = ClusterMetadata()
    cluster.set_broker_configs("1", {"min.insync.replicas": "3", "log.retention.ms": "5"})
    Controller(cluster)
    assert cluster.broker_configs["1"] == {"log.retention.ms": "5"}
    assert cluster.broker_configs[""] == {"min.insync.replicas": "1"}


def test_without_elr_nothing_is_written() -> None:
    cluster = ClusterMetadata()
    Controller(cluster, eligible_leader_replicas_level=lambda: 0)
    assert cluster.broker_configs == {}


def test_the_isr_shrinking_below_min_isr_fills_the_elr_and_the_leader_comes_from_it() -> None:
    cluster, controller = _cluster(min_isr=2)
    state = _state(cluster)
    controller.on_broker_failure(2)  # ISR [0, 1]: at min ISR, no ELR
    assert _view(state) == (0, [0, 1], [], [])
    controller.on_broker_failure(1)  # below min ISR: 1 is eligible
    assert _view(state) == (0, [0], [1], [])
    controller.on_broker_failure(0)  # the ISR empties: 0 joins the ELR, last leader 0
    assert _view(state) == (NO_LEADER, [], [0, 1], [0])
    cluster.register_broker(1, "127.0.0.1", 9093)
    controller.on_broker_startup(1)  # an ELR member is a clean leader when the ISR is empty
    assert _view(state) == (1, [1], [0], [])


def test_a_replica_back_in_the_isr_at_min_isr_clears_the_elr() -> None:
    cluster, controller = _cluster(min_isr=2)
    state = _state(cluster)
    controller.on_broker_failure(2)
    controller.on_broker_failure(1)
    assert _view(state) == (0, [0], [1], [])
    cluster.register_broker(1, "127.0.0.1", 9093)
    controller.on_broker_startup(1)
    assert controller.alter_partition_isr("t", 0, 0, state.leader_epoch, [0, 1]) is ErrorCode.none
    assert _view(state) == (0, [0, 1], [], [])


def test_a_follower_dropped_by_alter_partition_below_min_isr_is_eligible() -> None:
    cluster, controller = _cluster(min_isr=3)
    state = _state(cluster)
    assert controller.alter_partition_isr("t", 0, 0, 0, [0, 1]) is ErrorCode.none
    assert _view(state) == (0, [0, 1], [2], [])


def test_a_new_min_insync_replicas_clears_the_elr() -> None:
    cluster, controller = _cluster(min_isr=2)
    state = _state(cluster)
    controller.on_broker_failure(2)
    controller.on_broker_failure(1)
    assert state.elr == [1]
    cluster.update_configs("t", {"min.insync.replicas": "2"})
    assert (state.elr, state.last_known_elr) == ([], [])


def test_unclean_election_takes_any_live_replica_and_clears_the_elr() -> None:
    cluster, controller = _cluster(min_isr=2, unclean_leader_election_enable="true")
    state = _state(cluster)
    controller.on_broker_failure(2)
    controller.on_broker_failure(1)
    controller.on_broker_failure(0)
    assert _view(state) == (NO_LEADER, [], [0, 1], [0])
    cluster.register_broker(2, "127.0.0.1", 9094)  # never an ISR nor ELR member of late
    controller.on_broker_startup(2)
    assert _view(state) == (2, [2], [], [])


def test_the_last_known_leader_leads_again_when_isr_and_elr_are_empty() -> None:
    state = PartitionState(0, [0, 1, 2], NO_LEADER, isr=[], elr=[], last_known_elr=[1])
    change = build_change(state, [], lambda r: r == 1, min_isr=2, elr_enabled=True)
    assert (change.leader, change.isr, change.last_known_elr) == (1, [1], [])
    assert change.unclean


def test_without_elr_the_last_isr_member_stays_in_the_isr() -> None:
    state = PartitionState(0, [0, 1, 2], 0, isr=[0])
    change = build_change(state, [], lambda r: r != 0, min_isr=2, elr_enabled=False)
    assert (change.leader, change.isr, change.elr) == (NO_LEADER, None, None)


def test_a_preferred_election_takes_the_first_replica_from_the_isr() -> None:
    state = PartitionState(0, [0, 1, 2], 1, isr=[0, 1, 2])
    change = build_change(
        state, [0, 1, 2], lambda r: True, min_isr=2, elr_enabled=True, election=Election.PREFERRED
    )
    assert change.leader == 0


def test_unregister_broker_removes_it_from_isr_elr_and_listings() -> None:
    cluster, controller = _cluster(min_isr=2)
    state = _state(cluster)
    controller.on_broker_failure(2)
    controller.on_broker_failure(1)
    assert state.elr == [1]
    assert controller.unregister_broker(1) == (ErrorCode.none, None)
    assert 1 not in cluster.brokers
    assert state.elr == []
    assert controller.unregister_broker(1) == (
        ErrorCode.broker_id_not_registered,
        "Broker ID 1 is not currently registered",
    )


def test_unregistering_a_live_broker_moves_its_leadership_and_it_registers_again() -> None:
    cluster, controller = _cluster(min_isr=1)
    state = _state(cluster)
    assert state.leader == 0
    assert controller.unregister_broker(0)[0] is ErrorCode.none
    assert 0 in cluster.brokers and cluster.brokers[0].alive
    assert state.leader == 1 and 0 not in state.isr
