"""The what-if grid in local mode and on a Spark standalone cluster of 1 and 2 workers.

    .venv/bin/python -m bench.replay_whatif.whatif_cluster_bench
        [--capture DIR | --duration 30 --seed 1]
        [--grid replica.fetch.wait.max.ms=500,100 ...] [--seeds 8] [--local local[*]]
        [--workers 1,2] [--cores 1] [--keep DIR]

1. A capture: ``minikafka simulate --duration D --seed S --out`` (three simulated brokers,
   the workload mix in virtual time; a second or two of wall time), or ``--capture DIR``.
2. The same grid, by the real command ``minikafka simulate --capture C --grid ... --seeds N
   --master M --out OUT``, once in local mode (``--local``) and once per ``--workers`` count
   on a fresh standalone cluster from PySpark's own scripts (`spark_standalone`: 127.0.0.1,
   ``--cores`` cores per worker, the executors' Python this interpreter). With 1 core per
   worker the cluster rows show how the grid scales with task slots.
3. One table: mode, workers, cores, cells ok/failed, the command's wall seconds (a JVM, the
   service-time fit and the Parquet writes included), the grid's own wall seconds
   (``OUT/grid.json``), per-cell wall p50/max (inside the task), the p50 of the seconds each
   cell's Parquet write took (a Spark job from the driver), and how many executors ran cells.
   Then the checks: every mode gave each (config, seed) cell the same digest (the grid is
   deterministic), every cell's Python worker ran this interpreter with
   ``PYTHONHASHSEED=0`` (what ``spark.executorEnv.PYTHONHASHSEED`` must reach).

Exit status 1 only when a digest differs between modes or a cell failed (or the executors'
Python is not this one). Wall times are figures, never pass/fail. The Spark daemons are
stopped whatever happens.

Figures: see ``bench/README.md`` (whatif_cluster_bench.py).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testkit.spark_standalone import driver_env, standalone_cluster

MINIKAFKA = [sys.executable, "-m", "minikafka"]
DEFAULT_GRID = "replica.fetch.wait.max.ms=500,100"


@dataclass
class ModeRun:
    """One run of the grid: where it ran and what ``OUT/grid.json`` says."""

    mode: str
    master: str
    workers: int
    cores: int
    command_s: float
    returncode: int
    grid: dict[str, Any]

    @property
    def cells(self) -> list[dict[str, Any]]:
        cells = self.grid.get("cells", [])
        return cells if isinstance(cells, list) else []

    @property
    def ok(self) -> int:
        return sum(1 for c in self.cells if c["error"] is None)

    def digests(self) -> dict[tuple[str, int], str | None]:
        return {
            (c["config"], c["seed"]): (c["digest"] if c["error"] is None else None)
            for c in self.cells
        }


def make_capture(out: Path, duration_s: int, seed: int, log: Path) -> None:
    argv = [*MINIKAFKA, "simulate", "--duration", str(duration_s), "--seed", str(seed)]
    with open(log, "w") as err:
        subprocess.run([*argv, "--out", str(out)], check=True, stdout=err, stderr=err, timeout=600)


def run_grid(capture: Path, grid: list[str], seeds: int, master: str, out: Path) -> ModeRun:
    argv = [*MINIKAFKA, "simulate", "--capture", str(capture), "--seeds", str(seeds)]
    for axis in grid:
        argv += ["--grid", axis]
    argv += ["--master", master, "--out", str(out)]
    began = time.monotonic()
    with open(out.with_suffix(".log"), "w") as log:
        done = subprocess.run(argv, stdout=log, stderr=log, env=driver_env(), timeout=3600)
    took = time.monotonic() - began
    summary = out / "grid.json"
    document = json.loads(summary.read_text()) if summary.exists() else {}
    return ModeRun("", master, 0, 0, took, done.returncode, document)


def local_cores(master: str) -> int:
    """The task slots of ``local``, ``local[N]`` or ``local[*]``."""
    inside = master.partition("[")[2].partition("]")[0].split(",")[0]
    return int(inside) if inside.isdigit() else (os.cpu_count() or 1) if inside else 1


def fmt_s(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def print_table(runs: list[ModeRun]) -> None:
    head = (
        f"{'mode':10} {'workers':>7} {'cores':>5} {'cells ok/failed':>15} {'wall s':>7} "
        f"{'grid s':>7} {'cell p50 s':>10} {'cell max s':>10} {'write p50 s':>11} "
        f"{'executors':>9}  master"
    )
    print(head)
    for run in runs:
        walls = [c["wall_s"] for c in run.cells if c["error"] is None]
        writes = [c.get("write_s", 0.0) for c in run.cells if c["error"] is None]
        executors = {c.get("executor", {}).get("cwd") for c in run.cells}
        failed = len(run.cells) - run.ok
        print(
            f"{run.mode:10} {run.workers:>7} {run.cores:>5} {f'{run.ok}/{failed}':>15} "
            f"{run.command_s:>7.1f} {fmt_s(run.grid.get('wall_s')):>7} "
            f"{fmt_s(statistics.median(walls) if walls else None):>10} "
            f"{fmt_s(max(walls) if walls else None):>10} "
            f"{fmt_s(statistics.median(writes) if writes else None):>11} "
            f"{len(executors - {None}):>9}  "
            f"{run.master}"
        )


def check(runs: list[ModeRun], expected_cells: int) -> list[str]:
    """What makes the bench fail: a failed or missing cell, a digest, a foreign Python."""
    problems: list[str] = []
    reference = runs[0].digests()
    for run in runs:
        if run.returncode != 0 or len(run.cells) != expected_cells or run.ok != expected_cells:
            problems.append(
                f"{run.mode} {run.workers}w: exit {run.returncode}, "
                f"{run.ok}/{expected_cells} cells ok"
            )
        differ = sorted(k for k, v in run.digests().items() if v != reference.get(k))
        if differ:
            problems.append(f"{run.mode} {run.workers}w: digests differ from local for {differ}")
        for cell in run.cells:
            where = cell.get("executor", {})
            if where.get("python") != sys.executable or where.get("PYTHONHASHSEED") != "0":
                problems.append(f"{run.mode} {run.workers}w: a cell ran on {where}")
                break
    return problems


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--capture", type=Path, default=None, help="use this capture")
    parser.add_argument("--duration", type=int, default=30, help="capture's virtual s (30)")
    parser.add_argument("--seed", type=int, default=1, help="capture's seed (1)")
    parser.add_argument("--grid", action="append", default=None, help=f"({DEFAULT_GRID})")
    parser.add_argument("--seeds", type=int, default=8, help="seeds per config (8)")
    parser.add_argument("--local", default="local[*]", help="local master (local[*])")
    parser.add_argument("--workers", default="1,2", help="cluster sizes to run (1,2)")
    parser.add_argument("--cores", type=int, default=1, help="cores per worker (1)")
    parser.add_argument("--keep", type=Path, default=None, help="keep everything in DIR")
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    grid = args.grid or [DEFAULT_GRID]
    workers = [int(w) for w in args.workers.split(",") if w.strip()]
    base = args.keep or Path(tempfile.mkdtemp(prefix="whatif-cluster-bench-"))
    base.mkdir(parents=True, exist_ok=True)
    capture = args.capture
    if capture is None:
        capture = base / "capture"
        print(f"capture: minikafka simulate --duration {args.duration} --seed {args.seed}")
        make_capture(capture, args.duration, args.seed, base / "capture.log")
    configs = 1
    for axis in grid:
        configs *= len(axis.split("=", 1)[1].split(","))
    cells = configs * args.seeds
    print(f"grid: {' '.join(grid)} x {args.seeds} seeds = {cells} cells over {capture}")
    runs: list[ModeRun] = []
    print(f"local mode ({args.local}) ...", flush=True)
    run = run_grid(capture, grid, args.seeds, args.local, base / "local")
    run.mode, run.workers, run.cores = "local", 0, local_cores(args.local)
    runs.append(run)
    for count in workers:
        began = time.monotonic()
        spark_dir = base / f"spark-{count}w"
        with standalone_cluster(spark_dir, count, args.cores) as cluster:
            up = time.monotonic() - began
            print(f"standalone {cluster.url}: {count} x {args.cores} cores, up in {up:.1f} s")
            run = run_grid(capture, grid, args.seeds, cluster.url, base / f"standalone-{count}w")
        run.mode, run.workers, run.cores = "standalone", count, count * args.cores
        runs.append(run)
    print()
    print_table(runs)
    problems = check(runs, cells)
    walls = [c["wall_s"] for c in runs[0].cells if c["error"] is None]
    if walls:
        virtual = runs[0].cells[0]["virtual_s"]
        print(f"cell cost (local): {statistics.mean(walls):.1f} s wall for {virtual:.0f} s virtual")
    if problems:
        print("FAILED: " + "; ".join(problems))
        print(f"logs and results in {base}")
        return 1
    print("every mode gave every cell the same digest; executors: this Python, PYTHONHASHSEED=0")
    if args.keep is None:
        shutil.rmtree(base, ignore_errors=True)
    else:
        print(f"logs and results in {base}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
