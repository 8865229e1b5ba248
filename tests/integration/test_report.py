"""The report job end to end on Spark local mode, on small synthetic inputs.

The SparkSession is the suite's one session-scoped fixture (``tests/conftest.py``).
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from protocol.capture import CaptureRequest
from protocol.capture_files import CaptureWriter
from tests.helpers.captures import make_event, make_request

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

pytestmark = pytest.mark.spark
pytest.importorskip("pyspark")

DATA = Path(__file__).resolve().parents[1] / "data"


def synthetic_results() -> list[tuple[Any, ...]]:
    """1000 Produce (latency 1..1000 ms replayed, 2x captured), 100 Fetch of which 25
    expired when captured, and one Metadata that failed to replay."""
    rows: list[tuple[Any, ...]] = []
    for i in range(1, 1001):
        planned = float(i)
        lag = 5.0 if i == 1000 else 1.0  # schedule lag: 1 ms except one of 5 ms
        captured = (2.0 * i, 2.0 * i - 1)
        replayed = (planned, planned + lag, float(i), [0], None)
        rows.append((0, "Produce", 9, "c-0", i, "Produce", "completed", *captured, *replayed))
    for i in range(100):
        expired = i < 25
        latency = 500.0 if expired else 10.0
        outcome = "expired" if expired else "completed"
        times = (latency, latency - 0.5, 1000.0 + i, 1001.0 + i, latency + 1)
        rows.append((1, "Fetch", 12, "c-1", i, "Fetch", outcome, *times, [0, 0], None))
    rows.append((3, "Metadata", 12, "c-2", 0, None, None, 1.0, 0.0, 0.0, 1.0, None, None, "boom"))
    return rows


def write_parquet(path: Path, rows: list[tuple[Any, ...]], schema: StructType) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.sql.types import ArrayType, DoubleType, IntegerType, LongType, StringType

    arrow_types = {IntegerType(): pa.int32(), LongType(): pa.int64()}
    arrow_types |= {DoubleType(): pa.float64(), StringType(): pa.string()}
    arrow_types |= {ArrayType(IntegerType(), containsNull=False): pa.list_(pa.int32())}
    columns = list(zip(*rows, strict=True))
    table = pa.table(
        {
            f.name: pa.array(columns[i], type=arrow_types[f.dataType])
            for i, f in enumerate(schema.fields)
        }
    )
    pq.write_table(table, path)


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def pick(rows: list[dict[str, str]], **where: str) -> dict[str, str]:
    (row,) = [r for r in rows if all(r[k] == v for k, v in where.items())]
    return row


def test_report_from_replay_results(spark: SparkSession, tmp_path: Path) -> None:
    from spark_jobs.report import run_report
    from spark_jobs.schema import RESULT_SCHEMA

    # Written with pyarrow, as any Parquet writer could: the report reads it with the
    # explicit RESULT_SCHEMA (and a Spark write job would only cost test time).
    results = tmp_path / "results"
    results.mkdir()
    write_parquet(results / "part-0.parquet", synthetic_results(), RESULT_SCHEMA)
    out = tmp_path / "report"
    run_report(spark, out, results=results)

    by_api = read_csv(out / "tables" / "latency_by_api.csv")
    replayed = pick(by_api, api_name="Produce", source="replayed")
    assert int(replayed["count"]) == 1000
    assert float(replayed["p50"]) == pytest.approx(500, abs=1)
    assert float(replayed["p90"]) == pytest.approx(900, abs=1)
    assert float(replayed["p99"]) == pytest.approx(990, abs=1)
    assert float(replayed["p999"]) == pytest.approx(999, abs=1)
    assert float(replayed["max"]) == 1000
    captured = pick(by_api, api_name="Produce", source="captured")
    assert float(captured["p50"]) == pytest.approx(1000, abs=2)
    # The Metadata request failed to replay: captured, but no replayed latency.
    assert pick(by_api, api_name="Metadata", source="captured")["count"] == "1"
    assert not [r for r in by_api if r["api_name"] == "Metadata" and r["source"] == "replayed"]

    by_purgatory = read_csv(out / "tables" / "latency_by_purgatory.csv")
    fetch = pick(by_purgatory, purgatory="Fetch", source="captured")
    assert fetch["kind"] == "DelayedFetch"
    assert float(fetch["expiry_rate"]) == pytest.approx(0.25)
    assert float(fetch["max"]) == 500
    produce = pick(by_purgatory, purgatory="Produce", source="captured")
    assert float(produce["expiry_rate"]) == 0
    assert pick(by_purgatory, purgatory="Fetch", source="replayed")["expiry_rate"] == ""

    lag = read_csv(out / "tables" / "schedule_lag.csv")
    overall = pick(lag, scope="ALL")
    assert int(overall["count"]) == 1101
    assert float(overall["p50"]) == 1.0 and float(overall["max"]) == 5.0

    errors = read_csv(out / "tables" / "replay_errors.csv")
    assert errors == [{"api_name": "Metadata", "replay_error": "boom", "count": "1"}]

    for png in ("latency_cdf.png", "latency_over_time.png"):
        data = (out / "plots" / png).read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 5000
    index = (out / "index.html").read_text()
    assert 'src="plots/latency_cdf.png"' in index and 'src="plots/latency_over_time.png"' in index
    assert "Latency per API" in index and "DelayedFetch" in index and "boom" in index
    assert (out / "tables" / "latency_by_api.json").is_file()


def write_capture(directory: Path) -> list[CaptureRequest]:
    requests = [
        make_request(
            sequence=i,
            correlation_id=i,
            total_time_ms=float(i + 1),
            received_unix_us=1_714_564_800_000_000 + i * 100_000,
        )
        for i in range(20)
    ]
    with CaptureWriter(directory, broker_id=1) as writer:
        for r in requests:
            writer.write(r)
        for op in range(4):
            writer.write(make_event(operation_id=op, event="created", at_monotonic_us=0))
            end = "expired" if op == 0 else "completed"
            writer.write(make_event(operation_id=op, event=end, at_monotonic_us=(op + 1) * 1000))
    return requests


def test_report_main_from_capture_and_request_logs(spark: SparkSession, tmp_path: Path) -> None:
    from spark_jobs.report import main

    capture = tmp_path / "captures"
    write_capture(capture)
    out = tmp_path / "report"
    argv = ["--capture", str(capture), "--out", str(out)]
    argv += ["--request-log", str(DATA / "kafka-request-log-json.sample.log")]
    argv += ["--request-log", str(DATA / "kafka-request-log-text.sample.log")]
    assert main(argv) == 0

    summary = {r["source"]: int(r["count"]) for r in read_csv(out / "tables" / "summary.csv")}
    assert summary == {"capture": 20, "request_log": 18}

    by_api = read_csv(out / "tables" / "latency_by_api.csv")
    assert float(pick(by_api, api_name="Produce", source="capture")["max"]) == 20.0
    assert float(pick(by_api, api_name="JoinGroup", source="request_log")["max"]) == 3001.5

    by_purgatory = read_csv(out / "tables" / "latency_by_purgatory.csv")
    log_fetch = pick(by_purgatory, purgatory="Fetch", source="request_log")
    # Expired: 88 (json), 4012 (json), 88 (text); completed: 89, 7781, 4012 (text).
    assert float(log_fetch["expiry_rate"]) == pytest.approx(0.5)

    ops = read_csv(out / "tables" / "delayed_operations.csv")
    fetch_ops = pick(ops, kind="DelayedFetch")
    assert (fetch_ops["created"], fetch_ops["completed"], fetch_ops["expired"]) == ("4", "3", "1")
    assert float(fetch_ops["expiry_rate"]) == pytest.approx(0.25)
    assert float(fetch_ops["max_wait_ms"]) == 4.0
    assert not (out / "tables" / "schedule_lag.csv").exists()  # no replay results given
    # main joined the module's session and left it running.
    assert spark.range(1).count() == 1


def test_capture_requests_keep_their_bytes_in_spark(spark: SparkSession, tmp_path: Path) -> None:
    from spark_jobs.captures import read_capture_requests_df

    requests = write_capture(tmp_path)
    rows = read_capture_requests_df(spark, tmp_path).orderBy("sequence").collect()
    assert [bytes(r["request"]) for r in rows] == [r.request for r in requests]
    assert [r["sequence"] for r in rows] == list(range(20))
    assert rows[0]["error_codes"] == [0, 0]
