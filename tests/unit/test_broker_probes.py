"""The simulation's broker-side check of a leader start (`simulation.broker_probes`): a
follower promoted keeps the high watermark it had; the planted
``new-leader-resets-high-watermark`` does not, and the check says so (a client cannot:
Kafka lets a new leader's high watermark be a fetch behind)."""

from __future__ import annotations

from broker.log import MemoryLog
from broker.replica.partition import Partition
from protocol.record_builder import build_record_batch
from simulation.broker_probes import watch_leader_starts
from simulation.history import History, LeaderStart
from simulation.invariants import check_all
from simulation.planted import planted

NAME = "a new leader keeps its high watermark"


def _promoted_follower(history: History) -> Partition:
    """A follower that replicated 3 records and learnt a high watermark of 2, promoted."""
    leader = Partition("t", 0, MemoryLog(), broker_id=0)
    leader.make_leader(0, [0, 1], [0, 1], 0)
    leader.append_records_to_leader(
        build_record_batch([(None, b"v", ())] * 3, timestamp_ms=0), now_ms=0
    )
    follower = Partition("t", 0, MemoryLog(), broker_id=1)
    follower.make_follower(0, 0, [0, 1], [0, 1])
    follower.append_records_as_follower(
        leader.read(0, 1 << 20, up_to_log_end=True).records, leader_high_watermark=2
    )
    with watch_leader_starts(history):
        follower.make_leader(1, [0, 1], [1], 0)
    return follower


def _verdict(history: History) -> tuple[bool, str]:
    (verdict,) = [v for v in check_all(history) if v.name == NAME]
    return verdict.held, verdict.detail


def test_a_promoted_follower_keeps_its_high_watermark() -> None:
    history = History()
    follower = _promoted_follower(history)
    assert history.leader_starts == [LeaderStart("t", 0, 1, 1, 2, follower.high_watermark)]
    assert follower.high_watermark >= 2
    assert _verdict(history) == (True, "1 leader starts, 0 below their own")


def test_a_new_leader_that_forgets_its_high_watermark_is_caught() -> None:
    history = History()
    with planted("new-leader-resets-high-watermark"):
        _promoted_follower(history)
    held, detail = _verdict(history)
    assert not held and "broker 1 t-0 at leader epoch 1: 2 -> 0" in detail
    assert Partition.__dict__["make_leader"].__name__ == "make_leader"  # restored
