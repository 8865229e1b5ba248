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
The variants table shows each replay's run kind (real-time, or virtual-time from
``whatif``). ``run_compare`` reads as named steps: ``read_variant``, ``comparison_tables``,
``draw_plots``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from spark_jobs.fidelity import CAPTURED
from spark_jobs.render import Column, Table
from spark_jobs.replay_result import REAL_TIME

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from spark_jobs.run_info import ReplayRun

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


@dataclass
class Variant:
    """One replay read for the comparison: its compared side, the captured side (kept
    from the first variant only), its target's own inter-broker traffic, and its row of
    the variants table."""

    replayed: DataFrame
    captured: DataFrame
    inter: DataFrame | None
    row: dict[str, Any]


def read_variant(
    spark: SparkSession, path: str | Path, run: ReplayRun | None, label: str
) -> Variant:
    """The replay in ``path`` as a variant named ``label``: matched with its target's
    capture when that is there (Kafka's TotalTimeMs), else the client's latency."""
    from pyspark.sql import functions as F

    from spark_jobs import fidelity
    from spark_jobs.captures import read_capture_analysis_df
    from spark_jobs.schema import RESULT_SCHEMA

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
    row = {
        "label": label,
        "run_kind": run.run_kind if run else REAL_TIME,
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
    inter = fidelity.inter_broker_sides(None, target, CAPTURED, label)
    return Variant(replayed, fidelity.captured_side(compared), inter, row)


def like_for_like_warnings(rows: Sequence[dict[str, Any]]) -> list[str]:
    """What makes the variants less than like for like: other captures, other measures."""
    warnings = []
    captures = {v["capture"] for v in rows}
    if len(captures) > 1:
        warnings.append(f"the results replay different captures: {sorted(map(str, captures))}")
    if len({v["measure"] for v in rows}) > 1:
        warnings.append("some variants have no target capture: their latency is the client's")
    return warnings


_VARIANT_COLUMNS: Final = [
    Column("label", "variant"),
    Column("run_kind", "run"),
    Column("config", "target broker config (not Kafka's defaults)"),
    Column("target_brokers", "brokers"),
    Column("speed", "speed"),
    Column("compared", "requests compared"),
    Column("errors", "replay errors"),
    Column("measure", "latency measured as"),
    Column("date", "replayed at (UTC)"),
    Column("results", "results"),
]


def comparison_tables(
    api_stats: list[dict[str, Any]],
    purgatory_stats: list[dict[str, Any]],
    names: list[str],
    rows: list[dict[str, Any]],
) -> dict[str, Table]:
    """The variants, and per API and per purgatory each over the first (the baseline)."""
    from spark_jobs import fidelity, tables

    sides = [*names, CAPTURED]
    note = (
        f"Ratios and differences are each variant's over the baseline, {names[0]}; marked "
        f"when more than {tables.TOLERANCE:.0%} from 1. The captured side is shown for "
        "reference."
    )
    return {
        "variants": Table("variants", "Variants", _VARIANT_COLUMNS, rows),
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


def inter_broker_table(inter: list[DataFrame], names: list[str]) -> Table | None:
    """Each target's own follower traffic, variant beside variant (not replayed)."""
    from spark_jobs import fidelity, tables

    if not inter:
        return None
    return tables.fidelity_table(
        "compare_inter_broker",
        "Each target's own inter-broker traffic (follower fetches)",
        fidelity.pivot(fidelity.side_stats(_union(inter), "api_name"), names),
        names,
        key_label="API",
        differences=True,
        note="Not replayed requests: each target's followers replicate what the replay "
        "produced, under that target's config (replica.fetch.wait.max.ms, ...).",
    )


def draw_plots(
    out: Path, frame: DataFrame, api_stats: list[dict[str, Any]], sides: list[str]
) -> list[Path]:
    from spark_jobs import plots
    from spark_jobs.report import busiest

    apis = busiest(api_stats)
    return [
        plots.plot_distributions(
            out / "plots" / "compare_cdf.png",
            plots.distributions(frame, apis),
            apis,
            sides,
            "Latency per API, the variants overlaid (points: every request, where few)",
        ),
        plots.plot_breakdown(out / "plots" / "compare_breakdown.png", api_stats, apis, sides),
    ]


def _union(frames: Sequence[DataFrame]) -> DataFrame:
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame)
    return out


def run_compare(
    spark: SparkSession,
    results: Sequence[str | Path],
    out_dir: str | Path,
    *,
    labels: Sequence[str] = (),
) -> CompareOutput:
    """Compare the replays in ``results`` into ``out_dir`` (see module doc).

    The steps: read each variant; one frame of every variant's side and the captured
    one (the first variant's); statistics per API and per purgatory; tables; plots;
    the page."""
    from spark_jobs import fidelity
    from spark_jobs.render import render_page, write_table
    from spark_jobs.run_info import read_run

    if not results:
        raise ValueError("nothing to compare: give at least one results directory")
    out = Path(out_dir)
    (out / "plots").mkdir(parents=True, exist_ok=True)
    runs = [read_run(r) for r in results]
    names = variant_labels([run.label if run else None for run in runs], labels)
    variants = [
        read_variant(spark, path, run, label)
        for path, run, label in zip(results, runs, names, strict=True)
    ]
    frame = _union([variants[0].captured, *(v.replayed for v in variants)]).cache()
    sides = [*names, CAPTURED]
    rows = [v.row for v in variants]
    api_stats = fidelity.side_stats(frame, "api_name")
    purgatory_stats = fidelity.side_stats(frame, "purgatory")
    out_tables = comparison_tables(api_stats, purgatory_stats, names, rows)
    inter = inter_broker_table([v.inter for v in variants if v.inter is not None], names)
    if inter is not None:
        out_tables["compare_inter_broker"] = inter
    for table in out_tables.values():
        write_table(out, table)
    plot_paths = draw_plots(out, frame, api_stats, sides)
    frame.unpersist()
    index = render_page(
        "compare.html.j2",
        out / "index.html",
        variants=rows,
        baseline=names[0],
        warnings=like_for_like_warnings(rows),
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
