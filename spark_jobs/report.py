"""The latency report: percentiles per API and per purgatory, captured beside replayed.

Entry point of ``minikafka report`` and of ``spark-submit spark_jobs/report.py``::

    report --results DIR [--capture DIR] [--request-log PATH ...] --out DIR [--master URL]

Inputs, any combination, at least one:

* ``--results``: the replay job's Parquet (``spark_jobs.schema.RESULT_SCHEMA``). Each
  row gives two latencies of one request: as captured (``captured_total_ms``, source
  "captured") and as replayed (``response_ms``, source "replayed").
* ``--capture``: a capture directory (source "capture"), requests and delayed-operation
  events.
* ``--request-log``: Kafka's own request log (source "request_log").

Everything is computed with DataFrame aggregations; only the aggregates (a few hundred
rows) come back to the driver, to be written as CSV and JSON, drawn with matplotlib and
put on one ``index.html``. Percentiles are Spark's ``percentile_approx`` (a rank error
of at most 1/10000 of the count, exact values from the data).

Written under ``--out``: ``tables/{latency_by_api,latency_by_purgatory,schedule_lag,
delayed_operations,summary}.{csv,json}``, ``plots/latency_cdf.png``,
``plots/latency_over_time.png`` and ``index.html``.
"""

from __future__ import annotations

import argparse
import csv
import html
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = [
    "QUANTILES",
    "ReportOutput",
    "delayed_operations_summary",
    "latency_by_api",
    "latency_by_purgatory",
    "latency_frame",
    "main",
    "parse_args",
    "run_report",
    "schedule_lag",
]

#: p50, p90, p99, p99.9 (max is taken exactly with ``max``).
QUANTILES: Final = (0.5, 0.9, 0.99, 0.999)
_Q_NAMES: Final = ("p50", "p90", "p99", "p999")
_ACCURACY: Final = 10_000
_CDF_GRID: Final = (*(i / 100 for i in range(100)), 0.995, 0.999, 1.0)
_MAX_API_PANELS: Final = 12


# -- the frames ---------------------------------------------------------------------


def latency_frame(results: DataFrame | None = None, analysis: DataFrame | None = None) -> DataFrame:
    """One row per (source, request): ``source, api_name, purgatory, purgatory_outcome,
    latency_ms, t_s`` with ``t_s`` seconds from the start of that source's traffic.

    For the replay results, captured latency is plotted at the planned send time (the
    captured spacing) and replayed latency at the actual send time.
    """
    from pyspark.sql import functions as F

    frames: list[DataFrame] = []
    if results is not None:
        frames.append(
            results.select(
                F.lit("captured").alias("source"),
                "api_name",
                "purgatory",
                "purgatory_outcome",
                F.col("captured_total_ms").alias("latency_ms"),
                (F.col("planned_send_ms") / 1000.0).alias("t_s"),
            )
        )
        frames.append(
            results.where(F.col("response_ms").isNotNull() & F.col("replay_error").isNull()).select(
                F.lit("replayed").alias("source"),
                "api_name",
                "purgatory",
                # The replay measures latency only; whether it expired is not known.
                F.lit(None).cast("string").alias("purgatory_outcome"),
                F.col("response_ms").alias("latency_ms"),
                (F.col("actual_send_ms") / 1000.0).alias("t_s"),
            )
        )
    if analysis is not None:
        start = analysis.groupBy("source").agg(F.min("received_unix_us").alias("_start_us"))
        frames.append(
            analysis.join(start, "source").select(
                "source",
                "api_name",
                "purgatory",
                "purgatory_outcome",
                F.col("total_time_ms").alias("latency_ms"),
                ((F.col("received_unix_us") - F.col("_start_us")) / 1e6).alias("t_s"),
            )
        )
    if not frames:
        raise ValueError("latency_frame needs results or analysis")
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame)
    return out


def _percentile_columns(value: str) -> list[Column]:
    from pyspark.sql import functions as F

    return [
        F.count(value).alias("count"),
        F.percentile_approx(value, list(QUANTILES), _ACCURACY).alias("_q"),
        F.max(value).alias("max"),
        F.avg(value).alias("mean"),
    ]


