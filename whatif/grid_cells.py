"""The cells of a what-if grid, and what one Spark task does with one of them.

A grid is the product of ``--grid key=v1,v2`` options (the first value of every key is the
baseline configuration) and the seeds: `expand_grid` makes its cells, `run_cell` runs one
(the function a Spark task calls: it reads the capture itself, so the capture must be at
the same path on every executor, as for the real-time replay), and never raises: a cell that
fails comes back with its error, and the grid goes on without it.
"""

from __future__ import annotations

import itertools
import re
import shutil
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from pydantic import ValidationError

from broker import real_clock
from broker.config.broker_config import BrokerConfig
from protocol.capture_files import captured_cluster_config
from protocol.service_times import ServiceTimeModel
from spark_jobs.replay_result import ReplayResult
from spark_jobs.run_info import TARGET_CAPTURE_DIR
from whatif.virtual_replay import (
    VirtualReplayConfig,
    capture_brokers,
    read_replay_rows,
    replay_virtual,
)

__all__ = [
    "Cell",
    "CellOutcome",
    "check_axes",
    "expand_grid",
    "parse_grid",
    "parse_seeds",
    "run_cell",
]


def parse_grid(options: Sequence[str]) -> list[tuple[str, list[str]]]:
    """``["k=v1,v2", ...]`` as (key, values) in order; ValueError names a bad option."""
    axes: list[tuple[str, list[str]]] = []
    for option in options:
        key, sep, values = option.partition("=")
        choices = [v.strip() for v in values.split(",")]
        if not sep or not key.strip() or not all(choices):
            raise ValueError(f"--grid: expected KEY=V1[,V2...], got {option!r}")
        if any(key.strip() == k for k, _ in axes):
            raise ValueError(f"--grid: {key.strip()} given twice")
        axes.append((key.strip(), choices))
    return axes


def check_axes(axes: Sequence[tuple[str, list[str]]]) -> None:
    """Every value of every axis as a broker config, each alone: ValueError names the first
    one a broker refuses (an unknown name, a bad value), before any cell starts -- a
    misspelled key otherwise fails every cell, one Spark task at a time."""
    for key, values in axes:
        for value in values:
            try:
                BrokerConfig.model_validate({key: value})
            except ValidationError as exc:
                error = exc.errors()[0]
                reason = "not a broker config" if error["type"] == "extra_forbidden" else None
                raise ValueError(f"--grid: {key}={value}: {reason or error['msg']}") from None


def parse_seeds(text: str) -> list[int]:
    """``N`` (seeds 0..N-1) or ``A..B`` (inclusive)."""
    first, sep, last = text.partition("..")
    if sep and first.isdigit() and last.isdigit() and int(first) <= int(last):
        return list(range(int(first), int(last) + 1))
    if not sep and text.isdigit() and int(text) > 0:
        return list(range(int(text)))
    raise ValueError(f"--seeds: expected N > 0 or A..B, got {text!r}")


def config_label(overrides: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in overrides.items()) or "default"


@dataclass(frozen=True)
class Cell:
    """One (configuration, seed) of the grid; ``config`` indexes the configurations."""

    index: int
    config: int
    label: str
    seed: int
    overrides: dict[str, str]
    capture: str
    brokers: int | None
    io_threads: int
    service_times: ServiceTimeModel | None
    #: Where the cell's simulated brokers capture what they serve (``cell_dir``'s
    #: ``_target_capture``): the target side of the comparison, Kafka's TotalTimeMs and
    #: purgatory outcomes, as a real-time replay's target capture gives. None: no capture.
    target_capture: str | None = None
    #: ``VirtualReplayConfig.shared_threads``: every broker on one pool (None: Kafka's).
    shared_threads: int | None = None


def cell_dir(out: Path, cell: Cell) -> Path:
    """Where the cell's results go: ``OUT/config-<n>-<label>/seed-<s>``."""
    slug = re.sub(r"[^A-Za-z0-9.=_-]+", "_", cell.label)[:80]
    return out / f"config-{cell.config}-{slug}" / f"seed-{cell.seed}"


@dataclass
class CellOutcome:
    """What a cell gave: its rows, or why it has none."""

    cell: Cell
    results: list[ReplayResult] = field(default_factory=list)
    digest: str = ""
    virtual_s: float = 0.0
    wall_s: float = 0.0
    error: str | None = None
    #: The simulated target's brokers (the capture's, unless the cell named them).
    brokers: int = 0

    @property
    def client_requests(self) -> int:
        return sum(1 for r in self.results if r.traffic == "client" and r.replay_skip is None)

    @property
    def answered(self) -> int:
        return sum(
            1
            for r in self.results
            if r.traffic == "client" and r.replay_skip is None and r.replay_error is None
        )


def expand_grid(
    axes: list[tuple[str, list[str]]],
    seeds: list[int],
    capture: str,
    brokers: int | None,
    io_threads: int,
    service_times: ServiceTimeModel | None,
    out: Path | None = None,
    shared_threads: int | None = None,
) -> list[Cell]:
    """Every configuration (the product of the axes, first values first) x every seed;
    with ``out``, each cell's brokers capture into its results directory."""
    keys = [k for k, _ in axes]
    configs = [
        dict(zip(keys, values, strict=True)) for values in itertools.product(*(v for _, v in axes))
    ]
    cells: list[Cell] = []
    for number, overrides in enumerate(configs or [{}]):
        for seed in seeds:
            cells.append(
                Cell(
                    len(cells),
                    number,
                    config_label(overrides),
                    seed,
                    overrides,
                    capture,
                    brokers,
                    io_threads,
                    service_times,
                    shared_threads=shared_threads,
                )
            )
    if out is None:
        return cells
    return [
        replace(cell, target_capture=str(cell_dir(out, cell) / TARGET_CAPTURE_DIR))
        for cell in cells
    ]


def run_cell(cell: Cell) -> CellOutcome:
    """Replay the capture in virtual time under ``cell``; an error is returned, not raised."""
    started = real_clock.monotonic_s()
    try:
        rows = read_replay_rows(cell.capture)
        target_capture = _fresh_target_capture(cell)
        config = VirtualReplayConfig(
            brokers=cell.brokers or capture_brokers(rows),
            seed=cell.seed,
            overrides=cell.overrides,
            service_times=cell.service_times,
            io_threads=cell.io_threads,
            captured_configs=captured_cluster_config(cell.capture),
            target_capture=target_capture,
            shared_threads=cell.shared_threads,
        )
        run = replay_virtual(rows, config)
    except Exception as exc:
        detail = traceback.format_exception_only(exc)[-1].strip()
        return CellOutcome(cell, error=detail[:500], wall_s=real_clock.monotonic_s() - started)
    wall_s = real_clock.monotonic_s() - started
    return CellOutcome(cell, run.results, run.digest, run.virtual_s, wall_s, brokers=config.brokers)


def _fresh_target_capture(cell: Cell) -> Path | None:
    """The cell's capture directory, emptied with the results of an earlier run of the cell
    (the driver appends this run's results beside it)."""
    if cell.target_capture is None:
        return None
    target = Path(cell.target_capture)
    shutil.rmtree(target.parent, ignore_errors=True)
    target.mkdir(parents=True)
    return target
