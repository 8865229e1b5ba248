"""Partition: high watermark over the ISR, ISR shrink/expand decisions, follower path.

Times are plain integers (the partition takes ``now_ms`` from its caller): no clock, no
sleeps.
"""

from __future__ import annotations

from broker.cluster.cluster_metadata import ClusterMetadata
from broker.cluster.controller import NO_LEADER, Controller
from broker.log import MemoryLog
from broker.replica.partition import Partition
from protocol.record_builder import build_record_batch

LAG_MS = 30_000


def _batch(n: int = 1, *, producer_id: int = -1, base_sequence: int = -1) -> bytes:
    return build_record_batch(
        [(None, b"v", [])] * n,
        timestamp_ms=1000,
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=base_sequence,
    )


def _leader(now: int = 0) -> Partition:
    partition = Partition("t", 0, MemoryLog(), broker_id=0)
    partition.make_leader(0, [0, 1, 2], [0, 1, 2], now)
    return partition


def test_high_watermark_is_the_smallest_isr_log_end_and_waits_for_followers() -> None:
    leader = _leader()
    result = leader.append_records_to_leader(_batch(3), now_ms=0)
    assert result.last_offset == 2
    assert leader.high_watermark == 0  # followers have nothing yet
    assert not leader.update_follower(1, 3, now_ms=10)
    assert leader.high_watermark == 0
    assert leader.update_follower(2, 2, now_ms=10)
    assert leader.high_watermark == 2
    assert leader.update_follower(2, 3, now_ms=20)
    assert leader.high_watermark == 3


def test_high_watermark_moves_when_a_lagging_follower_leaves_the_isr() -> None:
    leader = _leader()
    leader.append_records_to_leader(_batch(2), now_ms=0)
    leader.update_follower(1, 2, now_ms=5)
    assert leader.high_watermark == 0
    leader.isr = [0, 1]
    assert leader.maybe_increment_high_watermark()
    assert leader.high_watermark == 2


def test_a_follower_that_stops_fetching_falls_out_of_sync_after_the_lag_time() -> None:
    leader = _leader(now=0)
    leader.append_records_to_leader(_batch(), now_ms=0)
    leader.update_follower(1, 1, now_ms=100)
    leader.update_follower(2, 1, now_ms=100)
    assert leader.out_of_sync_replicas(100 + LAG_MS, LAG_MS) == []
    leader.update_follower(1, 1, now_ms=200 + LAG_MS)
    assert leader.out_of_sync_replicas(200 + LAG_MS, LAG_MS) == [2]