def _spread_quantiles(df: DataFrame, keys: Sequence[str]) -> DataFrame:
    from pyspark.sql import functions as F

    quantiles = [F.col("_q")[i].alias(name) for i, name in enumerate(_Q_NAMES)]
    rest = [c for c in df.columns if c not in (*keys, "_q", "count", "max", "mean")]
    return df.select(*keys, "count", *quantiles, "max", "mean", *rest)


def latency_by_api(latency: DataFrame) -> DataFrame:
    """count, p50, p90, p99, p999, max, mean of latency per (api_name, source)."""
    agg = latency.groupBy("api_name", "source").agg(*_percentile_columns("latency_ms"))
    return _spread_quantiles(agg, ["api_name", "source"])


def latency_by_purgatory(latency: DataFrame) -> DataFrame:
    """Per (purgatory, source): the delayed operation kind, latency percentiles, and the
    expiry rate (expired / requests whose outcome is known)."""
    from pyspark.sql import functions as F

    from spark_jobs.schema import PURGATORY_KIND

    kind = F.create_map(*[F.lit(x) for pair in PURGATORY_KIND.items() for x in pair])
    agg = (
        latency.where(F.col("purgatory").isNotNull())
        .groupBy("purgatory", "source")
        .agg(
            *_percentile_columns("latency_ms"),
            F.count("purgatory_outcome").alias("with_outcome"),
            F.sum(F.when(F.col("purgatory_outcome") == "expired", 1).otherwise(0)).alias("expired"),
        )
        .withColumn("kind", kind[F.col("purgatory")])
        .withColumn(
            "expiry_rate",
            F.when(F.col("with_outcome") > 0, F.col("expired") / F.col("with_outcome")),
        )
    )
    return _spread_quantiles(agg, ["purgatory", "kind", "source"])


def schedule_lag(results: DataFrame) -> DataFrame:
    """How late the replay sent each request (actual - planned send, ms): p50, p99, max
    over all requests ("ALL") and per API."""
    from pyspark.sql import functions as F

    lag = results.where(F.col("actual_send_ms").isNotNull()).select(
        "api_name", (F.col("actual_send_ms") - F.col("planned_send_ms")).alias("lag_ms")
    )

    def aggs() -> list[Column]:
        return [
            F.count("lag_ms").alias("count"),
            F.percentile_approx("lag_ms", [0.5, 0.99], _ACCURACY).alias("_q"),
            F.max("lag_ms").alias("max"),
        ]

    overall = lag.agg(*aggs()).select(F.lit("ALL").alias("scope"), "*")
    per_api = lag.groupBy(F.col("api_name").alias("scope")).agg(*aggs())
    both = overall.unionByName(per_api)
    return both.select(
        "scope",
        "count",
        F.col("_q")[0].alias("p50"),
        F.col("_q")[1].alias("p99"),
        "max",
    )


def delayed_operations_summary(events: DataFrame) -> DataFrame:
    """Per delayed operation kind: created, completed, expired, expiry rate and the time
    operations spent in their purgatory (creation to completion or expiry, ms)."""
    from pyspark.sql import functions as F

    ops = events.groupBy("broker_id", "operation_id", "kind", "purgatory").agg(
        F.min(F.when(F.col("event") == "created", F.col("at_monotonic_us"))).alias("created_us"),
        F.max(F.when(F.col("event") != "created", F.col("at_monotonic_us"))).alias("ended_us"),
        F.max(F.when(F.col("event") == "created", 1).otherwise(0)).alias("created"),
        F.max(F.when(F.col("event") == "completed", 1).otherwise(0)).alias("completed"),
        F.max(F.when(F.col("event") == "expired", 1).otherwise(0)).alias("expired"),
    )
    waited = (F.col("ended_us") - F.col("created_us")) / 1000.0
    agg = ops.groupBy("kind", "purgatory").agg(
        F.sum("created").alias("created"),
        F.sum("completed").alias("completed"),
        F.sum("expired").alias("expired"),
        F.percentile_approx(waited, [0.5, 0.99], _ACCURACY).alias("_q"),
        F.max(waited).alias("max_wait_ms"),
    )
    ended = F.col("completed") + F.col("expired")
    return agg.select(
        "kind",
        "purgatory",
        "created",
        "completed",
        "expired",
        F.when(ended > 0, F.col("expired") / ended).alias("expiry_rate"),
        F.col("_q")[0].alias("p50_wait_ms"),
        F.col("_q")[1].alias("p99_wait_ms"),
        "max_wait_ms",
    )


