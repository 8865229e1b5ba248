"""The report's throttle table: how long quotas held clients back, per API and side.

A client over a quota (issue 22: client quotas, KIP-219) gets its answer with
``throttle_time_ms`` and its connection is not read for that long; the capture keeps
each response's throttle time, as Kafka's request log keeps ``throttleTimeMs``. This
wait is not in the purgatory rows (the request was answered; its *next* request waits),
so it gets its own table: per API, for each side that has an analysis frame (the
capture, the replay target's capture), the client requests, how many were answered
with a throttle time, its p50, p99 and max over those, and the seconds throttled in
all. APIs no side throttled are left out; with none, the table says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from spark_jobs.render import Column, Table
from spark_jobs.traffic import CLIENT, traffic_column

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

_STATS = (
    ("count", "n"),
    ("throttled", "throttled"),
    ("p50", "p50"),
    ("p99", "p99"),
    ("max", "max"),
    ("total_s", "total s"),
)


def throttle_stats(sides: Sequence[tuple[str, DataFrame]]) -> list[dict[str, Any]]:
    """Per (API, side) of client requests (``ANALYSIS_SCHEMA`` frames): count, throttled,
    p50/p99/max of the throttle time over the throttled ones (ms), total (s)."""
    from pyspark.sql import functions as F

    throttled = F.col("throttle_time_ms") > 0
    when_throttled = F.when(throttled, F.col("throttle_time_ms"))
    rows: list[dict[str, Any]] = []
    for side, analysis in sides:
        aggregated = (
            analysis.where(traffic_column(api_version=None) == CLIENT)
            .groupBy("api_name")
            .agg(
                F.count(F.lit(1)).alias("count"),
                F.sum(F.when(throttled, 1).otherwise(0)).alias("throttled"),
                F.percentile_approx(when_throttled, 0.5).alias("p50"),
                F.percentile_approx(when_throttled, 0.99).alias("p99"),
                F.max(when_throttled).alias("max"),
                (F.sum("throttle_time_ms") / 1000.0).alias("total_s"),
            )
        )
        for row in aggregated.collect():
            rows.append({"side": side, **row.asDict()})
    return rows


def throttle_table(stats: list[dict[str, Any]], sides: Sequence[str]) -> Table:
    """One row per API some side throttled; per side the ``_STATS`` columns."""
    columns = [Column("key", "API")]
    groups: list[tuple[str, int]] = [("", 1)]
    for side in sides:
        columns += [Column(f"{side}__{key}", label) for key, label in _STATS]
        groups.append((f"{side} throttle time (ms)", len(_STATS)))
    by_api: dict[str, dict[str, Any]] = {}
    for entry in stats:
        if entry["side"] not in sides:
            continue
        row = by_api.setdefault(entry["api_name"], {"key": entry["api_name"]})
        for key, _label in _STATS:
            row[f"{entry['side']}__{key}"] = entry[key]
    rows = [
        row
        for api, row in sorted(by_api.items())
        if any(row.get(f"{side}__throttled") for side in sides)
    ]
    note = (
        "Responses answered with a quota's throttle_time_ms (KIP-219: the client's "
        "connection is then not read for that long), client requests only."
    )
    if not rows:
        note += " No response carried a throttle time."
    return Table("throttle", "Throttled by quotas, per API", columns, rows, note, groups)
