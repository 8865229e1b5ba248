"""Seeds the campaigns broke, kept: each once found a bug (in the broker or in a checker).

The all-faults campaign (issue 33: `minikafka simulate --seeds 1..1000 --master 'local[2]'
--duration 60 --tiered --faults restart=1,...,skew=1`) runs every fault kind against the
whole workload. What it found:

- a broker bug: a share group's coordinator that stopped leading its ``__consumer_offsets``
  partition kept the group and its members' session timers; one expired there, fenced a
  member alive at the new coordinator and released the records it held, which went to the
  next fetch while it still held them (seed 57 at f72ac68). Fixed; the bug is the planted
  ``share-group-kept-on-unload``, and the seed that catches it in today's workload is here
  with it in and out (so are the other planted bugs below);
- a broker bug of its own making (session 12's share state transitions): an
  acknowledgement's state write carried the start offset past its own records and no batch
  for them, a later write (a lock expiry) carried the lower one, and the share coordinator
  took the later: an ACCEPTed record was delivered and ACCEPTed again after a failover
  (seed 6 run through its pinned command). The write carries the start offset as it is and
  the records' own batches, as Kafka's;
- a workload bug: the transform, after aborting its first transaction on a partition that
  had no committed offset yet, did not go back (aiokafka's ``seek_to_committed`` leaves such
  a partition where it is) and skipped 21 inputs (seed 98 of today's workload);
- a workload bug: aiokafka's transactional producer went fatal when a broker crashed during
  its FindCoordinator (aiokafka takes a closed connection there as fatal; against Kafka it
  would too), and the transform called ``begin_transaction`` on it again: an AssertionError
  ended the run (seed 1472, the session 15 campaign of seeds 1001..2000). The transform now
  does what Kafka asks of a fatal error: a new producer with the same transactional.id;
- checkers stricter than Kafka: a new leader's high watermark may be lower for a while
  (seed 27), a share partition's acquisitions die with its leader (seeds 27, 35), a lock
  timed by a clock running fast ends early (seed 6). Hand-made histories of each are in
  ``tests/unit/test_simulation_protocol_checks.py`` and ``test_commit_order_checker.py``;
  the seeds of today's workload that met them run here and must hold every check.
"""

from __future__ import annotations

import pytest

from simulation.command import DEFAULT_FAULTS
from whatif.seed_runs import SeedTask, run_seed_task

#: Every fault kind once, as the campaign runs them.
ALL_FAULTS = (
    "restart=1,partition=1,pause=1,delay=1,lagging-failover=1,broker-partition=1,one-way=1,"
    "loss=1,remote-slow=1,remote-down=1,crash=1,swizzle=1,hold=1,skew=1"
)

#: (seed, the check it broke before its fix) in today's workload.
CAMPAIGN_SEEDS = (
    (6, "share: no record ACCEPTed twice"),
    (98, "transform output exactly once"),
)

#: (seed, what ended its run before its fix) in today's workload.
FAILED_RUN_SEEDS = ((1472, "the transform's producer went fatal: AssertionError"),)

#: (planted bug, the seed that catches it with ``--faults default``, the check that does):
#: the broker bugs the campaigns found, fixed, and the bug a checker missed until the
#: workload judged a zombie's commit by the generation it was sent in.
PLANTED_SEEDS = (
    ("share-group-kept-on-unload", 25, "share: no record acquired by two members at once"),
    ("stale-member-commit-accepted", 11, "committed offsets never move back"),
)


def _run(seed: int, plant: str | None = None, *, every_fault: bool = True) -> dict[str, bool]:
    """The seed's own command (``minikafka simulate --seed N ... --row``), whose child pins
    the hash seed: a run in this process would depend on pytest's (a seed that catches a
    bug under one hash seed need not under another). Each check's name -> held."""
    options = ["--brokers", "3", "--duration", "60", "--rate", "5"]
    options += ["--faults", ALL_FAULTS if every_fault else DEFAULT_FAULTS]
    if every_fault:
        options.append("--tiered")
    if plant is not None:
        options += ["--plant", plant]
    run = run_seed_task(SeedTask(seed, tuple(options)))
    assert run.error is None, run.error
    return {name: bool(v["held"]) for name, v in run.row["invariants"].items()}


@pytest.mark.parametrize(("seed", "check"), CAMPAIGN_SEEDS)
def test_a_campaign_seed_that_broke_a_check_holds_every_check(seed: int, check: str) -> None:
    held = _run(seed)
    assert all(held.values()), [name for name, ok in held.items() if not ok]
    assert check in held


@pytest.mark.parametrize(("seed", "failure"), FAILED_RUN_SEEDS)
def test_a_campaign_seed_whose_run_failed_runs_to_its_end_and_holds(
    seed: int, failure: str
) -> None:
    held = _run(seed)  # asserts the run ended with a row, not an error
    assert all(held.values()), (failure, [name for name, ok in held.items() if not ok])


@pytest.mark.parametrize(("bug", "seed", "check"), PLANTED_SEEDS)
def test_a_planted_bug_is_caught_at_its_seed_which_holds_without_it(
    bug: str, seed: int, check: str
) -> None:
    broken = _run(seed, bug, every_fault=False)
    assert not broken[check], broken
    fixed = _run(seed, every_fault=False)
    assert all(fixed.values()), [name for name, ok in fixed.items() if not ok]
