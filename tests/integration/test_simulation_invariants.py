"""The simulation's invariants catch a broken broker, and the real one keeps them.

The broken broker is a test-only switch: its leader lets the high watermark (so acks=all)
run to its own log end, past a lagging in-sync follower. The nemesis' lagging-failover
pauses a follower and, while it lags, kills the broker whose partitions name it next, so
the controller elects it: what the broken leader acknowledged beyond the follower is gone.
"""

from __future__ import annotations

import logging

import pytest

from broker.replica.partition import Partition
from simulation.scenario import SimulationConfig, SimulationResult, simulate

SEEDS = (1, 2, 3)


def _run(seed: int) -> SimulationResult:
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    return simulate(SimulationConfig(seed=seed, duration_s=60, faults={"lagging-failover": 1}))


def _high_watermark_at_leader_log_end(self: Partition) -> bool:
    """The bug: HW = the leader's log end, whatever the ISR has."""
    if not self.is_leader or self.log_end_offset <= self.high_watermark:
        return False
    self.high_watermark = self.log_end_offset
    self.producers.on_high_watermark_updated(self.high_watermark)
    return True


def test_a_high_watermark_that_passes_a_lagging_follower_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        Partition, "maybe_increment_high_watermark", _high_watermark_at_leader_log_end
    )
    broken = {seed: [v.name for v in _run(seed).verdicts if not v.held] for seed in SEEDS}
    assert any("no acknowledged record lost" in names for names in broken.values()), broken


def test_the_real_broker_loses_nothing_through_a_lagging_failover() -> None:
    for seed in SEEDS:
        result = _run(seed)
        assert result.held, (seed, [v for v in result.verdicts if not v.held])
        assert any("lagging-failover" in f for f in result.history.faults)
