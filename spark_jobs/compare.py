"""What-if: N replays of one capture side by side, each labelled with its broker config.

Entry point of ``minikafka compare``::

    compare RESULTS [RESULTS ...] --out DIR [--label TEXT ...] [--master URL]

Each RESULTS is a replay's output (``minikafka replay ... --out RESULTS``); its
``_replay.json`` names the variant (``--label`` in order overrides it) and the target
config it ran against, and its target's capture gives each replayed request Kafka's
breakdown, purgatory and outcome there (``spark_jobs.fidelity``). The first RESULTS is
the baseline: every other variant's percentiles per API and per purgatory are given as
a ratio to it and a difference in ms, and a ratio more than 10% from 1 is marked. The
capture (as the first replay's compared requests) is shown beside them for reference.
The distributions are overlaid, one colour per variant.

Like for like: every variant replays the same capture (the page says so, or warns
when the results name different captures), and each compares the same client
requests, as ``minikafka report`` does. Variants whose target capture is missing fall
back to the replay client's send-to-response latency, and the page says which.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spark_jobs.fidelity import CAPTURED
from spark_jobs.render import Column, Table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["CompareOutput", "main", "parse_args", "run_compare", "variant_labels"]


def variant_labels(found: Sequence[str | None], given: Sequence[str]) -> list[str]:
    """Labels for the variants: ``given`` in order, then what each run says, then
    "variant N"; made unique (a repeated label gets " (2)", " (3)")."""
    labels: list[str] = []
    for i, label in enumerate(found):
        text = given[i] if i < len(given) else label or f"variant {i + 1}"
        if text == CAPTURED:
            text = f"{text} (replay)"
        candidate, n = text, 2
        while candidate in labels:
            candidate, n = f"{text} ({n})", n + 1
        labels.append(candidate)
    return labels


@dataclass
class CompareOutput:
    out_dir: Path
    index_html: Path
    labels: list[str]
    tables: dict[str, Table] = field(default_factory=dict)
    plots: list[Path] = field(default_factory=list)


def run_compare(
    spark: SparkSession,
    results: Sequence[str | Path],
    out_dir: str | Path,
    *,
    labels: Sequence[str] = (),
) -> CompareOutput:
    """Compare the replays in ``results`` into ``out_dir`` (see module doc)."""
    from pyspark.sql import functions as F

    from spark_jobs import fidelity, plots, tables
    from spark_jobs.captures import read_capture_analysis_df
    from spark_jobs.render import render_page, write_table
    from spark_jobs.report import busiest
    from spark_jobs.run_info import read_run
    from spark_jobs.schema import RESULT_SCHEMA

    if not results:
        raise ValueError("nothing to compare: give at least one results directory")
    out = Path(out_dir)
    (out / "plots").mkdir(parents=True, exist_ok=True)
    runs = [read_run(r) for r in results]
    names = variant_labels([run.label if run else None for run in runs], labels)
    frames: list[DataFrame] = []
    inter: list[DataFrame] = []
    variants: list[dict[str, Any]] = []
    for i, (path, run, label) in enumerate(zip(results, runs, names, strict=True)):
        df = spark.read.schema(RESULT_SCHEMA).parquet(str(path))
        pairs = fidelity.compared_pairs(df)
        target_path = run.target_capture if run else None
        target = (
            read_capture_analysis_df(spark, target_path)
            if target_path and Path(target_path).exists()
            else None
        )
        replayed, matched = fidelity.replayed_side(pairs, target, side=label)
        compared = matched if matched is not None else pairs.where(F.col("response_ms").isNotNull())
        if i == 0:
            frames.append(fidelity.captured_side(compared))
        frames.append(replayed)
        own = fidelity.inter_broker_sides(None, target, CAPTURED, label)
        if own is not None:
            inter.append(own)
        variants.append(
            {
                "label": label,
                "results": str(path),
                "config": run.config_text() if run else "unknown (no _replay.json)",
                "target_brokers": run.target_brokers if run else None,
                "speed": run.speed if run else None,
                "capture": run.capture if run else None,
                "date": run.started_utc if run else None,
                "compared": compared.count(),
                "errors": sum(run.errors.values()) if run else None,
                "measure": "broker TotalTimeMs" if target is not None else "client send->response",
            }
        )
    frame = frames[0]
    for other in frames[1:]:
        frame = frame.unionByName(other)
    frame = frame.cache()
    sides = [*names, CAPTURED]
    captures = {v["capture"] for v in variants}
    warnings = []
    if len(captures) > 1:
        warnings.append(f"the results replay different captures: {sorted(map(str, captures))}")
    if len(set(v["measure"] for v in variants)) > 1:
        warnings.append("some variants have no target capture: their latency is the client's")

    api_stats = fidelity.side_stats(frame, "api_name")
    purgatory_stats = fidelity.side_stats(frame, "purgatory")
    note = (
        f"Ratios and differences are each variant's over the baseline, {names[0]}; marked "
        f"when more than {tables.TOLERANCE:.0%} from 1. The captured side is shown for "
        "reference."
    )
    out_tables = {
        "variants": Table(
            "variants",
            "Variants",
            [
                Column("label", "variant"),
                Column("config", "target broker config (not Kafka's defaults)"),
                Column("target_brokers", "brokers"),
                Column("speed", "speed"),
                Column("compared", "requests compared"),
                Column("errors", "replay errors"),
                Column("measure", "latency measured as"),
                Column("date", "replayed at (UTC)"),
                Column("results", "results"),
            ],
            variants,
        ),
        "compare_by_api": tables.fidelity_table(
            "compare_by_api",
            "Per API: client requests",
            fidelity.pivot(api_stats, sides),
            sides,
            key_label="API",
            differences=True,
            reference=[CAPTURED],
            note=note,
        ),
        "compare_by_purgatory": tables.fidelity_table(
            "compare_by_purgatory",
            "Per purgatory: client requests, by where each parked",
            fidelity.pivot(purgatory_stats, sides),
            sides,
            key_label="purgatory",
            differences=True,
            reference=[CAPTURED],
            note=note,
        ),
        "breakdown": tables.breakdown_table(api_stats, sides),
    }
    if inter:
        inter_frame = inter[0]
        for other in inter[1:]:
            inter_frame = inter_frame.unionByName(other)
        present = list(names)
        out_tables["compare_inter_broker"] = tables.fidelity_table(
            "compare_inter_broker",
            "Each target's own inter-broker traffic (follower fetches)",
            fidelity.pivot(fidelity.side_stats(inter_frame, "api_name"), present),
            present,
            key_label="API",
            differences=True,
            note="Not replayed requests: each target's followers replicate what the replay "
            "produced, under that target's config (replica.fetch.wait.max.ms, ...).",
        )
    for table in out_tables.values():
        write_table(out, table)
    apis = busiest(api_stats)
    plot_paths = [
        plots.plot_distributions(
            out / "plots" / "compare_cdf.png",
            plots.distributions(frame, apis),
            apis,
            sides,
            "Latency per API, the variants overlaid (points: every request, where few)",
        ),
        plots.plot_breakdown(out / "plots" / "compare_breakdown.png", api_stats, apis, sides),
    ]
    frame.unpersist()
    index = render_page(
        "compare.html.j2",
        out / "index.html",
        variants=variants,
        baseline=names[0],
        warnings=warnings,
        tables=out_tables,
        plots=[p.relative_to(out).as_posix() for p in plot_paths],
    )
    return CompareOutput(out, index, names, out_tables, plot_paths)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="minikafka compare",
        description="What-if: replays of one capture side by side (the first is the baseline).",
    )
    parser.add_argument("results", nargs="+", help="replay results directories")
    parser.add_argument("--out", required=True, help="directory for tables, plots, index.html")
    parser.add_argument(
        "--label",
        action="append",
        default=[],
        help="name of a variant, in the order of RESULTS (default: its non-default configs)",
    )
    parser.add_argument("--master", default=None, help="Spark master (default local[*])")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the comparison; joins an already active SparkSession (and leaves it running)."""
    args = parse_args(argv)
    from pyspark.sql import SparkSession

    from spark_jobs.session import build_spark_session

    missing = [r for r in args.results if not Path(r).is_dir()]
    if missing:
        print(f"minikafka compare: error: no results directory {missing[0]}", file=sys.stderr)
        return 2
    active = SparkSession.getActiveSession()
    spark = active or build_spark_session("minikafka-compare", args.master)
    try:
        output = run_compare(spark, args.results, args.out, labels=args.label)
    finally:
        if active is None:
            spark.stop()
    print(f"comparison of {len(output.labels)} replays written to {output.index_html}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