def _cdf_points(latency: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    return latency.groupBy("api_name", "source").agg(
        F.percentile_approx("latency_ms", list(_CDF_GRID), _ACCURACY).alias("points"),
        F.count("latency_ms").alias("count"),
    )


def _over_time(latency: DataFrame, bucket_s: float) -> DataFrame:
    from pyspark.sql import functions as F

    bucket = (F.floor(F.col("t_s") / bucket_s) * bucket_s).alias("t_s")
    return (
        latency.where(F.col("t_s").isNotNull())
        .groupBy("api_name", "source", bucket)
        .agg(F.percentile_approx("latency_ms", [0.5, 0.99], _ACCURACY).alias("_q"))
        .select(
            "api_name", "source", "t_s", F.col("_q")[0].alias("p50"), F.col("_q")[1].alias("p99")
        )
    )


# -- writing ------------------------------------------------------------------------


def _clean(value: Any) -> Any:
    if isinstance(value, float):
        return None if math.isnan(value) else round(value, 6)
    return value


def _sort_key(value: Any) -> tuple[bool, Any]:
    return (value is None, value if value is not None else 0)


def _rows(df: DataFrame, sort_by: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Collect a (small, aggregated) frame; sorted here rather than by a Spark job."""
    rows = [{k: _clean(v) for k, v in row.asDict().items()} for row in df.collect()]
    rows.sort(key=lambda r: tuple(_sort_key(r[k]) for k in sort_by))
    return rows


def _write_table(out: Path, name: str, rows: list[dict[str, Any]], columns: list[str]) -> None:
    tables = out / "tables"
    tables.mkdir(parents=True, exist_ok=True)
    with open(tables / f"{name}.csv", "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    (tables / f"{name}.json").write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")


def _panel_grid(n: int) -> tuple[int, int]:
    cols = min(3, max(1, n))
    return math.ceil(n / cols), cols


def _source_colors(rows: list[dict[str, Any]]) -> dict[str, str]:
    """One colour per source, the same in every panel and plot."""
    return {source: f"C{i}" for i, source in enumerate(sorted({r["source"] for r in rows}))}


def _plot_cdf(path: Path, cdf_rows: list[dict[str, Any]], apis: list[str]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = _source_colors(cdf_rows)
    nrows, ncols = _panel_grid(len(apis))
    fig, axes = plt.subplots(nrows, ncols, figsize=(5 * ncols, 3.6 * nrows), squeeze=False)
    for ax, api in zip(axes.flat, apis, strict=False):
        for row in sorted((r for r in cdf_rows if r["api_name"] == api), key=lambda r: r["source"]):
            xs = [max(x, 1e-3) for x in row["points"]]
            label = f"{row['source']} (n={row['count']})"
            ax.plot(xs, _CDF_GRID, color=colors[row["source"]], label=label)
        ax.set_xscale("log")
        ax.set_title(api)
        ax.set_xlabel("completion latency (ms)")
        ax.set_ylabel("fraction of requests")
        ax.set_ylim(0, 1.0)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="small")
    for ax in list(axes.flat)[len(apis) :]:
        ax.set_visible(False)
    fig.suptitle("Latency CDF per API")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _plot_over_time(path: Path, rows: list[dict[str, Any]], apis: list[str]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = _source_colors(rows)
    nrows, ncols = _panel_grid(len(apis))
    fig, axes = plt.subplots(nrows, ncols, figsize=(5 * ncols, 3.6 * nrows), squeeze=False)
    for ax, api in zip(axes.flat, apis, strict=False):
        sources = sorted({r["source"] for r in rows if r["api_name"] == api})
        for source in sources:
            series = [r for r in rows if r["api_name"] == api and r["source"] == source]
            color = colors[source]
            ts = [r["t_s"] for r in series]
            # Markers too: a source with one time bucket is a point, not a line.
            ax.plot(ts, [r["p50"] for r in series], color=color, marker=".", label=f"{source} p50")
            ax.plot(
                ts,
                [r["p99"] for r in series],
                color=color,
                ls="--",
                marker="x",
                ms=4,
                label=f"{source} p99",
            )
        ax.set_title(api)
        ax.set_xlabel("time since start (s)")
        ax.set_ylabel("latency (ms)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
    for ax in list(axes.flat)[len(apis) :]:
        ax.set_visible(False)
    fig.suptitle("Latency over time (p50 solid, p99 dashed)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _html_table(title: str, rows: list[dict[str, Any]], columns: list[str]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)

    def cell(v: Any) -> str:
        if v is None:
            return "<td class=null>-</td>"
        if isinstance(v, float):
            return f"<td class=num>{v:.3f}</td>"
        if isinstance(v, int):
            return f"<td class=num>{v}</td>"
        return f"<td>{html.escape(str(v))}</td>"

    body = "".join("<tr>" + "".join(cell(r.get(c)) for c in columns) + "</tr>" for r in rows)
    if not rows:
        body = f"<tr><td colspan={len(columns)}>no data</td></tr>"
    return f"<h2>{html.escape(title)}</h2>\n<table><tr>{head}</tr>{body}</table>\n"


_CSS: Final = (
    "body{font-family:sans-serif;margin:2em;max-width:1400px}"
    "table{border-collapse:collapse;margin-bottom:1.5em;font-size:90%}"
    "th,td{border:1px solid #ccc;padding:3px 8px}th{background:#eee}"
    "td.num{text-align:right;font-variant-numeric:tabular-nums}td.null{color:#999}"
    "img{max-width:100%;border:1px solid #ddd;margin-bottom:1.5em}"
)


# -- the job --------------------------------------------------------------------------


@dataclass
class ReportOutput:
    """What ``run_report`` wrote, and the tables it wrote (as row dicts)."""

    out_dir: Path
    index_html: Path
    plots: list[Path] = field(default_factory=list)
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


def run_report(
    spark: SparkSession,
    out_dir: str | Path,
    *,
    results: str | Path | None = None,
    capture: str | Path | None = None,
    request_logs: Sequence[str | Path] = (),
    bucket_s: float = 1.0,
) -> ReportOutput:
    """Compute the report from the given inputs into ``out_dir`` (see module doc)."""
    from pyspark.sql import functions as F

    from spark_jobs.captures import read_capture_analysis_df, read_delayed_operations_df
    from spark_jobs.request_log import read_request_log_df
    from spark_jobs.schema import RESULT_SCHEMA

    if results is None and capture is None and not request_logs:
        raise ValueError("nothing to report on: give results, a capture or a request log")
    out = Path(out_dir)
    (out / "plots").mkdir(parents=True, exist_ok=True)

    results_df = spark.read.schema(RESULT_SCHEMA).parquet(str(results)) if results else None
    analysis_parts: list[DataFrame] = []
    events_df = None
    if capture is not None:
        analysis_parts.append(read_capture_analysis_df(spark, capture))
        events_df = read_delayed_operations_df(spark, capture)
    if request_logs:
        analysis_parts.append(read_request_log_df(spark, [str(p) for p in request_logs]))
    analysis_df = None
    for part in analysis_parts:
        analysis_df = part if analysis_df is None else analysis_df.unionByName(part)

    latency = latency_frame(results_df, analysis_df).cache()
    tables: dict[str, list[dict[str, Any]]] = {}
    columns: dict[str, list[str]] = {}

    def keep(name: str, df: DataFrame, sort_by: Sequence[str]) -> None:
        columns[name] = list(df.columns)
        tables[name] = _rows(df, sort_by)

    keep("latency_by_api", latency_by_api(latency), ["api_name", "source"])
    keep("latency_by_purgatory", latency_by_purgatory(latency), ["purgatory", "source"])
    if results_df is not None:
        keep("schedule_lag", schedule_lag(results_df), ["scope"])
        tables["schedule_lag"].sort(key=lambda r: r["scope"] != "ALL")  # "ALL" first
        errors = (
            results_df.where(F.col("replay_error").isNotNull())
            .groupBy("api_name", "replay_error")
            .count()
        )
        keep("replay_errors", errors, ["api_name", "replay_error"])
    if events_df is not None:
        keep("delayed_operations", delayed_operations_summary(events_df), ["kind"])
    keep("summary", latency.groupBy("source").count(), ["source"])

    for name, rows in tables.items():
        _write_table(out, name, rows, columns[name])

    # Busiest APIs first; the plots get one panel each.
    counts: dict[str, int] = {}
    for row in tables["latency_by_api"]:
        counts[row["api_name"]] = counts.get(row["api_name"], 0) + int(row["count"])
    apis = sorted(counts, key=lambda a: (-counts[a], a))[:_MAX_API_PANELS]
    cdf_path = out / "plots" / "latency_cdf.png"
    time_path = out / "plots" / "latency_over_time.png"
    _plot_cdf(cdf_path, _rows(_cdf_points(latency)), apis)
    _plot_over_time(
        time_path, _rows(_over_time(latency, bucket_s), ["api_name", "source", "t_s"]), apis
    )
    latency.unpersist()

    inputs = [f"results: {results}" if results else "", f"capture: {capture}" if capture else ""]
    inputs += [f"request log: {p}" for p in request_logs]
    parts = [
        "<!doctype html><html><head><meta charset=utf-8><title>minikafka latency report"
        f"</title><style>{_CSS}</style></head><body>",
        "<h1>minikafka latency report</h1>",
        "<p>" + "<br>".join(html.escape(i) for i in inputs if i) + "</p>",
        "<p>Latency is completion time in ms: Kafka's TotalTimeMs for captured requests, "
        "send-to-response for replayed ones. Percentiles are approximate to 1/10000 of "
        "the rank.</p>",
        '<h2>Latency CDF per API</h2><img src="plots/latency_cdf.png" alt="latency CDF">',
        '<h2>Latency over time</h2><img src="plots/latency_over_time.png" alt="latency over time">',
    ]
    titles = {
        "summary": "Requests per source",
        "latency_by_api": "Latency per API (ms)",
        "latency_by_purgatory": "Latency and expiry per purgatory (ms)",
        "delayed_operations": "Delayed operations (captured events)",
        "schedule_lag": "Replay schedule lag: actual - planned send (ms)",
        "replay_errors": "Replay errors",
    }
    for name, title in titles.items():
        if name in tables:
            parts.append(_html_table(title, tables[name], columns[name]))
    parts.append("</body></html>\n")
    index = out / "index.html"
    index.write_text("\n".join(parts), encoding="utf-8")
    return ReportOutput(out_dir=out, index_html=index, plots=[cdf_path, time_path], tables=tables)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="minikafka report",
        description="Latency report from replay results, captures and/or Kafka request logs.",
    )
    parser.add_argument("--results", help="replay results directory (Parquet)")
    parser.add_argument("--capture", help="capture directory (or one capture file)")
    parser.add_argument(
        "--request-log",
        action="append",
        default=[],
        dest="request_logs",
        help="Kafka request log file; may be given more than once",
    )
    parser.add_argument("--out", required=True, help="directory for tables, plots, index.html")
    parser.add_argument("--master", default=None, help="Spark master (default local[*])")
    parser.add_argument(
        "--bucket-s", type=float, default=1.0, help="time bucket of the over-time plot (s)"
    )
    args = parser.parse_args(argv)
    if not (args.results or args.capture or args.request_logs):
        parser.error("give at least one of --results, --capture, --request-log")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the report; joins an already active SparkSession (and leaves it running)."""
    args = parse_args(argv)
    from pyspark.sql import SparkSession

    from spark_jobs.session import build_spark_session

    active = SparkSession.getActiveSession()
    spark = active or build_spark_session("minikafka-report", args.master)
    try:
        output = run_report(
            spark,
            args.out,
            results=args.results,
            capture=args.capture,
            request_logs=args.request_logs,
            bucket_s=args.bucket_s,
        )
    finally:
        if active is None:
            spark.stop()
    print(f"report written to {output.index_html}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
