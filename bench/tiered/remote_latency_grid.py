"""The what-if grid over the remote tier's latency: remote fetches and searches per grid point.

    .venv/bin/python -m bench.tiered.remote_latency_grid [--points 5/50,50/500]
        [--seeds 3] [--duration 60] [--capture DIR] [--workers 2]

A ``minikafka simulate --tiered`` run (three brokers, ``--duration`` virtual seconds, seed
1; or ``--capture``, a capture of such a run) is replayed in virtual time as the what-if
grid's cells replay it (``whatif.grid_cells.run_cell``: the captured cluster's configs, the
service times fitted from the capture) once per grid point and seed, each point a store
latency ``P50/P99`` (``rsm.config.latency.p50.ms`` / ``.p99.ms``, minikafka's model of the
embedded store, not Kafka configs). Cells run in ``--workers`` processes, not on Spark: the
figures are the grid's, without the JVM.

Per point, each figure min-max over the seeds (one figure when the ends agree):

* ``RemoteFetch`` / ``RemoteListOffsets``: the operations the *target* brokers parked there
  (their capture), and the time each was parked (the capture's remote time, until it
  completed or expired) at p50 and p99;
* ``tiered Fetch``: the consumer's response time (send to answer, the replay client's
  virtual ms) of the fetches the capture shows reading the tier;
* ``all Fetch``: every consumer Fetch, the long polls included.

The process re-executes itself with ``PYTHONHASHSEED=0`` (as the grid's cells run), so a
cell's digest repeats. Figures, not assertions.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from bench.lib.stats import percentile
from bench.lib.tables import table_lines

if TYPE_CHECKING:
    from whatif.grid_cells import Cell, CellOutcome

MODULE = "bench.tiered.remote_latency_grid"
REMOTE_PURGATORIES = ("RemoteFetch", "RemoteListOffsets")


def _reexec_with_fixed_hash_seed() -> None:
    if os.environ.get("PYTHONHASHSEED") != "0":
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        os.execve(sys.executable, [sys.executable, "-m", MODULE, *sys.argv[1:]], env)


def _points(text: str) -> list[tuple[str, str]]:
    points = []
    for item in text.split(","):
        p50, _, p99 = item.partition("/")
        points.append((p50.strip(), (p99 or p50).strip()))
    return points


def _quiet() -> None:
    for noisy in ("aiokafka", "asyncio", "broker"):
        logging.getLogger(noisy).setLevel(logging.CRITICAL)


def _run(cell: Cell) -> CellOutcome:
    from whatif.grid_cells import run_cell

    _quiet()
    return run_cell(cell)


def _parked_ms(target_capture: str | None) -> dict[str, list[float]]:
    """The target brokers' remote waits: purgatory -> each request's parked ms."""
    from protocol.capture import CaptureRequest
    from protocol.capture_files import capture_files, read_capture

    parked: dict[str, list[float]] = {p: [] for p in REMOTE_PURGATORIES}
    if target_capture is None:
        return parked
    for path in capture_files(target_capture):
        for record in read_capture(path, requests_only=True):
            if isinstance(record, CaptureRequest) and record.purgatory in parked:
                parked[record.purgatory].append(record.remote_time_ms)
    return parked


def _spread(per_seed: Iterable[float | None], digits: int = 1) -> str:
    values = sorted(v for v in per_seed if v is not None)
    if not values:
        return "-"
    low, high = f"{values[0]:.{digits}f}", f"{values[-1]:.{digits}f}"
    return low if low == high else f"{low}-{high}"


def _figures(outcomes: Sequence[CellOutcome]) -> list[object]:
    """One table row for one grid point's cells (its seeds)."""
    per_seed: dict[str, list[list[float]]] = {}
    for outcome in outcomes:
        groups = _parked_ms(outcome.cell.target_capture)
        fetches = [
            r
            for r in outcome.results
            if r.traffic == "client" and r.api_name == "Fetch" and r.response_ms is not None
        ]
        groups["tiered Fetch"] = [r.response_ms for r in fetches if r.purgatory == "RemoteFetch"]
        groups["all Fetch"] = [r.response_ms for r in fetches]
        for name, values in groups.items():
            per_seed.setdefault(name, []).append(values)
    row: list[object] = []
    for name in (*REMOTE_PURGATORIES, "tiered Fetch", "all Fetch"):
        seeds = per_seed.get(name, [])
        row.append(_spread((len(v) for v in seeds), digits=0))
        row += [_spread(percentile(v, q) for v in seeds) for q in (50, 99)]
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", default="5/50,50/500", help="P50/P99 store latencies, ms")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=60.0, help="capture, virtual s")
    parser.add_argument("--capture", type=Path, default=None, help="a simulate --tiered capture")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    _reexec_with_fixed_hash_seed()
    _quiet()
    from protocol.capture_files import captured_cluster_config
    from simulation.request_handlers import load_service_times
    from simulation.scenario import SimulationConfig, simulate
    from spark_jobs.run_info import TARGET_CAPTURE_DIR
    from whatif.grid_cells import Cell, cell_dir, config_label

    with tempfile.TemporaryDirectory(prefix="tiered-grid-") as scratch:
        capture = args.capture
        began = time.perf_counter()
        if capture is None:
            capture = Path(scratch) / "capture"
            simulate(SimulationConfig(3, 1, args.duration, out=capture, tiered=True))
            print(f"capture: simulate --tiered, {args.duration:.0f} virtual s, seed 1 "
                  f"({time.perf_counter() - began:.1f} s)")  # fmt: skip
        if captured_cluster_config(capture).get("remote.log.storage.system.enable") != "true":
            print(f"{capture}: not a capture of a cluster with tiered storage", file=sys.stderr)
            return 2
        model = load_service_times(capture)
        cells: list[Cell] = []
        for number, (p50, p99) in enumerate(_points(args.points)):
            overrides = {"rsm.config.latency.p50.ms": p50, "rsm.config.latency.p99.ms": p99}
            for seed in range(args.seeds):
                cell = Cell(len(cells), number, config_label(overrides), seed, overrides,
                            str(capture), None, 8, model)  # fmt: skip
                target = cell_dir(Path(scratch) / "grid", cell) / TARGET_CAPTURE_DIR
                cells.append(replace(cell, target_capture=str(target)))
        began = time.perf_counter()
        with ProcessPoolExecutor(max_workers=args.workers) as pool:
            outcomes = list(pool.map(_run, cells))
        failed = [o for o in outcomes if o.error is not None]
        print(f"{len(cells)} cells in {time.perf_counter() - began:.1f} s; failed: {len(failed)}")
        for outcome in failed:
            print(f"  {outcome.cell.label} seed {outcome.cell.seed}: {outcome.error}")
        header = ["store p50/p99 ms", "seeds"]
        for name in (*REMOTE_PURGATORIES, "tiered Fetch", "all Fetch"):
            header += [f"{name} n", "p50 ms", "p99 ms"]
        rows = []
        for number, (p50, p99) in enumerate(_points(args.points)):
            mine = [o for o in outcomes if o.cell.config == number and o.error is None]
            rows.append([f"{p50}/{p99}", len(mine), *_figures(mine)])
        print("\n".join(table_lines(header, rows, rule=True)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
