"""The latency report: captured beside replayed, like for like, per API and per purgatory.

Entry point of ``minikafka report`` and of ``spark-submit spark_jobs/report.py``::

    report --results DIR [--capture DIR] [--target-capture DIR] --out DIR [--master URL]
    report (--capture DIR | --request-log PATH ...) --out DIR

With ``--results`` (a replay's output) the page has two sides, one per source:
"captured" and "replayed", of the same client requests (``spark_jobs.fidelity``). The
capture and the target's capture are found through the results' ``_replay.json``
(``--capture``/``--target-capture`` name others). With the target's capture, each
replayed request has the target's purgatory, outcome, time parked and Kafka's
breakdown, and latency on both sides is Kafka's TotalTimeMs; without it the replayed
latency is the replay client's send-to-response time and the page says so. Without
``--results`` a capture or Kafka's request log is reported on its own (its client
requests: one side per source).

Inter-broker requests are never mixed into a row of client traffic: each cluster's
own are in a table apart (``spark_jobs.traffic``). Everything is computed with
DataFrame aggregations; only aggregates come back to the driver, to be written as CSV
and JSON under ``tables/``, drawn (``spark_jobs.plots``) and rendered into
``index.html`` from ``templates/report.html.j2`` (``spark_jobs.render``). With a capture at
hand the page also has the quota throttle table (``spark_jobs.throttle_report``) and,
when clients pushed telemetry (KIP-714), their own latency per API beside the broker's
(``spark_jobs.client_telemetry_report``).
``run_report`` reads as named steps: ``read_inputs``, ``replay_sides`` or
``analysis_sides``, the tables, ``draw_plots``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from spark_jobs.fidelity import CAPTURED, REPLAYED
from spark_jobs.render import Table

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from spark_jobs.run_info import ReplayRun

__all__ = ["ReportOutput", "busiest", "main", "parse_args", "run_report", "schedule_lag"]

_ACCURACY: Final = 10_000
_MAX_API_PANELS: Final = 12


def schedule_lag(results: DataFrame) -> list[dict[str, Any]]:
    """How late the replay sent each client request (actual - planned send, ms): p50,
    p99, max over all ("ALL", first) and per API."""
    from pyspark.sql import functions as F

    from spark_jobs.traffic import CLIENT

    lag = results.where(F.col("actual_send_ms").isNotNull() & (F.col("traffic") == CLIENT)).select(
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
    rows = []
    for r in overall.unionByName(per_api).collect():
        if not r["count"]:
            continue
        q = r["_q"] or [None, None]
        rows.append(
            {"scope": r["scope"], "count": r["count"], "p50": q[0], "p99": q[1], "max": r["max"]}
        )
    rows.sort(key=lambda r: (r["scope"] != "ALL", r["scope"]))
    return rows


def _reason_counts(results: DataFrame) -> dict[str, list[dict[str, Any]]]:
    """Skips and errors per API and reason: ``{"replay_skip": rows, "replay_error": rows}``."""
    from pyspark.sql import functions as F

    which = F.when(F.col("replay_skip").isNotNull(), F.lit("replay_skip")).otherwise(
        F.lit("replay_error")
    )
    reason = F.coalesce(F.col("replay_skip"), F.col("replay_error"))
    grouped = (
        results.where(reason.isNotNull())
        .groupBy(which.alias("which"), "api_name", reason.alias("reason"))
        .count()
    )
    out: dict[str, list[dict[str, Any]]] = {"replay_skip": [], "replay_error": []}
    for r in grouped.collect():
        out[r["which"]].append(
            {"api_name": r["api_name"], "reason": r["reason"], "count": r["count"]}
        )
    for rows in out.values():
        rows.sort(key=lambda r: (-r["count"], r["api_name"]))
    return out


def busiest(stats: list[dict[str, Any]], limit: int = _MAX_API_PANELS) -> list[str]:
    """The keys with the most requests over all sides, busiest first."""
    counts: dict[str, int] = {}
    for row in stats:
        counts[str(row["key"])] = counts.get(str(row["key"]), 0) + int(row["count"])
    return sorted(counts, key=lambda k: (-counts[k], k))[:limit]


@dataclass
class ReportOutput:
    """What ``run_report`` wrote, and its tables."""

    out_dir: Path
    index_html: Path
    plots: list[Path] = field(default_factory=list)
    tables: dict[str, Table] = field(default_factory=dict)
    sides: list[str] = field(default_factory=list)
    measure: str = "broker"


def _existing(path: str | Path | None) -> Path | None:
    return Path(path) if path is not None and Path(path).exists() else None


def _union(frames: Sequence[DataFrame]) -> DataFrame:
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame)
    return out


@dataclass
class ReportInputs:
    """What a report reads, each frame cached once (each is read by Python tasks, the
    capture reader, and used several times)."""

    run: ReplayRun | None
    results: str | Path | None
    capture_path: Path | None
    target_path: Path | None
    captured_requests: DataFrame | None
    target_requests: DataFrame | None
    results_df: DataFrame | None
    request_logs: list[str]


@dataclass
class Sides:
    """The compared sides: one frame (``fidelity``'s side rows), their names, what
    latency means on them, and the page's notes on the replay."""

    frame: DataFrame
    names: list[str]
    measure: str
    notes: dict[str, Any] = field(default_factory=dict)


def read_inputs(
    spark: SparkSession,
    results: str | Path | None,
    capture: str | Path | None,
    target_capture: str | Path | None,
    request_logs: Sequence[str | Path],
) -> ReportInputs:
    """The inputs, with the capture and target capture found through ``_replay.json``
    where not given."""
    from spark_jobs.captures import read_capture_analysis_df
    from spark_jobs.run_info import read_run
    from spark_jobs.schema import RESULT_SCHEMA

    run = read_run(results) if results is not None else None
    capture_path = _existing(capture or (run.capture if run else None))
    target_path = _existing(target_capture or (run.target_capture if run else None))
    return ReportInputs(
        run=run,
        results=results,
        capture_path=capture_path,
        target_path=target_path,
        captured_requests=read_capture_analysis_df(spark, capture_path).cache()
        if capture_path
        else None,
        target_requests=read_capture_analysis_df(spark, target_path).cache()
        if target_path
        else None,
        results_df=spark.read.schema(RESULT_SCHEMA).parquet(str(results)).cache()
        if results is not None
        else None,
        request_logs=[str(p) for p in request_logs],
    )


def throttle_report_table(inputs: ReportInputs) -> Table | None:
    """The throttle times client responses carried, per API, for each capture given
    (the captured side and the target's), or None without a capture."""
    from spark_jobs.throttle_report import throttle_stats, throttle_table

    throttle_sides = [
        (side, frame)
        for side, frame in (
            (CAPTURED, inputs.captured_requests),
            (REPLAYED, inputs.target_requests),
        )
        if frame is not None
    ]
    if not throttle_sides:
        return None
    return throttle_table(throttle_stats(throttle_sides), [side for side, _ in throttle_sides])


def client_latency_report_table(spark: SparkSession, inputs: ReportInputs) -> Table | None:
    """The clients' own latency (KIP-714 pushes in the capture) beside the broker's, per
    API; None when the capture holds no push (looked for on the driver first, so a
    capture without telemetry costs no Spark job)."""
    from protocol.capture_files import read_client_telemetry
    from spark_jobs.client_telemetry_report import (
        client_latency_stats,
        client_latency_table,
        read_client_telemetry_df,
    )

    path, analysis = inputs.capture_path, inputs.captured_requests
    if path is None or analysis is None or next(read_client_telemetry(path), None) is None:
        return None
    stats = client_latency_stats(read_client_telemetry_df(spark, path), analysis)
    return client_latency_table(stats) if stats else None


def replay_sides(results_df: DataFrame, target_requests: DataFrame | None) -> Sides:
    """Captured beside replayed, the same client requests on both; the replayed latency
    is the target's TotalTimeMs when its capture is there, else the client's."""
    from pyspark.sql import functions as F

    from spark_jobs import fidelity

    pairs = fidelity.compared_pairs(results_df).cache()
    replayed, matched = fidelity.replayed_side(pairs, target_requests)
    compared = matched if matched is not None else pairs.where(F.col("response_ms").isNotNull())
    frame = _union([fidelity.captured_side(compared), replayed]).cache()
    measure = "broker" if target_requests is not None else "client"
    return Sides(frame, [CAPTURED, REPLAYED], measure, _replay_notes(results_df))


def _replay_notes(results_df: DataFrame) -> dict[str, Any]:
    from pyspark.sql import functions as F

    client = F.col("traffic") == "client"
    sent = client & F.col("replay_skip").isNull() & F.col("replay_error").isNull()
    counts = results_df.agg(
        F.count(F.lit(1)).alias("rows"),
        F.sum(F.when(client, 1).otherwise(0)).alias("client"),
        F.count("replay_skip").alias("skipped"),
        F.count("replay_error").alias("errors"),
        F.sum(F.when(sent & F.col("actual_send_ms").isNotNull(), 1).otherwise(0)).alias("sent"),
    ).first()
    assert counts is not None
    return {
        "rows": counts["rows"],
        "client": counts["client"],
        "skipped": counts["skipped"],
        "errors": counts["errors"],
        "sent": counts["sent"] or 0,
    }


def analysis_sides(spark: SparkSession, inputs: ReportInputs) -> Sides:
    """A capture and/or Kafka's request logs on their own: one side per source."""
    from spark_jobs import fidelity
    from spark_jobs.request_log import read_request_log_df

    parts = []
    if inputs.captured_requests is not None:
        parts.append(inputs.captured_requests)
    if inputs.request_logs:
        parts.append(read_request_log_df(spark, inputs.request_logs))
    analysis = _union(parts)
    sources = {r["source"] for r in analysis.select("source").distinct().collect()}
    names = [s for s in ("capture", "request_log") if s in sources]
    return Sides(fidelity.side_from_analysis(analysis).cache(), names, "broker")


def fidelity_tables(
    api_stats: list[dict[str, Any]],
    purgatory_stats: list[dict[str, Any]],
    sides: Sides,
    replayed: bool,
) -> dict[str, Table]:
    """Per API and per purgatory, the sides side by side, and Kafka's breakdown."""
    from spark_jobs import fidelity, tables

    client_side = REPLAYED if sides.measure == "broker" and replayed else None
    return {
        "fidelity_by_api": tables.fidelity_table(
            "fidelity_by_api",
            "Fidelity per API: client requests, the same on both sides",
            fidelity.pivot(api_stats, sides.names),
            sides.names,
            key_label="API",
            client_side=client_side,
            note="Ratios are the replayed percentile over the captured one; marked when "
            f"more than {tables.TOLERANCE:.0%} away from 1. Expiry rate: of the requests "
            "that parked in a purgatory, those that left it expired.",
        ),
        "fidelity_by_purgatory": tables.fidelity_table(
            "fidelity_by_purgatory",
            "Fidelity per purgatory: client requests, each side by where it parked",
            fidelity.pivot(purgatory_stats, sides.names),
            sides.names,
            key_label="purgatory",
            note="Each side counts the requests that parked in the purgatory on its own "
            "broker: a request may park on one side and not on the other.",
        ),
        "breakdown": tables.breakdown_table(api_stats, sides.names),
    }


def inter_broker_table(inputs: ReportInputs) -> Table | None:
    """Each cluster's own inter-broker traffic, shown apart (never compared)."""
    from spark_jobs import fidelity, tables
    from spark_jobs.traffic import INTER_BROKER, traffic_column

    inter = fidelity.inter_broker_sides(
        inputs.results_df, inputs.target_requests, "captured cluster's own", "target cluster's own"
    )
    if inter is None and inputs.captured_requests is not None and inputs.results is None:
        inter = fidelity.side_from_analysis_all(
            inputs.captured_requests.where(traffic_column() == INTER_BROKER),
            "captured cluster's own",
        )
    if inter is None:
        return None
    inter_stats = fidelity.side_stats(inter, "api_name")
    inter_sides = ["captured cluster's own", "target cluster's own"]
    present = [s for s in inter_sides if any(r["side"] == s for r in inter_stats)]
    if not present:
        return None
    return tables.fidelity_table(
        "inter_broker",
        "Inter-broker traffic (not compared: each cluster's followers made their own)",
        fidelity.pivot(inter_stats, present),
        present,
        key_label="API",
        note="Follower fetches and other broker-to-broker requests. The replay does "
        "not send them; the target's brokers replicate the replayed produces "
        "themselves. Shown for the replication they reflect, not as a comparison.",
    )


def delayed_operations_table(spark: SparkSession, inputs: ReportInputs) -> Table | None:
    """Every delayed operation of each cluster whose capture is there."""
    from pyspark.sql import functions as F

    from spark_jobs import fidelity, tables
    from spark_jobs.captures import read_delayed_operations_df

    events: list[DataFrame] = []
    if inputs.capture_path is not None:
        raw = read_delayed_operations_df(spark, inputs.capture_path)
        side = CAPTURED if inputs.results is not None else "capture"
        classified = fidelity.classify_events(raw, inputs.captured_requests)
        events.append(classified.withColumn("side", F.lit(side)))
    if inputs.target_path is not None:
        raw = read_delayed_operations_df(spark, inputs.target_path)
        classified = fidelity.classify_events(raw, inputs.target_requests)
        events.append(classified.withColumn("side", F.lit(REPLAYED)))
    if not events:
        return None
    return tables.delayed_operations_table(
        fidelity.delayed_operations_by_side(_union(events)),
        note="Every operation of each cluster, client and inter-broker apart (an "
        "operation's traffic is that of the request that parked it; a DelayedHeartbeat "
        "watches a member's session). The captured side is the whole capture, not only "
        "the replayed part.",
    )


def replay_tables(results_df: DataFrame) -> dict[str, Table]:
    """How late the replay sent, and what it left out or failed to replay."""
    from spark_jobs import tables

    reasons = _reason_counts(results_df)
    return {
        "schedule_lag": tables.lag_table(schedule_lag(results_df)),
        "replay_skips": tables.side_counts_table(
            "replay_skips", "Left out on purpose (skips)", reasons["replay_skip"]
        ),
        "replay_errors": tables.side_counts_table(
            "replay_errors", "Replay errors", reasons["replay_error"]
        ),
    }


def draw_plots(
    out: Path, sides: Sides, api_stats: list[dict[str, Any]], bucket_s: float
) -> list[Path]:
    """The three figures of the page, for the busiest APIs."""
    from spark_jobs import plots

    apis = busiest(api_stats)
    return [
        plots.plot_distributions(
            out / "plots" / "latency_cdf.png",
            plots.distributions(sides.frame, apis),
            apis,
            sides.names,
            "Latency distribution per API (points: every request, where there are few)",
        ),
        plots.plot_breakdown(out / "plots" / "breakdown.png", api_stats, apis, sides.names),
        plots.plot_over_time(
            out / "plots" / "latency_over_time.png",
            plots.over_time(sides.frame, apis, bucket_s),
            apis,
            sides.names,
        ),
    ]


def run_report(
    spark: SparkSession,
    out_dir: str | Path,
    *,
    results: str | Path | None = None,
    capture: str | Path | None = None,
    target_capture: str | Path | None = None,
    request_logs: Sequence[str | Path] = (),
    bucket_s: float = 1.0,
) -> ReportOutput:
    """Compute the report from the given inputs into ``out_dir`` (see module doc).

    The steps: read the inputs; make the sides (captured beside replayed, or each
    source on its own); their statistics per API and per purgatory; the tables; the
    plots; the page."""
    from spark_jobs import fidelity
    from spark_jobs.render import render_page, write_table

    if results is None and capture is None and not request_logs:
        raise ValueError("nothing to report on: give results, a capture or a request log")
    out = Path(out_dir)
    (out / "plots").mkdir(parents=True, exist_ok=True)
    inputs = read_inputs(spark, results, capture, target_capture, request_logs)
    if inputs.results_df is not None:
        sides = replay_sides(inputs.results_df, inputs.target_requests)
    else:
        sides = analysis_sides(spark, inputs)
    api_stats = fidelity.side_stats(sides.frame, "api_name")
    purgatory_stats = fidelity.side_stats(sides.frame, "purgatory")
    if sides.notes:
        sides.notes["compared"] = sum(int(r["count"]) for r in api_stats if r["side"] == CAPTURED)
    out_tables = fidelity_tables(api_stats, purgatory_stats, sides, results is not None)
    for name, table in (
        ("inter_broker", inter_broker_table(inputs)),
        ("delayed_operations", delayed_operations_table(spark, inputs)),
        ("throttle", throttle_report_table(inputs)),
        ("client_latency", client_latency_report_table(spark, inputs)),
    ):
        if table is not None:
            out_tables[name] = table
    if inputs.results_df is not None:
        out_tables.update(replay_tables(inputs.results_df))
    for table in out_tables.values():
        write_table(out, table)
    plot_paths = draw_plots(out, sides, api_stats, bucket_s)
    sides.frame.unpersist()
    if inputs.results_df is not None:
        inputs.results_df.unpersist()
    index = render_page(
        "report.html.j2",
        out / "index.html",
        run=inputs.run,
        results=str(results) if results is not None else None,
        capture=str(inputs.capture_path) if inputs.capture_path else None,
        target_capture=str(inputs.target_path) if inputs.target_path else None,
        request_logs=inputs.request_logs,
        sides=sides.names,
        measure=sides.measure,
        notes=sides.notes,
        tables=out_tables,
        plots=[p.relative_to(out).as_posix() for p in plot_paths],
    )
    return ReportOutput(out, index, plot_paths, out_tables, sides.names, sides.measure)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="minikafka report",
        description="Latency report: a replay's results beside its capture (or a capture, "
        "or Kafka's request log, on its own).",
    )
    parser.add_argument("--results", help="replay results directory (Parquet)")
    parser.add_argument(
        "--capture", help="capture directory (default with --results: the one replayed)"
    )
    parser.add_argument(
        "--target-capture",
        help="the replay target's capture (default: the one the replay recorded)",
    )
    parser.add_argument(
        "--request-log",
        action="append",
        default=[],
        dest="request_logs",
        help="Kafka request log file; may be given more than once (without --results)",
    )
    parser.add_argument("--out", required=True, help="directory for tables, plots, index.html")
    parser.add_argument("--master", default=None, help="Spark master (default local[*])")
    parser.add_argument(
        "--bucket-s", type=float, default=1.0, help="time bucket of the over-time plot (s)"
    )
    args = parser.parse_args(argv)
    if not (args.results or args.capture or args.request_logs):
        parser.error("give at least one of --results, --capture, --request-log")
    if args.results and args.request_logs:
        parser.error("--request-log is reported on its own, not beside --results")
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
            target_capture=args.target_capture,
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
