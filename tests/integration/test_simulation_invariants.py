"""The simulation's invariants catch a broken broker, and the real one keeps them.

Jepsen's checkers (issue 33) see what the eight invariants do not: a fetch from inside a
batch answered from the next batch (``fetch-inside-batch-skips-it``) skips records only
the transactions-v2 pipeline's seeks reach, a gap in its run of polls, and a new producer
epoch that keeps the old epoch's batches (``epoch-bump-keeps-old-batches``) answers the
v2 producer's next transaction as a retry of the last.

The broken broker is the planted bug ``hw-past-lagging-follower`` (`simulation.planted`): its
leader lets the high watermark (so acks=all) run to its own log end, past a lagging in-sync
follower. The nemesis' lagging-failover
pauses a follower and, while it lags, kills the broker whose partitions name it next, so
the controller elects it: what the broken leader acknowledged beyond the follower is gone.
"""

from __future__ import annotations

import logging

from simulation.history import History
from simulation.invariants import check_all
from simulation.scenario import SimulationConfig, SimulationResult, simulate

SEEDS = (1, 2, 3)


def _run(seed: int, plant: str | None = None) -> SimulationResult:
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    config = SimulationConfig(seed=seed, duration_s=60, faults={"lagging-failover": 1}, plant=plant)
    return simulate(config)


def test_a_high_watermark_that_passes_a_lagging_follower_is_caught() -> None:
    broken = {
        seed: [v.name for v in _run(seed, "hw-past-lagging-follower").verdicts if not v.held]
        for seed in SEEDS
    }
    assert any("no acknowledged record lost" in names for names in broken.values()), broken


def test_the_real_broker_loses_nothing_through_a_lagging_failover() -> None:
    for seed in SEEDS:
        result = _run(seed)
        assert result.held, (seed, [v for v in result.verdicts if not v.held])
        assert any("lagging-failover" in f for f in result.history.faults)


#: The end-of-run invariants that came before Jepsen's checkers (the first of check_all's).
EIGHT_INVARIANTS = {v.name for v in check_all(History())[:8]}


def test_bugs_only_jepsens_checkers_see_are_caught_by_them() -> None:
    # 30 virtual seconds (10 s of wall time each): the shortest run in which the v2
    # pipeline aborts and seeks back into a batch.
    for plant, checker in (
        ("fetch-inside-batch-skips-it", "no gap or inversion in a consumer's run (Jepsen)"),
        ("epoch-bump-keeps-old-batches", "no duplicate (Jepsen)"),
    ):
        logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
        result = simulate(SimulationConfig(seed=1, duration_s=30, plant=plant))
        broken = [v for v in result.verdicts if not v.held]
        assert checker in [v.name for v in broken], (plant, broken)
        # none of the eight end-of-run invariants sees it (a protocol client's checker may)
        assert not {v.name for v in broken} & EIGHT_INVARIANTS, (plant, broken)
        assert all(v.evidence for v in broken if "(Jepsen)" in v.name)
