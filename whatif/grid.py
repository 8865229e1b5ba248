"""``minikafka simulate --capture DIR --grid key=v1,v2 ... --seeds N --out DIR``: a what-if
grid of broker configurations x seeds over one capture, each cell one Spark task.

Each (configuration, seed) cell is one Spark job of one task (`grid_cells.run_cell`: a whole
simulated cluster and the replay client in the task's Python worker), submitted from its own
driver thread so that the cells run side by side on every free task slot (local mode by
default; any master with ``--master``, the capture at the same path on every executor). As
each cell ends the driver prints one progress line and writes its rows where a real-time
replay writes them -- ``OUT/<config>/seed-<s>/``: RESULT_SCHEMA Parquet and ``_replay.json``
(run kind virtual-time, the configuration as the label and target config) -- so
``minikafka report`` and ``compare`` read each cell unchanged. A failed cell (its replay
raised, or its Spark task died) is reported and left out; the grid goes on. At the end:
``OUT/comparison.md`` (`grid_compare`: per API and per purgatory, each configuration's
p50/p99/p99.9 with the spread over seeds, the first configuration the baseline), printed too,
and ``OUT/grid.json`` (each cell: digest, virtual and wall seconds, answered, error, the
seconds its write took (a Spark job from the cell's driver thread), and
where it ran: the Python worker's interpreter, its ``PYTHONHASHSEED`` and working directory,
which on a standalone cluster is the executor's own ``work/<app>/<executor>``).

Task slots: as many driver threads as the master has task slots. A cluster's executors
register a few seconds after the session starts, and until then Spark's default parallelism
is its floor of 2; so against a non-local master the grid first waits (at most
``EXECUTOR_WAIT_S``) until the executor count has stopped changing.

Service times: fitted from the capture itself unless ``--service-times`` names a table or
another capture; the model is fitted once, on the driver, and shipped with the cells.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from broker import real_clock
from spark_jobs.replay_result import VIRTUAL_TIME
from spark_jobs.run_info import ReplayRun
from whatif.grid_cells import Cell, CellOutcome, cell_dir, run_cell
from whatif.grid_compare import comparison_rows, format_table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["cell_dir", "run_grid", "write_cell"]

EXECUTOR_WAIT_S = 30.0
EXECUTOR_SETTLE_S = 3.0


def executor_env() -> dict[str, str]:
    """Where a task runs: its Python, hash seed (a digest repeats only under one) and cwd."""
    return {
        "python": sys.executable,
        "PYTHONHASHSEED": os.environ.get("PYTHONHASHSEED", "unset"),
        "cwd": os.getcwd(),
    }


def _run_cell_in_task(cell: Cell) -> tuple[CellOutcome, dict[str, str]]:
    return run_cell(cell), executor_env()


@dataclass
class CellRun:
    """A cell as the driver saw it: the outcome, where its task ran, the write's seconds."""

    outcome: CellOutcome
    executor: dict[str, str] = field(default_factory=dict)
    write_s: float = 0.0


def _run_on_spark(spark: SparkSession, cell: Cell) -> CellRun:
    sc = spark.sparkContext
    sc.setJobDescription(f"whatif cell {cell.index}: {cell.label}, seed {cell.seed}")
    try:
        ((outcome, where),) = sc.parallelize([cell], 1).map(_run_cell_in_task).collect()
    except Exception as exc:  # the task itself died (worker crash, lost executor)
        error = f"Spark task failed: {str(exc).splitlines()[0][:300]}"
        return CellRun(CellOutcome(cell, error=error))
    assert isinstance(outcome, CellOutcome)
    return CellRun(outcome, where)


def _run_and_write(spark: SparkSession, cell: Cell, out: Path, master: str) -> CellRun:
    """One cell, then its rows written from the same driver thread.

    Writing is a Spark job of its own (about as long as a short cell); from the cell's thread
    the writes of several cells overlap each other and the cells still running, where one
    writer thread would make them the grid's bottleneck.
    """
    run = _run_on_spark(spark, cell)
    if run.outcome.error is None:
        began = real_clock.monotonic_s()
        try:
            write_cell(spark, out, run.outcome, master)
        except Exception as exc:
            detail = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
            run.outcome.error = f"writing the results failed: {detail}"
        run.write_s = real_clock.monotonic_s() - began
    return run


def _executors(spark: SparkSession) -> int:
    """Executors registered with the driver (Spark's count includes the driver itself)."""
    status = spark.sparkContext._jsc.sc().getExecutorMemoryStatus()
    return max(0, int(status.size()) - 1)


def task_slots(spark: SparkSession) -> int:
    """Spark's default parallelism, once a cluster's executors have registered."""
    sc = spark.sparkContext
    if not str(sc.master).startswith("local"):
        deadline = real_clock.monotonic_s() + EXECUTOR_WAIT_S
        count, since = _executors(spark), real_clock.monotonic_s()
        while real_clock.monotonic_s() < deadline:
            time.sleep(0.25)
            now = _executors(spark)
            if now != count:
                count, since = now, real_clock.monotonic_s()
            elif count > 0 and real_clock.monotonic_s() - since >= EXECUTOR_SETTLE_S:
                break
    return max(1, sc.defaultParallelism)


