"""A capture replayed in virtual time (whatif.virtual_replay), and the what-if grid on Spark.

The captures are short `minikafka simulate` runs (three brokers; 10 virtual seconds, and 4 for
the grid, whose cells each replay it in a Spark task), made in this process. The virtual
replay needs no TCP: the cluster and the replay client share the simulated network, so what
is checked is the outcome, not a timing.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from simulation.scenario import SimulationConfig, simulate
from spark_jobs.replay_result import VIRTUAL_TIME
from spark_jobs.run_info import read_run
from whatif.virtual_replay import (
    VirtualReplayConfig,
    capture_brokers,
    read_replay_rows,
    replay_virtual,
)

CAPTURE_S = 10.0


def _capture(where: Path, duration_s: float) -> Path:
    out = where / "capture"
    simulate(SimulationConfig(brokers=3, seed=5, duration_s=duration_s, out=out))
    return out


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _capture(tmp_path_factory.mktemp("whatif"), CAPTURE_S)


def test_a_capture_replays_in_virtual_time_deterministically_and_every_request_is_answered(
    capture: Path,
) -> None:
    rows = read_replay_rows(capture)
    config = VirtualReplayConfig(brokers=capture_brokers(rows), seed=7)
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
    produce_codes = {c for r in client if r.api_name == "Produce" for c in r.error_codes or []}
    assert produce_codes <= {0}
    assert replay_virtual(rows, config).digest == first.digest
    assert replay_virtual(rows, VirtualReplayConfig(brokers=3, seed=8)).digest != first.digest


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
