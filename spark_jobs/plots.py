"""The report's figures (matplotlib, PNG) and the small aggregates they are drawn from.

Drawn to read well at any n: a distribution of at most ``EXACT_POINTS`` requests is
drawn as its points (each request one marker on the empirical CDF), a larger one as its
percentile curve; latency over time is markers per time bucket, never a line joining
two far-apart buckets. One colour per side (or per what-if variant) in every figure,
log-scale axes with few ticks, labels that do not overlap. The aggregates come back to
the driver small: a percentile grid per (API, side), the values themselves only where
there are at most ``EXACT_POINTS``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from spark_jobs.fidelity import BREAKDOWN

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from pyspark.sql import DataFrame

__all__ = [
    "EXACT_POINTS",
    "distributions",
    "over_time",
    "plot_breakdown",
    "plot_distributions",
    "plot_over_time",
    "side_colors",
]

EXACT_POINTS: Final = 200
_GRID: Final = (*(i / 100 for i in range(100)), 0.995, 0.999, 1.0)
_ACCURACY: Final = 10_000
_COMPONENT_LABELS: Final = {
    "request_queue_ms": "request queue",
    "local_ms": "local",
    "remote_ms": "remote (parked)",
    "response_queue_ms": "response queue",
    "send_ms": "send",
}
_COMPONENT_COLORS: Final = ("#9ecae1", "#3182bd", "#e6550d", "#fdae6b", "#31a354")


def side_colors(sides: Sequence[str]) -> dict[str, str]:
    """One colour per side, in the order given (the same in every figure)."""
    palette = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf")
    return {side: palette[i % len(palette)] for i, side in enumerate(sides)}


# -- aggregates ---------------------------------------------------------------------


def distributions(frame: DataFrame, apis: Sequence[str]) -> list[dict[str, Any]]:
    """Per (API, side) of ``frame`` (side columns): ``count``, and ``values`` (sorted,
    exact) when count <= EXACT_POINTS, else ``grid`` (latency at ``_GRID`` fractions)."""
    from pyspark.sql import functions as F

    subset = frame.where(F.col("api_name").isin(*apis) & F.col("latency_ms").isNotNull())
    agg = subset.groupBy("api_name", "side").agg(
        F.count("latency_ms").alias("count"),
        F.percentile_approx("latency_ms", list(_GRID), _ACCURACY).alias("grid"),
    )
    rows = [r.asDict() for r in agg.collect()]
    small = [(r["api_name"], r["side"]) for r in rows if r["count"] <= EXACT_POINTS]
    values: dict[tuple[str, str], list[float]] = {}
    if small:
        keys = frame.sparkSession.createDataFrame(small, "api_name string, side string")
        for found in (
            subset.join(keys, ["api_name", "side"])
            .groupBy("api_name", "side")
            .agg(F.sort_array(F.collect_list("latency_ms")).alias("values"))
            .collect()
        ):
            values[(found["api_name"], found["side"])] = list(found["values"])
    for r in rows:
        exact = values.get((r["api_name"], r["side"]))
        if exact is not None:
            r["values"] = exact
            r["grid"] = None
    return rows


def over_time(frame: DataFrame, apis: Sequence[str], bucket_s: float) -> list[dict[str, Any]]:
    """Per (API, side, time bucket): count, p50, p99 of latency."""
    from pyspark.sql import functions as F

    bucket = (F.floor(F.col("t_s") / bucket_s) * bucket_s).alias("t_s")
    agg = (
        frame.where(F.col("t_s").isNotNull() & F.col("api_name").isin(*apis))
        .groupBy("api_name", "side", bucket)
        .agg(
            F.count("latency_ms").alias("count"),
            F.percentile_approx("latency_ms", [0.5, 0.99], _ACCURACY).alias("_q"),
        )
    )
    return sorted(
        (
            {
                "api_name": r["api_name"],
                "side": r["side"],
                "t_s": float(r["t_s"]),
                "count": r["count"],
                "p50": r["_q"][0],
                "p99": r["_q"][1],
            }
            for r in agg.collect()
            if r["_q"]
        ),
        key=lambda r: (r["api_name"], r["side"], r["t_s"]),
    )


# -- figures ------------------------------------------------------------------------


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _grid(n: int, cols: int = 3) -> tuple[int, int]:
    n = max(1, n)
    cols = min(cols, n)
    return math.ceil(n / cols), cols


def _log_x(ax: Axes) -> None:
    from matplotlib.ticker import LogLocator, NullFormatter

    ax.set_xscale("log")
    ax.xaxis.set_major_locator(LogLocator(base=10, numticks=6))
    ax.xaxis.set_minor_formatter(NullFormatter())


def plot_distributions(
    path: Path,
    rows: list[dict[str, Any]],
    apis: Sequence[str],
    sides: Sequence[str],
    title: str,
    xlabel: str = "latency (ms, log scale)",
) -> Path:
    """Empirical CDF per API, every side overlaid (points for small n, see module doc)."""
    plt = _pyplot()
    colors = side_colors(sides)
    nrows, ncols = _grid(len(apis))
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(5.2 * ncols, 3.8 * nrows), squeeze=False, layout="constrained"
    )
    for ax, api in zip(axes.flat, apis, strict=False):
        for side in sides:
            row = next((r for r in rows if r["api_name"] == api and r["side"] == side), None)
            if row is None or not row["count"]:
                continue
            label = f"{side} (n={row['count']})"
            if row.get("values") is not None:
                xs = [max(v, 1e-3) for v in row["values"]]
                ys = [(i + 1) / len(xs) for i in range(len(xs))]
                ax.scatter(xs, ys, s=14, color=colors[side], label=label, alpha=0.8, zorder=3)
            else:
                xs = [max(v, 1e-3) for v in row["grid"]]
                ax.plot(xs, _GRID, color=colors[side], label=label, lw=1.6)
        _log_x(ax)
        ax.set_title(api)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("fraction of requests")
        ax.set_ylim(0, 1.02)
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize="small", loc="lower right")
    for ax in list(axes.flat)[len(apis) :]:
        ax.set_visible(False)
    fig.suptitle(title)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def plot_breakdown(
    path: Path, stats: list[dict[str, Any]], apis: Sequence[str], sides: Sequence[str]
) -> Path:
    """Kafka's breakdown as stacked bars: one panel per API on its own scale (a JoinGroup
    parked for seconds would flatten every other API on a shared one), one bar per side,
    each part its mean (means add up to the mean total; medians would not)."""
    plt = _pyplot()
    shown = [
        api
        for api in apis
        if any(
            r["key"] == api and r.get(f"mean_{BREAKDOWN[0]}") is not None
            for r in stats
            if r["side"] in sides
        )
    ]
    nrows, ncols = _grid(max(1, len(shown)))
    bar_h = max(1.6, 0.45 * len(sides) + 1.1)
    fig, axes = plt.subplots(
        nrows,
        ncols,
        figsize=(5.2 * ncols, bar_h * nrows + 0.8),
        squeeze=False,
        layout="constrained",
    )
    for ax, api in zip(axes.flat, shown, strict=False):
        rows = [
            (side, next((r for r in stats if r["key"] == api and r["side"] == side), None))
            for side in sides
        ]
        present = [(side, row) for side, row in rows if row is not None]
        positions = list(range(len(present)))[::-1]
        left = [0.0] * len(present)
        for component, color in zip(BREAKDOWN, _COMPONENT_COLORS, strict=True):
            widths = [float(row.get(f"mean_{component}") or 0.0) for _, row in present]
            ax.barh(
                positions,
                widths,
                left=left,
                color=color,
                height=0.65,
                label=_COMPONENT_LABELS[component],
            )
            left = [a + b for a, b in zip(left, widths, strict=True)]
        ax.set_yticks(
            positions, [f"{side} (n={row['count']})" for side, row in present], fontsize="small"
        )
        ax.set_title(api)
        ax.set_xlabel("mean ms per request")
        ax.set_xlim(0, max([*left, 0.001]) * 1.08)
        ax.grid(True, axis="x", alpha=0.3)
    for ax in list(axes.flat)[len(shown) :]:
        ax.set_visible(False)
    if not shown:
        axes.flat[0].set_visible(True)
        axes.flat[0].text(0.5, 0.5, "no breakdown to show", ha="center")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in _COMPONENT_COLORS]
    fig.legend(
        handles,
        [_COMPONENT_LABELS[c] for c in BREAKDOWN],
        loc="outside lower center",
        ncols=len(BREAKDOWN),
        fontsize="small",
    )
    fig.suptitle("Where the time went: Kafka's breakdown per API (mean ms, each on its own scale)")
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def plot_over_time(
    path: Path, rows: list[dict[str, Any]], apis: Sequence[str], sides: Sequence[str]
) -> Path:
    """p50 (dots) and p99 (crosses) per time bucket, per API, every side overlaid."""
    plt = _pyplot()
    colors = side_colors(sides)
    nrows, ncols = _grid(len(apis))
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(5.2 * ncols, 3.6 * nrows), squeeze=False, layout="constrained"
    )
    for ax, api in zip(axes.flat, apis, strict=False):
        for side in sides:
            series = [r for r in rows if r["api_name"] == api and r["side"] == side]
            if not series:
                continue
            ts = [r["t_s"] for r in series]
            ax.scatter(
                ts, [max(r["p50"], 1e-3) for r in series], s=12, color=colors[side], label=side
            )
            ax.scatter(
                ts, [max(r["p99"], 1e-3) for r in series], s=14, color=colors[side], marker="x"
            )
        ax.set_yscale("log")
        ax.set_title(api)
        ax.set_xlabel("time since the first request (s)")
        ax.set_ylabel("latency (ms)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
    for ax in list(axes.flat)[len(apis) :]:
        ax.set_visible(False)
    fig.suptitle("Latency over time: p50 (dots) and p99 (crosses) per bucket")
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
