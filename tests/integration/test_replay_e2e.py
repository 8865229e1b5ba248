"""Capture -> workload -> replay in Spark against a fresh cluster -> report, end to end.

Both clusters run ``minikafka serve --brokers 3`` in child processes (replication, so an
acks=all produce waits in the Produce purgatory), the workload runs through
``minikafka workload`` and the jobs through their ``main`` in this test's SparkSession.

Replay errors expected, and only these: follower fetches (inter-broker requests with a
replica id) are not replayed; the new cluster's own followers fetch for themselves.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from protocol.capture import CaptureRequest, DelayedOperationEvent
from protocol.capture_files import read_capture

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark
pytest.importorskip("pyspark")

WORKLOAD_S = 9  # one heartbeat expiry (session timeout 6 s) fits
UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION = 25, 22


class Cluster:
    """``minikafka serve`` in a child process; stderr to a file (never a full pipe)."""

    def __init__(self, log: Path, *args: str) -> None:
        self.log = open(log, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "broker",
                "--log-level",
                "WARNING",
                "serve",
                "--port",
                "0",
                "--brokers",
                "3",
                "--override",
                "group.initial.rebalance.delay.ms=0",
                *args,
            ],
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if "bootstrap=" not in line:
            self.stop()
            raise RuntimeError(f"cluster did not start: {line!r}, see {log}")
        self.bootstrap = line.split("bootstrap=", 1)[1].split()[0]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def test_capture_replay_report(spark: SparkSession, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    from spark_jobs import replay, report

    capture_dir = tmp_path / "capture"
    captured = Cluster(tmp_path / "capture-broker.log", "--capture-dir", str(capture_dir))
    try:
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "broker",
                "--log-level",
                "ERROR",
                "workload",
                "--bootstrap",
                captured.bootstrap,
                "--duration",
                str(WORKLOAD_S),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert run.returncode == 0, run.stderr
    finally:
        captured.stop()

    records = list(read_capture(capture_dir))
    requests = [r for r in records if isinstance(r, CaptureRequest)]
    events = [r for r in records if isinstance(r, DelayedOperationEvent)]
    heartbeat_expiries = [
        e for e in events if e.kind == "DelayedHeartbeat" and e.event == "expired"
    ]
    assert heartbeat_expiries, "the dying member's session should have expired"
    assert {e.purgatory for e in events} == {"Produce", "Fetch", "Rebalance", "Heartbeat"}

    fresh = Cluster(tmp_path / "replay-broker.log")
    results_dir = tmp_path / "results"
    try:
        assert (
            replay.main(
                [
                    "--capture",
                    str(capture_dir),
                    "--bootstrap",
                    fresh.bootstrap,
                    "--out",
                    str(results_dir),
                ]
            )
            == 0
        )
    finally:
        fresh.stop()
    rows: list[dict[str, Any]] = pq.read_table(results_dir).to_pylist()

    # Every captured request has its row: counts per API are equal.
    assert collections.Counter(r["api_name"] for r in rows) == collections.Counter(
        r.api_name for r in requests
    )
    # The only replay errors are the documented skips of follower fetches.
    errors = collections.Counter(r["replay_error"] for r in rows if r["replay_error"])
    assert set(errors) <= {"skipped: inter-broker request (replica id >= 0)"}, errors
    assert errors  # 3 brokers: followers did fetch
    replayed = [r for r in rows if r["replay_error"] is None]
    assert all(r["response_ms"] is not None for r in replayed if r["api_name"] != "Produce")

    # Per-connection order: sent in sequence order, each request exactly once.
    by_conn: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for r in replayed:
        by_conn[r["connection_id"]].append(r)
    for conn_rows in by_conn.values():
        conn_rows.sort(key=lambda r: r["sequence"])
        sends = [r["actual_send_ms"] for r in conn_rows]
        assert sends == sorted(sends)

    # The group sessions replay: rewritten member ids and generations are accepted.
    group_apis = {"JoinGroup", "SyncGroup", "Heartbeat", "OffsetCommit", "LeaveGroup"}
    for r in replayed:
        if r["api_name"] in group_apis:
            assert UNKNOWN_MEMBER_ID not in r["error_codes"], r
            assert ILLEGAL_GENERATION not in r["error_codes"], r
    # Each group's session completes on the fresh cluster: a successful SyncGroup.
    synced = {
        r["connection_id"]
        for r in replayed
        if r["api_name"] == "SyncGroup" and r["error_codes"] == [0]
    }
    joined = {r["connection_id"] for r in replayed if r["api_name"] == "JoinGroup"}
    assert joined and joined == synced

    report_dir = tmp_path / "report"
    assert (
        report.main(
            ["--results", str(results_dir), "--capture", str(capture_dir), "--out", str(report_dir)]
        )
        == 0
    )
    tables = report_dir / "tables"
    by_purgatory = json.loads((tables / "latency_by_purgatory.json").read_text())
    kinds = {(row["purgatory"], row["source"]) for row in by_purgatory}
    for purgatory in ("Produce", "Fetch", "Rebalance"):
        assert (purgatory, "captured") in kinds and (purgatory, "replayed") in kinds
    # Remote time: acks=all produces wait for followers, long polls wait for data.
    produce_remote = [r["captured_remote_ms"] for r in rows if r["purgatory"] == "Produce"]
    fetch_remote = [r["captured_remote_ms"] for r in rows if r["purgatory"] == "Fetch"]
    assert max(produce_remote) > 0 and max(fetch_remote) > 0
    delayed = {
        row["kind"]: row for row in json.loads((tables / "delayed_operations.json").read_text())
    }
    assert delayed["DelayedHeartbeat"]["expired"] >= 1
    assert set(delayed) >= {"DelayedProduce", "DelayedFetch", "DelayedJoin", "DelayedHeartbeat"}
