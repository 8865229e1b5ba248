"""The what-if grid and a simulation campaign on a Spark standalone cluster of two workers
give local mode's digests.

A tiny capture (4 virtual seconds on three simulated brokers), a grid of 2 configs x 2 seeds
run by the real command (``minikafka simulate --capture ... --master URL``) on a master and
two one-core workers started by PySpark's own ``sbin/spark-daemon.sh``
(`testkit.spark_standalone`, stopped whatever happens). What is checked is the outcome: every
cell answered every client request, each (config, seed) cell has the digest it has locally,
and the executors' Python workers ran this interpreter with ``PYTHONHASHSEED=0`` -- the two
things a digest that repeats across machines needs.

The local digests come from `whatif.grid_cells.run_cell` -- what a local-mode Spark task
runs -- in a child with ``PYTHONHASHSEED=0``, the model fitted and the cells made (each with
its target capture) as ``python -m whatif`` does, while the cluster starts: a second JVM
would make the test half again as long (local mode by the command is
`test_whatif_virtual_replay`'s grid test).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from simulation.scenario import SimulationConfig, simulate

pytestmark = pytest.mark.spark

GRID = ["--grid", "replica.fetch.wait.max.ms=500,100", "--seeds", "2"]
LOCAL_DIGESTS = """
import json, sys
from pathlib import Path
from simulation.request_handlers import load_service_times
from whatif.grid_cells import expand_grid, parse_grid, run_cell
capture, out = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
model = load_service_times(capture)
axes = parse_grid(["replica.fetch.wait.max.ms=500,100"])
cells = expand_grid(axes, [0, 1], str(capture), None, 8, model, out)
print(json.dumps([[c.label, c.seed, run_cell(c).digest] for c in cells]))
"""


def _local_digests(capture: Path, out: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    command = [sys.executable, "-c", LOCAL_DIGESTS, str(capture), str(out)]
    return subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)


def _grid(capture: Path, master: str, out: Path, env: dict[str, str]) -> list[dict[str, Any]]:
    command = [sys.executable, "-m", "minikafka", "simulate", "--capture", str(capture), *GRID]
    run = subprocess.run(
        [*command, "--master", master, "--out", str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=400,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    cells: list[dict[str, Any]] = json.loads((out / "grid.json").read_text())["cells"]
    return cells


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One master and two one-core workers for the module (a cluster takes seconds to start)."""
    pytest.importorskip("pyspark")
    if shutil.which("java") is None:
        pytest.skip("no Java runtime")
    from testkit.spark_standalone import standalone_cluster

    with standalone_cluster(tmp_path_factory.mktemp("spark"), workers=2, cores=1) as running:
        assert running.alive_workers() == 2
        yield running


def test_a_grid_on_two_standalone_workers_answers_every_cell_with_local_modes_digests(
    tmp_path: Path, cluster: Any
) -> None:
    from testkit.spark_standalone import driver_env

    capture = tmp_path / "capture"
    simulate(SimulationConfig(brokers=3, seed=5, duration_s=4.0, out=capture))
    local = _local_digests(capture, tmp_path / "local")
    try:
        remote = _grid(capture, cluster.url, tmp_path / "cluster", driver_env())
        output, _ = local.communicate(timeout=300)
    finally:
        if local.poll() is None:
            local.kill()
            local.wait()
    assert local.returncode == 0

    assert len(remote) == 4
    for cell in remote:
        assert cell["error"] is None
        assert cell["client_requests"] > 0
        assert cell["answered"] == cell["client_requests"]
        assert cell["executor"]["python"] == sys.executable
        assert cell["executor"]["PYTHONHASHSEED"] == "0"
        assert str(cluster.base / "work") in cell["executor"]["cwd"]  # an executor's
    digests = {(config, seed): digest for config, seed, digest in json.loads(output)}
    assert len(set(digests.values())) == 4
    assert {(c["config"], c["seed"]): c["digest"] for c in remote} == digests


def test_a_campaign_on_two_standalone_workers_gives_each_seed_its_own_digest(
    tmp_path: Path, cluster: Any
) -> None:
    from testkit.spark_standalone import driver_env

    scenario = ["--duration", "6", "--faults", "restart=1"]
    simulate_ = [sys.executable, "-m", "minikafka", "simulate"]
    alone = {
        seed: subprocess.Popen(
            [*simulate_, "--seed", str(seed), *scenario], stdout=subprocess.PIPE, text=True
        )
        for seed in (1, 2)
    }
    out = tmp_path / "campaign"
    run = subprocess.run(
        [*simulate_, "--seeds", "1..2", *scenario, "--master", cluster.url, "--out", str(out)],
        capture_output=True,
        text=True,
        env=driver_env(),
        timeout=400,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    digests = {}
    for seed, process in alone.items():
        output, _ = process.communicate(timeout=300)
        digests[seed] = output.rsplit("digest ", 1)[1].split()[0]
    runs = json.loads((out / "campaign.json").read_text())["runs"]
    assert {r["seed"]: r["digest"] for r in runs} == digests
