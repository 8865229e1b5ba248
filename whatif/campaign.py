"""``minikafka simulate --seeds A..B --master URL --out DIR``: a campaign of seeds on Spark.

Each seed is one Spark task, and the task runs the very command a user replays that seed
with (``python -m minikafka simulate --seed N ... --row FILE``) in a process of its own: that
command pins the hash seed and switches address-space randomisation off before the run, so a
seed's digest on an executor is the digest it has on a laptop, whatever the worker's
environment (a Spark Python worker is forked from a daemon whose heap is not ours to pin).
The task returns the row (`simulation.run_row`: seed, digest, invariants, wall and virtual
seconds, the replay command) and, for a seed that broke an invariant, its whole history;
the driver writes them as each seed ends (a campaign stopped part-way keeps what it ran), so
``--out`` need only exist where the driver runs.

Like the what-if grid (`whatif.grid`), the driver submits one single-task job per seed from
as many threads as the master has task slots, so seeds run side by side and each one's line
is printed as it ends. ``--check-determinism`` runs every seed twice, in two tasks, and names
any seed whose two digests differ.

Written under ``--out``: ``rows.jsonl`` (one row per run, in seed order), ``campaign.json``
(the command, the master, the counts, every run), ``campaign.md`` (the page: what held, what
broke and how to replay it, any divergent seed, the spread of wall time per seed), and per
broken seed ``failures/seed-N/history.json`` and ``replay.txt``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from broker import real_clock
from whatif.campaign_page import campaign_page, divergent_seeds
from whatif.grid import task_slots
from whatif.grid_cells import parse_seeds
from whatif.seed_runs import SeedRun, SeedTask, run_seed_task

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["main", "run_campaign", "seed_options"]


def _run_on_spark(spark: SparkSession, task: SeedTask) -> SeedRun:
    sc = spark.sparkContext
    sc.setJobDescription(f"simulate seed {task.seed} (run {task.attempt + 1})")
    try:
        (run,) = sc.parallelize([task], 1).map(run_seed_task).collect()
    except Exception as exc:  # the task itself died (worker crash, lost executor)
        return SeedRun(task, error=f"Spark task failed: {str(exc).splitlines()[0][:300]}")
    assert isinstance(run, SeedRun)
    return run


def _line(run: SeedRun, done: int, total: int) -> str:
    head = f"run {done}/{total}  seed {run.task.seed:>5}"
    if run.task.attempt:
        head += " (again)"
    if run.error is not None:
        return f"{head}  FAILED: {run.error}"
    row = run.row
    broken = [name for name, v in row["invariants"].items() if not v["held"]]
    state = "held" if not broken else "BROKEN: " + "; ".join(broken)
    ratio = row["virtual_s"] / row["wall_s"] if row["wall_s"] > 0 else float("inf")
    return (
        f"{head}  digest {row['digest']}  {row['virtual_s']:.1f} s virtual in "
        f"{row['wall_s']:.1f} s ({ratio:.1f}x)  {state}"
    )


def run_campaign(
    spark: SparkSession,
    tasks: Sequence[SeedTask],
    out: Path,
    command: str,
    stream: TextIO = sys.stdout,
) -> list[SeedRun]:
    """Every task (as many at once as there are task slots); then the rows and the page."""
    out.mkdir(parents=True, exist_ok=True)
    master = str(spark.sparkContext.master)
    began = real_clock.monotonic_s()
    slots = task_slots(spark)
    print(f"{len(tasks)} runs on {master} ({slots} task slots)", file=stream, flush=True)
    runs: list[SeedRun] = []
    with (
        ThreadPoolExecutor(max_workers=min(slots, len(tasks)) or 1) as pool,
        (out / "rows.jsonl").open("w", encoding="utf-8") as rows,
    ):
        futures = [pool.submit(_run_on_spark, spark, task) for task in tasks]
        for future in as_completed(futures):
            runs.append(future.result())
            print(_line(runs[-1], len(runs), len(tasks)), file=stream, flush=True)
            _keep(out, runs[-1], rows)
    runs.sort(key=lambda r: (r.task.seed, r.task.attempt))
    wall_s = real_clock.monotonic_s() - began
    _write(out, runs, command, master, wall_s)
    page = campaign_page(runs, command, master, wall_s)
    (out / "campaign.md").write_text(page, encoding="utf-8")
    print(page, file=stream, flush=True)
    return runs


def _keep(out: Path, run: SeedRun, rows: TextIO) -> None:
    """One run's row and (for a broken seed) its history, written as the run ends.

    A campaign stopped part-way (hours of CPU for a thousand seeds) keeps every seed it ran;
    the end of the campaign rewrites ``rows.jsonl`` in seed order.
    """
    if run.error is None:
        rows.write(json.dumps(run.row) + "\n")
        rows.flush()
    if run.history is not None and run.task.attempt == 0:
        where = out / "failures" / f"seed-{run.task.seed}"
        where.mkdir(parents=True, exist_ok=True)
        (where / "history.json").write_text(run.history, encoding="utf-8")
        (where / "replay.txt").write_text(run.row["replay"] + "\n", encoding="utf-8")


def _write(out: Path, runs: Sequence[SeedRun], command: str, master: str, wall_s: float) -> None:
    with (out / "rows.jsonl").open("w", encoding="utf-8") as rows:
        for run in runs:
            if run.error is None:
                rows.write(json.dumps(run.row) + "\n")
    document = {
        "command": command,
        "master": master,
        "wall_s": round(wall_s, 3),
        "runs": [
            {"seed": r.task.seed, "attempt": r.task.attempt, "error": r.error, **r.row}
            for r in runs
        ],
    }
    (out / "campaign.json").write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")


def seed_options(args: argparse.Namespace) -> tuple[str, ...]:
    """The simulate options each seed's command carries (the campaign's own are left out)."""
    options = [
        "--brokers",
        str(args.brokers),
        "--duration",
        f"{args.duration:g}",
        "--faults",
        args.faults,
        "--rate",
        f"{args.rate:g}",
    ]
    if args.service_times is not None:
        options += ["--service-times", str(args.service_times.resolve())]
        options += ["--io-threads", str(args.io_threads)]
    if args.tiered:
        options.append("--tiered")
    if args.plant is not None:
        options += ["--plant", args.plant]
    if args.no_buggify:
        options.append("--no-buggify")
    return tuple(options)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="minikafka simulate --master",
        description="A campaign of simulated runs on Spark, one seed per task.",
        allow_abbrev=False,  # simulate's --seed must not read as --seeds
    )
    parser.add_argument("--seeds", required=True, help="A..B, or N for seeds 0..N-1")
    parser.add_argument("--master", default=None, help="Spark master (default local[*])")
    parser.add_argument("--out", required=True, type=Path, help="results directory")
    parser.add_argument("--check-determinism", action="store_true")
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--faults", default="none")
    parser.add_argument("--rate", type=float, default=5.0)
    parser.add_argument("--service-times", type=Path, default=None)
    parser.add_argument("--io-threads", type=int, default=8)
    parser.add_argument("--plant", default=None)
    parser.add_argument("--tiered", action="store_true")
    parser.add_argument("--no-buggify", action="store_true")
    args, _ = parser.parse_known_args(argv)  # simulate's other options pass through unused
    try:
        args.seed_list = parse_seeds(str(args.seeds))
    except ValueError as exc:
        parser.error(str(exc))
    return args


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    from spark_jobs.session import build_spark_session

    options = seed_options(args)
    attempts = (0, 1) if args.check_determinism else (0,)
    tasks = [SeedTask(seed, options, attempt) for seed in args.seed_list for attempt in attempts]
    command = "minikafka simulate " + " ".join(argv)
    spark = build_spark_session("minikafka-campaign", args.master)
    try:
        runs = run_campaign(spark, tasks, args.out.resolve(), command)
    finally:
        spark.stop()
    return 0 if all(r.held for r in runs) and not divergent_seeds(runs) else 1


if __name__ == "__main__":
    sys.exit(main())
