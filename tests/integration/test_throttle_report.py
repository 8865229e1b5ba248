"""The report's throttle table (``spark_jobs/throttle_report.py``) on a small frame.

Client requests per API and side, the throttled ones' throttle-time percentiles; a
follower's fetch (inter-broker traffic) is left out; an API no side throttled has no
row; with no throttle at all the table is empty and says so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from spark_jobs.throttle_report import throttle_stats, throttle_table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.spark

SCHEMA = "api_key long, replica_id long, api_name string, throttle_time_ms double"


def _frame(spark: SparkSession, rows: list[tuple[int, int | None, str, float]]) -> DataFrame:
    return spark.createDataFrame(rows, SCHEMA)


def test_throttle_table_per_api_and_side(spark: SparkSession) -> None:
    captured = _frame(
        spark,
        [
            (0, None, "Produce", 0.0),
            (0, None, "Produce", 100.0),
            (0, None, "Produce", 300.0),
            (1, 2, "Fetch", 900.0),  # a follower's fetch: inter-broker, not counted
            (3, None, "Metadata", 0.0),
        ],
    )
    replayed = _frame(spark, [(0, None, "Produce", 0.0), (3, None, "Metadata", 0.0)])
    stats = throttle_stats([("captured", captured), ("replayed", replayed)])
    table = throttle_table(stats, ["captured", "replayed"])
    [row] = table.rows  # Metadata and Fetch: never throttled on either side
    assert row["key"] == "Produce"
    assert row["captured__count"] == 3 and row["captured__throttled"] == 2
    assert row["captured__p50"] == 100.0 and row["captured__max"] == 300.0
    assert row["captured__total_s"] == pytest.approx(0.4)
    assert row["replayed__count"] == 1 and row["replayed__throttled"] == 0
    assert row["replayed__p50"] is None


def test_no_throttle_no_rows(spark: SparkSession) -> None:
    stats = throttle_stats([("captured", _frame(spark, [(0, None, "Produce", 0.0)]))])
    table = throttle_table(stats, ["captured"])
    assert table.rows == []
    assert table.note.endswith("No response carried a throttle time.")
