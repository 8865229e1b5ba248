"""A capture replayed in virtual time (whatif.virtual_replay), and the what-if grid on Spark.

The captures are short `minikafka simulate` runs (three brokers; 10 virtual seconds with a
tiered topic, and 4 for the grid on Spark, whose cells each replay it in a Spark task), made
in this process. The virtual
replay needs no TCP: the cluster and the replay client share the simulated network, so what
is checked is the outcome, not a timing.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from protocol.capture_files import captured_cluster_config
from simulation.scenario import SimulationConfig, simulate
from spark_jobs.replay_result import VIRTUAL_TIME
from spark_jobs.run_info import read_run
from whatif.grid_cells import expand_grid, run_cell
from whatif.grid_compare import comparison_rows
from whatif.virtual_replay import (
    VirtualReplayConfig,
    capture_brokers,
    read_replay_rows,
    replay_virtual,
)

CAPTURE_S = 10.0


def _capture(where: Path, duration_s: float, *, tiered: bool = False) -> Path:
    out = where / "capture"
    simulate(SimulationConfig(brokers=3, seed=5, duration_s=duration_s, out=out, tiered=tiered))
    return out


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiered run (``--tiered``): the mix, plus a tiered topic read from its start."""
    return _capture(tmp_path_factory.mktemp("whatif"), CAPTURE_S, tiered=True)


def test_a_capture_replays_in_virtual_time_deterministically_and_every_request_is_answered(
    capture: Path,
) -> None:
    rows = read_replay_rows(capture)
    # The target runs as the captured cluster (remote.log.storage.system.enable among them),
    # as a grid cell's does.
    configs = captured_cluster_config(capture)
    config = VirtualReplayConfig(brokers=capture_brokers(rows), seed=7, captured_configs=configs)
    first = replay_virtual(rows, config)
    client = [r for r in first.results if r.traffic == "client"]
    assert len(first.results) == len(rows)
    assert len(client) > 100  # producers, consumers, a group, transactions
    assert all(r.run_kind == VIRTUAL_TIME for r in first.results)
    assert [r.replay_error for r in client if r.replay_error] == []
    expecting = [r for r in client if r.replay_skip is None and r.error_codes != []]
    assert expecting and all(r.response_ms is not None for r in expecting)
    # Virtual time covers the capture's schedule; the replay's answers carry no errors the
    # capture did not have for a Produce (every record is accepted again).
    assert first.virtual_s >= CAPTURE_S * 0.8
    # Every Produce of every client, the transactions-v2 pipeline's (``sim-tv2``: its epoch
    # moves at every EndTxn v5) among them, is accepted again -- but one known gap: the
    # replay does not log in, so the SASL client's (``sim-sasl-app``) requests are replayed
    # as User:ANONYMOUS, a super user, and its Produce to the topic it may not write (sent
    # to whichever broker, as it cannot see that topic's leaders) is answered
    # NOT_LEADER_OR_FOLLOWER (6) instead of TOPIC_AUTHORIZATION_FAILED.
    produces = [r for r in client if r.api_name == "Produce"]
    assert any(r.client_id == "sim-tv2" for r in produces)
    gaps = {"sim-sasl-app": {0, 6}}
    assert {c for r in produces if r.client_id not in gaps for c in r.error_codes or []} <= {0}
    for client_id, codes in gaps.items():
        assert {c for r in produces if r.client_id == client_id for c in r.error_codes or []} <= (
            codes
        )
    # A leader's AddPartitionsToTxn v4+ (``add-partitions-to-txn-N``) is the target's own
    # to send: skipped, counted as inter-broker.
    adds = [r for r in first.results if r.api_name == "AddPartitionsToTxn" and r.api_version >= 4]
    assert adds and all(r.traffic != "client" and r.replay_skip for r in adds)
    assert replay_virtual(rows, config).digest == first.digest
    other_seed = VirtualReplayConfig(brokers=3, seed=8, captured_configs=configs)
    assert replay_virtual(rows, other_seed).digest != first.digest


def test_a_grid_over_the_remote_tiers_latency_moves_remote_fetches_and_searches(
    capture: Path, tmp_path: Path
) -> None:
    """The done-when of issue 30: a tiered capture (``simulate --tiered``: its topic created
    by a CreateTopics the replay repeats, its reader below the local log start) replayed
    under two store latencies, two seeds each: the RemoteFetch and RemoteListOffsets rows
    move with the latency. The cells run here, one after the other, as a Spark task runs
    them (the Spark side of the grid is the test below)."""
    axis = [("rsm.config.latency.p50.ms", ["1", "200"])]
    cells = expand_grid(axis, [0, 1], str(capture), None, 8, None, tmp_path / "grid")
    outcomes = [run_cell(cell) for cell in cells]
    assert [o.error for o in outcomes] == [None] * 4
    rows = {(r.group, r.config): r for r in comparison_rows(outcomes) if r.kind == "purgatory"}
    for purgatory in ("RemoteFetch", "RemoteListOffsets"):
        fast, slow = rows[(purgatory, 0)], rows[(purgatory, 1)]
        assert fast.seeds == slow.seeds == 2 and fast.requests > 0
        # p50 (min, median, max over the seeds): every seed's median wait moved to about
        # the store's 200 ms (the replayed requests are not all the captured ones' twins:
        # a few answer otherwise, so the median may sit a hair below it)
        assert fast.spreads[0][2] < 100 and slow.spreads[0][0] > 190


@pytest.mark.spark
def test_a_grid_of_two_configs_by_two_seeds_on_spark_gives_the_comparison(tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    capture = _capture(tmp_path, 4.0)
    out = tmp_path / "grid"
    grid = ["--grid", "replica.fetch.wait.max.ms=500,100", "--seeds", "2", "--master", "local[2]"]
    command = [sys.executable, "-m", "minikafka", "simulate", "--capture", str(capture), *grid]
    run = subprocess.run(
        [*command, "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.count("client requests answered") == 4  # one progress line per cell
    cells = json.loads((out / "grid.json").read_text())["cells"]
    assert [(c["config"], c["seed"]) for c in cells] == [
        ("replica.fetch.wait.max.ms=500", 0),
        ("replica.fetch.wait.max.ms=500", 1),
        ("replica.fetch.wait.max.ms=100", 0),
        ("replica.fetch.wait.max.ms=100", 1),
    ]
    assert all(c["error"] is None and c["answered"] == c["client_requests"] for c in cells)
    for c in cells:
        replay = read_run(c["dir"])
        assert replay is not None and replay.run_kind == VIRTUAL_TIME
        assert replay.label == c["config"]
        assert list(Path(c["dir"]).glob("*.parquet"))
    table = (out / "comparison.md").read_text()
    for group in ("| api | Produce | replica.fetch.wait.max.ms=500 | 2 |", "| purgatory | Fetch |"):
        assert group in table
    assert "| api | Fetch | replica.fetch.wait.max.ms=100 | 2 |" in table
    assert "baseline" in table