def write_cell(spark: SparkSession, out: Path, outcome: CellOutcome, master: str) -> Path:
    """The cell's rows as a real-time replay writes them (Parquet + ``_replay.json``)."""
    from spark_jobs.schema import RESULT_SCHEMA

    where = cell_dir(out, outcome.cell)
    where.parent.mkdir(parents=True, exist_ok=True)
    # append: the cell's task emptied the directory and left its target capture there.
    spark.createDataFrame(outcome.results, RESULT_SCHEMA).write.mode("append").parquet(str(where))
    errors: dict[str, int] = {}
    for r in outcome.results:
        if r.replay_error is not None:
            kind = r.replay_error.split(":")[0]
            errors[kind] = errors.get(kind, 0) + 1
    ReplayRun(
        label=outcome.cell.label,
        run_kind=VIRTUAL_TIME,
        elapsed_s=round(outcome.wall_s, 3),
        capture=str(Path(outcome.cell.capture).resolve()),
        master=master,
        tasks=1,
        requests=len(outcome.results),
        client_requests=outcome.client_requests,
        errors=errors,
        connections=len({(r.broker_id, r.connection_id) for r in outcome.results}),
        target_bootstrap="simulated",
        target_brokers=outcome.brokers,
        target_started=True,
        target_capture=outcome.cell.target_capture,
        target_overrides=[f"{k}={v}" for k, v in outcome.cell.overrides.items()],
        target_config=dict(outcome.cell.overrides),
        warnings=[f"seed {outcome.cell.seed}; virtual time {outcome.virtual_s:.1f} s"],
    ).write(where)
    return where


def _progress(outcome: CellOutcome, done: int, total: int, out: TextIO) -> None:
    cell = outcome.cell
    head = f"cell {done}/{total} [{cell.label}, seed {cell.seed}]"
    if outcome.error is not None:
        print(f"{head} FAILED: {outcome.error}", file=out, flush=True)
        return
    print(
        f"{head} {outcome.answered}/{outcome.client_requests} client requests answered, "
        f"{outcome.virtual_s:.1f} s virtual in {outcome.wall_s:.1f} s wall, "
        f"digest {outcome.digest}",
        file=out,
        flush=True,
    )


def run_grid(
    spark: SparkSession, cells: Sequence[Cell], out: Path, stream: TextIO = sys.stdout
) -> list[CellOutcome]:
    """Run every cell (as many at once as there are task slots); write, compare, summarise."""
    out.mkdir(parents=True, exist_ok=True)
    master = str(spark.sparkContext.master)
    began = real_clock.monotonic_s()
    slots = task_slots(spark)
    print(f"{len(cells)} cells on {master} ({slots} task slots)", file=stream, flush=True)
    runs: list[CellRun] = []
    with ThreadPoolExecutor(max_workers=min(slots, len(cells)) or 1) as pool:
        futures = [pool.submit(_run_and_write, spark, cell, out, master) for cell in cells]
        for future in as_completed(futures):
            runs.append(future.result())
            _progress(runs[-1].outcome, len(runs), len(cells), stream)
    runs.sort(key=lambda r: r.outcome.cell.index)
    outcomes = [r.outcome for r in runs]
    table = format_table(comparison_rows(outcomes))
    (out / "comparison.md").write_text(comparison_page(cells, outcomes, table), encoding="utf-8")
    _write_summary(out, runs, real_clock.monotonic_s() - began)
    failed = sum(1 for o in outcomes if o.error is not None)
    print(table, file=stream)
    print(
        f"{len(cells) - failed}/{len(cells)} cells done in "
        f"{real_clock.monotonic_s() - began:.1f} s; results in {out}",
        file=stream,
        flush=True,
    )
    return outcomes


def comparison_page(cells: Sequence[Cell], outcomes: Sequence[CellOutcome], table: str) -> str:
    """``comparison.md``: what was run and how to read the spreads, then the table."""
    configs = {c.config: c.label for c in cells}
    seeds = sorted({c.seed for c in cells})
    failed = [f"{o.cell.label} seed {o.cell.seed}" for o in outcomes if o.error is not None]
    lines = [
        f"# What-if grid over {cells[0].capture if cells else '-'}",
        "",
        *(
            f"- config {n}{' (baseline)' if n == 0 else ''}: {label}"
            for n, label in sorted(configs.items())
        ),
        f"- seeds: {', '.join(map(str, seeds))} ({len(seeds)} per config); "
        f"failed cells: {', '.join(failed) or 'none'}",
        "",
        "Client response times in virtual ms. Each figure is min-max over the seeds of that "
        "seed's percentile (one figure when the ends round alike); `vs baseline` compares the "
        "median seeds' p99, `*` when the seeds' spreads do not overlap.",
        "",
        table,
        "",
    ]
    return "\n".join(lines)


def _write_summary(out: Path, runs: Sequence[CellRun], wall_s: float) -> None:
    cells = [
        {
            "config": o.cell.label,
            "seed": o.cell.seed,
            "dir": str(cell_dir(out, o.cell)) if o.error is None else None,
            "digest": o.digest,
            "virtual_s": round(o.virtual_s, 3),
            "wall_s": round(o.wall_s, 3),
            "client_requests": o.client_requests,
            "answered": o.answered,
            "error": o.error,
            "write_s": round(run.write_s, 3),
            "executor": run.executor,
        }
        for run in runs
        for o in (run.outcome,)
    ]
    document = {"wall_s": round(wall_s, 3), "cells": cells}
    (out / "grid.json").write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
