"""Capture -> workload -> replay in Spark against a fresh cluster -> report, end to end.

The workload runs through ``minikafka workload`` and the jobs through their ``main`` in
this test's SparkSession.

The capturing cluster runs ``minikafka serve --brokers 3`` in a child process
(replication, so an acks=all produce waits in the Produce purgatory); the replay starts
its own fresh 3-broker target (``--target-brokers 3``, capturing). No replay errors are
expected; follower fetches (inter-broker requests with a replica id) are skipped, not
failed: the new cluster's own followers fetch for themselves.
"""

from __future__ import annotations

import collections
import json
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from protocol.capture import CaptureRequest, DelayedOperationEvent
from protocol.capture_files import read_capture
from testkit.broker_process import BrokerProcess

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark
pytest.importorskip("pyspark")

WORKLOAD_S = 9  # one heartbeat expiry (session timeout 6 s) fits
UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION = 25, 22


def is_follower(request: CaptureRequest) -> bool:
    return request.replica_id is not None and request.replica_id >= 0


class Cluster:
    """``minikafka serve --brokers 3`` in a child process; stderr to a file (never a full
    pipe)."""

    def __init__(self, log: Path, *args: str) -> None:
        self.log = open(log, "w")  # noqa: SIM115 - closed in stop()
        try:
            self.broker = BrokerProcess(
                ["--brokers", "3", "--override", "group.initial.rebalance.delay.ms=0", *args],
                stderr=self.log,
                log_level="WARNING",
            )
        except RuntimeError as exc:
            self.log.close()
            raise RuntimeError(f"cluster did not start: {exc}, see {log}") from exc
        self.bootstrap = self.broker.bootstrap

    def stop(self) -> None:
        if self.broker.proc.poll() is None:
            self.broker.terminate()
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
                "minikafka",
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

    # The replay starts the fresh cluster itself (capturing, so the report has both
    # sides' purgatory outcomes) and stops it when done.
    results_dir = tmp_path / "results"
    argv = ["--capture", str(capture_dir), "--target-brokers", "3", "--out", str(results_dir)]
    argv += ["--target-override", "group.initial.rebalance.delay.ms=0"]
    assert replay.main(argv) == 0
    rows: list[dict[str, Any]] = pq.read_table(results_dir).to_pylist()
    run = json.loads((results_dir / "_replay.json").read_text())
    assert run["target_started"] and run["target_brokers"] == 3
    assert run["target_config"] == {"group.initial.rebalance.delay.ms": "0"}
    assert run["label"] == "group.initial.rebalance.delay.ms=0"

    # Every captured request has its row: counts per API are equal.
    assert collections.Counter(r["api_name"] for r in rows) == collections.Counter(
        r.api_name for r in requests
    )
    # Follower fetches are skipped on purpose (not errors), and only they are.
    followers = {(r.connection_id, r.sequence) for r in requests if is_follower(r)}
    assert followers  # 3 brokers: followers did fetch
    skipped = {(r["connection_id"], r["sequence"]) for r in rows if r["replay_skip"]}
    assert skipped == followers
    assert not [r for r in rows if r["replay_error"]], "no replay errors"
    assert {r["traffic"] for r in rows if r["replay_skip"]} == {"inter-broker"}
    replayed = [r for r in rows if r["replay_skip"] is None]
    assert all(r["response_ms"] is not None for r in replayed if r["api_name"] != "Produce")
    assert all(r["replay_correlation_id"] is not None for r in replayed)

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
    assert report.main(["--results", str(results_dir), "--out", str(report_dir)]) == 0
    tables = report_dir / "tables"
    by_api = {row["key"]: row for row in json.loads((tables / "fidelity_by_api.json").read_text())}
    client_fetches = sum(1 for r in requests if r.api_name == "Fetch" and not is_follower(r))
    # Like for like: the client Fetch row holds client fetches only, on both sides.
    assert by_api["Fetch"]["captured__count"] == by_api["Fetch"]["replayed__count"]
    assert by_api["Fetch"]["captured__count"] <= client_fetches
    by_purgatory = {
        row["key"]: row for row in json.loads((tables / "fidelity_by_purgatory.json").read_text())
    }
    # Both sides' outcomes: the target's capture joined to the replayed requests.
    for purgatory in ("Produce", "Fetch", "Rebalance"):
        row = by_purgatory[purgatory]
        assert row["captured__count"] and row["replayed__count"], purgatory
        assert row["replayed__expiry_rate"] is not None, purgatory
    # Remote time: acks=all produces wait for followers, long polls wait for data.
    produce_remote = [r["captured_remote_ms"] for r in rows if r["purgatory"] == "Produce"]
    fetch_remote = [r["captured_remote_ms"] for r in rows if r["purgatory"] == "Fetch"]
    assert max(produce_remote) > 0 and max(fetch_remote) > 0
    ops = json.loads((tables / "delayed_operations.json").read_text())
    kinds = {(o["kind"], o["side"]) for o in ops}
    for kind in ("DelayedProduce", "DelayedFetch", "DelayedJoin", "DelayedHeartbeat"):
        assert (kind, "captured") in kinds and (kind, "replayed") in kinds, kind
    heartbeats = [o for o in ops if o["kind"] == "DelayedHeartbeat" and o["side"] == "captured"]
    assert sum(o["expired"] for o in heartbeats) >= 1
    assert {o["traffic"] for o in ops if o["kind"] == "DelayedFetch"} == {"client", "inter-broker"}
