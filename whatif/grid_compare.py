"""The grid's comparison: each configuration's p50/p99/p99.9 per API and per purgatory,
with the spread across seeds (min-max), the first configuration as the baseline.

What is measured is a client request's response time in the virtual replay (send to answer,
virtual ms: ``response_ms``), as ``minikafka compare`` falls back to when a variant has no
target capture. Per purgatory: the requests that the *capture* shows parked in that
purgatory (the result row's ``purgatory`` column). A percentile is the nearest rank. The
"vs baseline" column is the ratio of the middle of the spreads (a configuration's median
seed) at p99; a ratio more than 10% from 1 whose spread does not overlap the baseline's is
marked ``*``: a difference the seeds do not explain. A spread is shown as one figure when its
ends round alike. When every cell of the baseline configuration failed (or it has no request
of a group), the other configurations' rows say so instead of taking its place.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from spark_jobs.replay_result import ReplayResult
from whatif.grid_cells import CellOutcome

__all__ = ["GroupRow", "comparison_rows", "format_table", "percentile"]

QUANTILES = (0.5, 0.99, 0.999)


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of an ascending, non-empty sequence."""
    rank = max(1, math.ceil(q * len(sorted_values)))
    return sorted_values[rank - 1]


@dataclass(frozen=True)
class GroupRow:
    """One (kind, group, configuration) row: per quantile, (min, median, max) over seeds."""

    kind: str  # "api" or "purgatory"
    group: str
    config: int  # the cell's configuration index: 0 is the baseline
    label: str
    seeds: int
    requests: int
    spreads: tuple[tuple[float, float, float], ...]


def _groups(results: Iterable[ReplayResult]) -> dict[tuple[str, str], list[float]]:
    out: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in results:
        if r.traffic != "client" or r.replay_skip is not None or r.response_ms is None:
            continue
        out[("api", r.api_name)].append(r.response_ms)
        if r.purgatory is not None:
            out[("purgatory", r.purgatory)].append(r.response_ms)
    return out


def comparison_rows(outcomes: Sequence[CellOutcome]) -> list[GroupRow]:
    """Rows for every (kind, group) and configuration, configurations in grid order."""
    per: dict[tuple[str, str], dict[int, list[list[float]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    labels: dict[int, str] = {}
    counts: dict[tuple[tuple[str, str], int], int] = defaultdict(int)
    for outcome in outcomes:
        if outcome.error is not None:
            continue
        cell = outcome.cell
        labels[cell.config] = cell.label
        for key, values in _groups(outcome.results).items():
            values.sort()
            per[key][cell.config].append([percentile(values, q) for q in QUANTILES])
            counts[(key, cell.config)] += len(values)
    rows: list[GroupRow] = []
    for key in sorted(per):
        for config in sorted(per[key]):
            seeds = per[key][config]
            spreads = tuple(_spread([s[i] for s in seeds]) for i in range(len(QUANTILES)))
            n = counts[(key, config)]
            row = GroupRow(key[0], key[1], config, labels[config], len(seeds), n, spreads)
            rows.append(row)
    return rows


def _spread(values: list[float]) -> tuple[float, float, float]:
    ordered = sorted(values)
    return ordered[0], ordered[(len(ordered) - 1) // 2], ordered[-1]


def _cell(spread: tuple[float, float, float]) -> str:
    low, high = f"{spread[0]:.1f}", f"{spread[2]:.1f}"
    return low if low == high else f"{low}-{high}"


def _versus(row: GroupRow, base: GroupRow | None) -> str:
    if base is None or base is row:
        return "baseline" if base is row else "- (no baseline)"
    ratio = row.spreads[1][1] / base.spreads[1][1] if base.spreads[1][1] > 0 else math.inf
    apart = row.spreads[1][0] > base.spreads[1][2] or row.spreads[1][2] < base.spreads[1][0]
    mark = "*" if apart and abs(ratio - 1) > 0.1 else ""
    return f"{ratio:.2f}x{mark}"


def format_table(rows: Sequence[GroupRow]) -> str:
    """A Markdown table: one line per (kind, group, configuration), spreads in virtual ms."""
    head = (
        "| kind | group | config | seeds | requests | p50 ms | p99 ms | p99.9 ms "
        "| p99 vs baseline |"
    )
    lines = [head, "|---|---|---|---|---|---|---|---|---|"]
    baseline = {(r.kind, r.group): r for r in rows if r.config == 0}
    for row in rows:
        base = baseline.get((row.kind, row.group))
        cells = " | ".join(_cell(s) for s in row.spreads)
        lines.append(
            f"| {row.kind} | {row.group} | {row.label} | {row.seeds} | {row.requests} | "
            f"{cells} | {_versus(row, base)} |"
        )
    return "\n".join(lines)
