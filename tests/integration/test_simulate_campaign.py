"""A campaign of seeds on Spark (local mode): one task per seed, the digests a user gets.

``minikafka simulate --seeds A..B --master local[2] --out DIR`` runs each seed as its own
task; each task runs the seed's own command, so a seed's digest in the campaign is the one
``minikafka simulate --seed N`` prints. ``--check-determinism`` runs every seed twice.
(The same command on a standalone cluster: `test_whatif_standalone_cluster`.)
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

SCENARIO = ["--duration", "8", "--faults", "restart=1"]


def _simulate(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "minikafka", "simulate", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=400, check=False)


def _digest(seed: int) -> str:
    run = _simulate("--seed", str(seed), *SCENARIO)
    assert run.returncode == 0, run.stdout + run.stderr
    found = re.search(r"^digest ([0-9a-f]{16}) ", run.stdout, re.MULTILINE)
    assert found, run.stdout
    return found.group(1)


def test_a_campaign_runs_each_seed_twice_with_the_digest_the_seed_has_alone(
    tmp_path: Path,
) -> None:
    pytest.importorskip("pyspark")
    out = tmp_path / "campaign"
    run = _simulate(
        "--seeds", "1..2", *SCENARIO, "--master", "local[2]", "--check-determinism",
        "--out", str(out),
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "Determinism: 2 seeds run twice, 0 gave two digests." in run.stdout

    runs = json.loads((out / "campaign.json").read_text())["runs"]
    assert sorted((r["seed"], r["attempt"]) for r in runs) == [(1, 0), (1, 1), (2, 0), (2, 1)]
    assert all(r["error"] is None and r["held"] for r in runs)
    assert all(len(r["invariants"]) >= 7 and r["virtual_s"] > 8 for r in runs)
    rows = [json.loads(line) for line in (out / "rows.jsonl").read_text().splitlines()]
    assert len(rows) == 4
    assert rows[0]["replay"].startswith("minikafka simulate --brokers 3 --seed 1 --duration 8")
    in_campaign = {r["seed"]: r["digest"] for r in runs}
    assert in_campaign == {seed: _digest(seed) for seed in (1, 2)}
    assert "| no acknowledged record lost | 0 | - | - |" in (out / "campaign.md").read_text()