def test_a_follower_that_reaches_the_previous_log_end_counts_as_caught_up_then() -> None:
    # Under a steady stream of appends a follower is never at the log end when it
    # fetches; reaching the log end of its previous fetch keeps it in sync (Kafka).
    leader = _leader(now=0)
    for step in range(1, 6):
        now = step * LAG_MS // 2
        leader.append_records_to_leader(_batch(), now_ms=now)
        leader.update_follower(1, leader.log_end_offset - 1, now_ms=now)
        leader.update_follower(2, 0, now_ms=now)  # stuck at the start
    assert leader.out_of_sync_replicas(5 * LAG_MS // 2 + 1, LAG_MS) == [2]


def test_a_follower_rejoins_the_isr_once_it_reaches_the_high_watermark() -> None:
    leader = _leader()
    leader.isr = [0, 1]
    leader.append_records_to_leader(_batch(4), now_ms=0)
    leader.update_follower(1, 4, now_ms=1)
    assert leader.high_watermark == 4
    leader.update_follower(2, 3, now_ms=1)
    assert not leader.should_join_isr(2)
    leader.update_follower(2, 4, now_ms=2)
    assert leader.should_join_isr(2)
    assert not leader.should_join_isr(1)  # already in


def test_follower_append_keeps_offsets_epochs_and_producer_state() -> None:
    leader = _leader()
    leader.append_records_to_leader(_batch(2, producer_id=7, base_sequence=0), now_ms=0)
    records = leader.read(0, 1 << 20, up_to_log_end=True).records

    follower = Partition("t", 0, MemoryLog(), broker_id=1)
    follower.make_follower(0, 0, [0, 1, 2], [0, 1, 2])
    follower.append_records_as_follower(records, leader_high_watermark=1)
    assert follower.log_end_offset == 2
    assert follower.high_watermark == 1
    assert follower.epoch_cache.latest_epoch == 0

    # Promoted, it recognises the producer's retry of what it replicated: success with
    # the original offsets, nothing written again.
    follower.make_leader(1, [0, 1, 2], [1, 2], now_ms=0)
    retry = follower.append_records_to_leader(_batch(2, producer_id=7, base_sequence=0), now_ms=0)
    assert (retry.error.name, retry.base_offset, retry.last_offset) == ("none", 0, 1)
    assert follower.log_end_offset == 2
    assert follower.epoch_cache.end_offset_for(0, follower.log_end_offset) == (0, 2)


def test_truncation_cuts_the_log_epochs_and_high_watermark() -> None:
    partition = _leader()
    partition.append_records_to_leader(_batch(3), now_ms=0)
    partition.make_leader(1, [0, 1, 2], [0, 1, 2], now_ms=0)
    partition.append_records_to_leader(_batch(2), now_ms=0)
    partition.make_follower(1, 2, [0, 1, 2], [1, 2])
    partition.high_watermark = 5
    partition.truncate_to(3)
    assert partition.log_end_offset == 3
    assert partition.high_watermark == 3
    assert partition.epoch_cache.latest_epoch == 0


def test_last_offset_for_leader_epoch_fences_stale_and_unknown_epochs() -> None:
    partition = _leader()
    partition.append_records_to_leader(_batch(3), now_ms=0)
    partition.make_leader(2, [0, 1, 2], [0, 1, 2], now_ms=0)
    partition.append_records_to_leader(_batch(1), now_ms=0)
    error, epoch, end = partition.last_offset_for_leader_epoch(2, 0)
    assert (error.name, epoch, end) == ("none", 0, 3)
    assert partition.last_offset_for_leader_epoch(-1, 2)[1:] == (2, 4)
    assert partition.last_offset_for_leader_epoch(1, 0)[0].name == "fenced_leader_epoch"
    assert partition.last_offset_for_leader_epoch(3, 0)[0].name == "unknown_leader_epoch"


# -- controller ------------------------------------------------------------------------


def _cluster(elr_level: int = 1) -> tuple[ClusterMetadata, Controller]:
    cluster = ClusterMetadata()
    for broker_id in range(3):
        cluster.register_broker(broker_id, "127.0.0.1", 9092 + broker_id)
    cluster.create_topic("t", 1, 3, {})
    return cluster, Controller(cluster, eligible_leader_replicas_level=lambda: elr_level)


def test_controller_elects_from_the_isr_and_bumps_the_epoch_on_failure() -> None:
    cluster, controller = _cluster()
    seen: list[str] = []
    cluster.subscribe(lambda name, _topic: seen.append(name))
    controller.on_broker_failure(0)
    state = cluster.topics["t"].partitions[0]
    assert (state.leader, state.leader_epoch, state.isr) == (1, 1, [1, 2])
    assert state.partition_epoch == 1
    assert seen == ["t"]
    assert cluster.controller_id == 1


def test_controller_keeps_a_partition_offline_until_its_last_isr_member_returns() -> None:
    # Before KIP-966 (eligible.leader.replicas.version=0): the last member stays in the ISR.
    cluster, controller = _cluster(elr_level=0)
    assert controller.alter_partition_isr("t", 0, 0, 0, [0]).name == "none"
    controller.on_broker_failure(0)
    state = cluster.topics["t"].partitions[0]
    assert state.leader == NO_LEADER  # no unclean election
    assert state.isr == [0]
    cluster.register_broker(0, "127.0.0.1", 9092)
    controller.on_broker_startup(0)
    assert (state.leader, state.isr) == (0, [0])


def test_with_elr_the_isr_empties_and_the_last_member_leads_again_from_the_elr() -> None:
    cluster, controller = _cluster()
    assert controller.alter_partition_isr("t", 0, 0, 0, [0]).name == "none"
    controller.on_broker_failure(0)
    state = cluster.topics["t"].partitions[0]
    assert state.leader == NO_LEADER  # 1 and 2 are alive but neither ISR nor ELR
    assert (state.isr, state.elr, state.last_known_elr) == ([], [0], [0])
    cluster.register_broker(0, "127.0.0.1", 9092)
    controller.on_broker_startup(0)
    assert (state.leader, state.isr, state.elr, state.last_known_elr) == (0, [0], [], [])


def test_controller_refuses_isr_changes_from_stale_leaders_and_dead_brokers() -> None:
    cluster, controller = _cluster()
    assert controller.alter_partition_isr("t", 0, 0, 0, [0, 1]).name == "none"
    assert controller.isr_shrinks == 1
    assert controller.alter_partition_isr("t", 0, 1, 0, [0, 1, 2]).name == "fenced_leader_epoch"
    cluster.brokers[2].alive = False
    assert controller.alter_partition_isr("t", 0, 0, 0, [0, 1, 2]).name == "ineligible_replica"
    cluster.brokers[2].alive = True
    assert controller.alter_partition_isr("t", 0, 0, 0, [0, 2, 1]).name == "none"
    assert cluster.topics["t"].partitions[0].isr == [0, 1, 2]
    assert controller.isr_expands == 1
