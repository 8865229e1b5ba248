"""The report and the comparison on Spark local mode, on small synthetic inputs.

Replay results are written with pyarrow (as any Parquet writer could; a Spark write
job would only cost test time) and the targets' captures with ``CaptureWriter``. The
SparkSession is the suite's one session-scoped fixture (``tests/conftest.py``).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from protocol.capture import CaptureRequest, ClientTelemetryPush, TelemetryPoint
from protocol.capture_files import CaptureWriter
from spark_jobs.traffic import SKIP_INTER_BROKER
from tests.helpers.captures import make_event, make_request

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark
pytest.importorskip("pyspark")

DATA = Path(__file__).resolve().parents[1] / "data"
CAPTURED_CONN = "127.0.0.1:9092-127.0.0.1:5000-0"
TARGET_CONN = "127.0.0.1:19092-127.0.0.1:6000"
T0 = 1_714_564_800_000_000


def result_row(**fields: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "api_key": 0,
        "api_name": "Produce",
        "api_version": 9,
        "connection_id": CAPTURED_CONN,
        "sequence": 0,
        "purgatory": None,
        "purgatory_outcome": None,
        "captured_total_ms": 1.0,
        "captured_remote_ms": 0.0,
        "planned_send_ms": 0.0,
        "actual_send_ms": 1.0,
        "response_ms": 2.0,
        "error_codes": [0],
        "replay_error": None,
        "broker_id": 0,
        "traffic": "client",
        "replay_skip": None,
        "captured_request_queue_ms": 0.1,
        "captured_local_ms": 0.2,
        "captured_response_queue_ms": 0.0,
        "captured_send_ms": 0.1,
        "replay_broker_id": 0,
        "replay_connection": TARGET_CONN,
        "replay_correlation_id": None,
        "captured_correlation_id": 7,
        "run_kind": "real-time",
        "client_id": "producer-1",
        "principal": None,
        "throttle_time_ms": 0,
    }
    row.update(fields)
    return row


def synthetic_results() -> list[dict[str, Any]]:
    """100 client Produce (captured i+1 ms), 10 client Fetch (half expired when
    captured), 20 follower Fetch (skipped), one Metadata that failed, and one Produce
    the target never captured."""
    rows = []
    for i in range(100):
        rows.append(
            result_row(
                sequence=i,
                captured_total_ms=float(i + 1),
                captured_remote_ms=float(i) * 0.5,
                purgatory="Produce",
                purgatory_outcome="completed",
                planned_send_ms=float(i * 10),
                actual_send_ms=float(i * 10 + 1),
                replay_correlation_id=i,
            )
        )
    for i in range(10):
        expired = i < 5
        rows.append(
            result_row(
                api_key=1,
                api_name="Fetch",
                sequence=100 + i,
                purgatory="Fetch",
                purgatory_outcome="expired" if expired else "completed",
                captured_total_ms=500.0 if expired else 20.0,
                captured_remote_ms=499.0 if expired else 19.0,
                replay_correlation_id=100 + i,
            )
        )
    for i in range(20):
        rows.append(
            result_row(
                api_key=1,
                api_name="Fetch",
                connection_id="127.0.0.1:9092-127.0.0.1:7000-3",
                sequence=i,
                captured_total_ms=500.0,
                traffic="inter-broker",
                replay_skip=SKIP_INTER_BROKER,
                actual_send_ms=None,
                response_ms=None,
                replay_broker_id=None,
                replay_connection=None,
            )
        )
    rows.append(result_row(api_key=3, api_name="Metadata", sequence=200, replay_error="boom"))
    rows.append(result_row(sequence=201, replay_correlation_id=999))  # not in the target
    return rows


def write_results(path: Path, rows: list[dict[str, Any]]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.sql.types import ArrayType, DoubleType, IntegerType, LongType, StringType

    from spark_jobs.schema import RESULT_SCHEMA

    arrow = {IntegerType(): pa.int32(), LongType(): pa.int64()}
    arrow |= {DoubleType(): pa.float64(), StringType(): pa.string()}
    arrow |= {ArrayType(IntegerType(), containsNull=False): pa.list_(pa.int32())}
    path.mkdir(parents=True)
    table = pa.table(
        {
            f.name: pa.array([r[f.name] for r in rows], type=arrow[f.dataType])
            for f in RESULT_SCHEMA.fields
        }
    )
    pq.write_table(table, path / "part-0.parquet")


def write_target_capture(directory: Path, factor: float) -> None:
    """The target's capture: each replayed client request, ``factor`` times its captured
    latency (Fetch: all completed at 20 ms), and 15 follower fetches of its own."""
    with CaptureWriter(directory, broker_id=0) as writer:
        for i in range(100):
            writer.write(
                make_request(
                    broker_id=0,
                    connection_id=f"{TARGET_CONN}-4",
                    sequence=i,
                    correlation_id=i,
                    total_time_ms=factor * (i + 1),
                    remote_time_ms=factor * i * 0.5,
                    received_unix_us=T0 + i * 10_000,
                )
            )
        for i in range(10):
            writer.write(
                make_request(
                    broker_id=0,
                    connection_id=f"{TARGET_CONN}-4",
                    api_key=1,
                    api_name="Fetch",
                    sequence=100 + i,
                    correlation_id=100 + i,
                    total_time_ms=20.0,
                    purgatory="Fetch",
                    purgatory_outcome="completed",
                    received_unix_us=T0 + 1_000_000 + i,
                )
            )
        for i in range(15):
            writer.write(
                make_request(
                    broker_id=0,
                    connection_id="127.0.0.1:19092-127.0.0.1:6100-1",
                    api_key=1,
                    api_name="Fetch",
                    sequence=i,
                    correlation_id=i,
                    replica_id=1,
                    total_time_ms=100.0,
                    purgatory="Fetch",
                    purgatory_outcome="expired",
                    received_unix_us=T0 + i,
                )
            )
        writer.write(make_event(operation_id=1, event="created", at_monotonic_us=0))
        writer.write(make_event(operation_id=1, event="expired", at_monotonic_us=2000))


def write_replay(tmp: Path, name: str, factor: float, config: dict[str, str]) -> Path:
    from spark_jobs.run_info import ReplayRun, default_label

    results = tmp / name
    write_results(results, synthetic_results())
    write_target_capture(results / "_target_capture", factor)
    ReplayRun(
        label=default_label(config),
        capture=str(tmp / "capture"),
        target_brokers=3,
        target_started=True,
        target_config=config,
        target_capture=str(results / "_target_capture"),
        warnings=["--speed 2: a warning the page shows"],
    ).write(results)
    return results


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def by_key(path: Path) -> dict[str, dict[str, Any]]:
    return {row["key"]: row for row in json.loads(path.read_text())}


def test_report_puts_both_sides_of_the_same_client_requests_side_by_side(
    spark: SparkSession, tmp_path: Path
) -> None:
    from spark_jobs.report import run_report

    results = write_replay(tmp_path, "results", 1.1, {})
    out = tmp_path / "report"
    output = run_report(spark, out, results=results)
    assert output.sides == ["captured", "replayed"] and output.measure == "broker"

    api = by_key(out / "tables" / "fidelity_by_api.json")
    produce = api["Produce"]
    # Like for like: the Produce the target never captured is on neither side.
    assert produce["captured__count"] == produce["replayed__count"] == 100
    assert produce["captured__p50"] == pytest.approx(50, abs=1)
    assert produce["replayed__r_p50"] == pytest.approx(1.1, abs=0.03)
    assert produce["replayed__client_p50"] == 2.0  # what the replay client saw
    fetch = api["Fetch"]
    # No follower fetch in the client row, on either side.
    assert fetch["captured__count"] == fetch["replayed__count"] == 10
    assert fetch["captured__expiry_rate"] == 0.5 and fetch["replayed__expiry_rate"] == 0.0
    assert "Metadata" not in api  # it failed: not compared

    purgatory = by_key(out / "tables" / "fidelity_by_purgatory.json")
    assert purgatory["Fetch"]["kind"] == "DelayedFetch"
    assert purgatory["Produce"]["captured__count"] == purgatory["Produce"]["replayed__count"] == 100
    inter = by_key(out / "tables" / "inter_broker.json")["Fetch"]
    assert inter["captured cluster's own__count"] == 20
    assert inter["target cluster's own__count"] == 15
    assert read_csv(out / "tables" / "replay_skips.csv") == [
        {"api_name": "Fetch", "reason": SKIP_INTER_BROKER, "count": "20"}
    ]
    assert read_csv(out / "tables" / "replay_errors.csv") == [
        {"api_name": "Metadata", "reason": "boom", "count": "1"}
    ]
    breakdown = {
        (r["api_name"], r["side"]): r
        for r in json.loads((out / "tables" / "breakdown.json").read_text())
    }
    assert breakdown[("Produce", "captured")]["mean_request_queue_ms"] == pytest.approx(0.1)
    ops = json.loads((out / "tables" / "delayed_operations.json").read_text())
    assert [(o["kind"], o["side"], o["expired"]) for o in ops] == [("DelayedFetch", "replayed", 1)]

    for png in ("latency_cdf.png", "breakdown.png", "latency_over_time.png"):
        data = (out / "plots" / png).read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 5000
    page = (out / "index.html").read_text()
    for text in (
        "Fidelity per API",
        "Kafka&#39;s defaults",  # autoescaped
        "a warning the page shows",
        "table.sortable",
    ):
        assert text in page
    assert "No row mixes client and inter-broker traffic" in page


def test_without_the_targets_capture_the_replayed_side_is_the_clients(
    spark: SparkSession, tmp_path: Path
) -> None:
    from spark_jobs.report import run_report

    results = tmp_path / "old-results"  # an older replay: no _replay.json, no capture
    write_results(results, synthetic_results())
    output = run_report(spark, tmp_path / "report", results=results)
    assert output.measure == "client"
    produce = by_key(tmp_path / "report" / "tables" / "fidelity_by_api.json")["Produce"]
    assert produce["captured__count"] == produce["replayed__count"] == 101
    assert produce["replayed__p50"] == 2.0 and produce["replayed__expiry_rate"] is None
    assert "send-to-response" in (tmp_path / "report" / "index.html").read_text()


def test_compare_puts_two_variants_side_by_side_with_their_configs(
    spark: SparkSession, tmp_path: Path
) -> None:
    from spark_jobs.compare import main

    base = write_replay(tmp_path, "base", 1.0, {})
    slow = write_replay(tmp_path, "slow", 2.0, {"replica.fetch.wait.max.ms": "100"})
    out = tmp_path / "compare"
    assert main([str(base), str(slow), "--out", str(out)]) == 0
    variants = json.loads((out / "tables" / "variants.json").read_text())
    assert [(v["label"], v["config"]) for v in variants] == [
        ("default", "Kafka's defaults"),
        ("replica.fetch.wait.max.ms=100", "replica.fetch.wait.max.ms=100"),
    ]
    produce = by_key(out / "tables" / "compare_by_api.json")["Produce"]
    label = "replica.fetch.wait.max.ms=100"
    assert produce[f"{label}__r_p50"] == pytest.approx(2.0, abs=0.05)
    assert produce[f"{label}__d_p50"] == pytest.approx(produce["default__p50"], abs=1)
    assert produce["captured__count"] == 100  # the capture, for reference
    inter = by_key(out / "tables" / "compare_inter_broker.json")["Fetch"]
    assert inter["default__count"] == inter[f"{label}__count"] == 15
    page = (out / "index.html").read_text()
    assert "Baseline: <strong>default</strong>" in page and label in page
    assert (out / "plots" / "compare_cdf.png").stat().st_size > 5000
    # main joined the session and left it running.
    assert spark.range(1).count() == 1


def write_capture(directory: Path) -> list[CaptureRequest]:
    requests = [
        make_request(
            sequence=i,
            correlation_id=i,
            total_time_ms=float(i + 1),
            received_unix_us=T0 + i * 100_000,
        )
        for i in range(20)
    ]
    requests.append(make_request(api_key=1, api_name="Fetch", sequence=20, replica_id=2))
    with CaptureWriter(directory, broker_id=1) as writer:
        for r in requests:
            writer.write(r)
        for op in range(4):
            writer.write(make_event(operation_id=op, event="created", at_monotonic_us=0))
            end = "expired" if op == 0 else "completed"
            writer.write(make_event(operation_id=op, event=end, at_monotonic_us=(op + 1) * 1000))
        for avg, peak in ((20.0, 30.0), (0.0, 0.0)):  # the second push saw no request
            writer.write(
                telemetry_push("org.apache.kafka.producer.node.request.latency", avg, peak)
            )
        writer.write(
            telemetry_push(
                "org.apache.kafka.consumer.coordinator.rebalance.latency", 3000.0, 3000.0
            )
        )
    return requests


def telemetry_push(metric: str, avg: float, peak: float) -> ClientTelemetryPush:
    """A KIP-714 push of one latency metric's average and maximum, as librdkafka's."""
    return ClientTelemetryPush(
        broker_id=1,
        connection_id=CAPTURED_CONN,
        client_id="producer-1",
        client_instance_id="4ab15d58-8afd-419d-b550-dea9778cc064",
        client_software_name="librdkafka",
        received_unix_us=T0,
        received_monotonic_us=0,
        points=[
            TelemetryPoint(
                name=f"{metric}.avg", kind="gauge", value=avg, attributes={"node.id": "1"}
            ),
            TelemetryPoint(
                name=f"{metric}.max", kind="gauge", value=peak, attributes={"node.id": "1"}
            ),
        ],
    )


def test_report_main_from_capture_and_request_logs(spark: SparkSession, tmp_path: Path) -> None:
    from spark_jobs.report import main

    capture = tmp_path / "captures"
    write_capture(capture)
    out = tmp_path / "report"
    argv = ["--capture", str(capture), "--out", str(out)]
    argv += ["--request-log", str(DATA / "kafka-request-log-json.sample.log")]
    argv += ["--request-log", str(DATA / "kafka-request-log-text.sample.log")]
    assert main(argv) == 0

    api = by_key(out / "tables" / "fidelity_by_api.json")
    assert api["Produce"]["capture__count"] == 20  # the follower fetch is not a client's
    assert api["Produce"]["capture__p50"] == pytest.approx(10, abs=1)
    assert api["JoinGroup"]["request_log__p999"] == 3001.5
    purgatory = by_key(out / "tables" / "fidelity_by_purgatory.json")
    # Client fetches only: the logs' follower fetches (replica id >= 0) are not clients'.
    # Of the three client fetches, two expired.
    assert purgatory["Fetch"]["request_log__expiry_rate"] == pytest.approx(2 / 3)
    ops = json.loads((out / "tables" / "delayed_operations.json").read_text())
    fetch_ops = next(o for o in ops if o["kind"] == "DelayedFetch")
    assert (fetch_ops["created"], fetch_ops["completed"], fetch_ops["expired"]) == (4, 3, 1)
    assert fetch_ops["expiry_rate"] == pytest.approx(0.25) and fetch_ops["max_wait_ms"] == 4.0
    assert not (out / "tables" / "schedule_lag.csv").exists()  # no replay results given
    # KIP-714: the producer's own latency beside the broker's TotalTimeMs of its Produce
    client = {
        row["api"]: row for row in json.loads((out / "tables" / "client_latency.json").read_text())
    }
    produce = client["Produce"]
    assert (produce["client_pushes"], produce["client_avg"], produce["client_max"]) == (
        1,
        20.0,
        30.0,
    )
    assert produce["broker_count"] == 20 and produce["broker_max"] == 20.0
    assert produce["broker_p50"] == pytest.approx(10, abs=1)
    assert (
        client["rebalance"]["client_max"] == 3000.0 and client["rebalance"]["broker_count"] is None
    )
    assert "Client-side latency beside the broker" in (out / "index.html").read_text()


def test_capture_requests_keep_their_bytes_in_spark(spark: SparkSession, tmp_path: Path) -> None:
    from spark_jobs.captures import read_capture_requests_df

    requests = write_capture(tmp_path)
    rows = read_capture_requests_df(spark, tmp_path).orderBy("sequence").collect()
    assert [bytes(r["request"]) for r in rows] == [r.request for r in requests]
    assert [r["replica_id"] for r in rows][-1] == 2
    assert rows[0]["error_codes"] == [0, 0]


def test_traffic_column_tells_a_leaders_add_partitions_to_txn_as_traffic_of_does(
    spark: SparkSession,
) -> None:
    """AddPartitionsToTxn v4+ is the brokers' (KIP-890), v3 and below the clients'; a
    request log's row without a version counts as a client's, as in ``traffic_of``."""
    from spark_jobs.traffic import traffic_column, traffic_of

    cases = [
        (24, None, 5),
        (24, None, 4),
        (24, None, 3),
        (24, None, None),
        (1, 2, 17),
        (0, None, 12),
    ]
    frame = spark.createDataFrame(cases, "api_key int, replica_id int, api_version int")
    got = [r["traffic"] for r in frame.select(traffic_column().alias("traffic")).collect()]
    assert got == [traffic_of(*case) for case in cases]
    assert got == ["inter-broker", "inter-broker", "client", "client", "inter-broker", "client"]
