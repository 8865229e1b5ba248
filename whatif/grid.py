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
and ``OUT/grid.json`` (each cell: digest, virtual and wall seconds, answered, error).

Service times: fitted from the capture itself unless ``--service-times`` names a table or
another capture; the model is fitted once, on the driver, and shipped with the cells.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
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


def _run_on_spark(spark: SparkSession, cell: Cell) -> CellOutcome:
    sc = spark.sparkContext
    sc.setJobDescription(f"whatif cell {cell.index}: {cell.label}, seed {cell.seed}")
    try:
        (outcome,) = sc.parallelize([cell], 1).map(run_cell).collect()
    except Exception as exc:  # the task itself died (worker crash, lost executor)
        return CellOutcome(cell, error=f"Spark task failed: {str(exc).splitlines()[0][:300]}")
    assert isinstance(outcome, CellOutcome)
    return outcome


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
        target_brokers=outcome.cell.brokers or 0,
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
    slots = max(1, spark.sparkContext.defaultParallelism)
    began = real_clock.monotonic_s()
    print(f"{len(cells)} cells on {master} ({slots} task slots)", file=stream, flush=True)
    outcomes: list[CellOutcome] = []
    with ThreadPoolExecutor(max_workers=min(slots, len(cells)) or 1) as pool:
        futures = [pool.submit(_run_on_spark, spark, cell) for cell in cells]
        for future in as_completed(futures):
            outcome = future.result()
            outcomes.append(outcome)
            if outcome.error is None:
                write_cell(spark, out, outcome, master)
            _progress(outcome, len(outcomes), len(cells), stream)
    outcomes.sort(key=lambda o: o.cell.index)
    table = format_table(comparison_rows(outcomes))
    (out / "comparison.md").write_text(table + "\n", encoding="utf-8")
    _write_summary(out, outcomes, real_clock.monotonic_s() - began)
    failed = sum(1 for o in outcomes if o.error is not None)
    print(table, file=stream)
    print(
        f"{len(cells) - failed}/{len(cells)} cells done in "
        f"{real_clock.monotonic_s() - began:.1f} s; results in {out}",
        file=stream,
        flush=True,
    )
    return outcomes


def _write_summary(out: Path, outcomes: Sequence[CellOutcome], wall_s: float) -> None:
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
        }
        for o in outcomes
    ]
    document = {"wall_s": round(wall_s, 3), "cells": cells}
    (out / "grid.json").write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
