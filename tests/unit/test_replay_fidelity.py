"""Like for like, the replay's mapping, speed warnings, progress, run metadata, the tables
and pages: everything of the fidelity report that needs no JVM."""

from __future__ import annotations

import asyncio
import io
import socket
import struct
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from broker.observability.capture import replica_id as broker_replica_id
from protocol.builders import request_builder, response_builder
from protocol.codec import decode_request, encode_request, encode_response, parse_request_header
from spark_jobs import fidelity, replay, speed, tables
from spark_jobs.compare import variant_labels
from spark_jobs.progress import ProgressBar, ProgressMonitor, ProgressReporter, format_eta
from spark_jobs.render import Column, Table, fmt, render_page
from spark_jobs.replay_client import ReplaySchedule, replay_rows
from spark_jobs.run_info import ReplayRun, default_label, read_run
from spark_jobs.schema import RESULT_SCHEMA
from spark_jobs.target import TargetCluster, parse_override
from spark_jobs.traffic import (
    CLIENT,
    INTER_BROKER,
    SKIP_INTER_BROKER,
    is_inter_broker,
    replica_id_of_frame,
)

FETCH, JOIN_GROUP, API_VERSIONS = 1, 11, 18


def fetch_frame(replica_id: int, max_wait_ms: int = 500, version: int = 12) -> bytes:
    b = request_builder(FETCH, version)
    request = b.FetchRequest(
        replica_id=replica_id,
        replica_state=b.ReplicaState(replica_id=replica_id, replica_epoch=-1)
        if version >= 15
        else None,
        max_wait=max_wait_ms,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(),
        forgotten_topics_data=(),
        rack_id="",
    )
    return encode_request(FETCH, version, 3, "c", request)[4:]


def join_frame(session_ms: int) -> bytes:
    request = request_builder(JOIN_GROUP, 5).JoinGroupRequest(
        group_id="g",
        session_timeout=timedelta(milliseconds=session_ms),
        rebalance_timeout=timedelta(milliseconds=2 * session_ms),
        member_id="",
        group_instance_id=None,
        protocol_type="consumer",
        protocols=(),
    )
    return encode_request(JOIN_GROUP, 5, 4, "c", request)[4:]


# -- like for like --------------------------------------------------------------------


def test_follower_requests_are_inter_broker_and_clients_are_not() -> None:
    assert is_inter_broker(FETCH, 2) and is_inter_broker(FETCH, 0)
    assert not is_inter_broker(FETCH, -1) and not is_inter_broker(FETCH, None)
    assert is_inter_broker(27, None)  # WriteTxnMarkers: only brokers send it
    assert not is_inter_broker(0, None)  # Produce


@pytest.mark.parametrize("version", [12, 15])
def test_replica_id_is_read_from_old_captures_bytes(version: int) -> None:
    assert replica_id_of_frame(FETCH, fetch_frame(1, version=version)) == 1
    assert replica_id_of_frame(FETCH, fetch_frame(-1, version=version)) == -1
    assert replica_id_of_frame(0, b"\x00") is None  # Produce carries none
    assert replica_id_of_frame(FETCH, b"garbage") is None
    # the broker's capture writes the same value from the decoded request
    header, offset = parse_request_header(fetch_frame(2, version=version))
    assert broker_replica_id(decode_request(header, fetch_frame(2, version=version), offset)) == 2


class _Broker:
    """Answers ApiVersions; remembers each connection as Kafka names it (local-remote)."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.correlations: list[int] = []

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        local, remote = writer.get_extra_info("sockname"), writer.get_extra_info("peername")
        self.names.append(f"{local[0]}:{local[1]}-{remote[0]}:{remote[1]}")
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                header, _ = parse_request_header(await reader.readexactly(size))
                self.correlations.append(header.correlation_id)
                body = response_builder(API_VERSIONS, 0).ApiVersionsResponse(
                    error_code=0, api_keys=()
                )
                writer.write(encode_response(API_VERSIONS, 0, header.correlation_id, body))
        except asyncio.IncompleteReadError:
            writer.close()


def _row(
    connection: str, sequence: int, frame: bytes, api_key: int, **extra: Any
) -> dict[str, Any]:
    return {
        "broker_id": 0,
        "connection_id": connection,
        "sequence": sequence,
        "api_key": api_key,
        "api_name": {FETCH: "Fetch", API_VERSIONS: "ApiVersions"}[api_key],
        "api_version": 12 if api_key == FETCH else 0,
        "client_id": connection,
        "request": frame,
        "received_unix_us": sequence * 1000,
        "total_time_ms": 0.5,
        "remote_time_ms": 0.0,
        "purgatory": None,
        "purgatory_outcome": None,
        "request_queue_time_ms": 0.1,
        "local_time_ms": 0.2,
        "response_queue_time_ms": 0.0,
        "response_send_time_ms": 0.2,
        "correlation_id": 40 + sequence,
        **extra,
    }


async def test_follower_traffic_is_skipped_not_failed_and_each_send_is_mapped() -> None:
    broker = _Broker()
    server = await asyncio.start_server(broker.serve, "127.0.0.1", 0)
    versions = encode_request(
        API_VERSIONS, 0, 9, "c", request_builder(API_VERSIONS, 0).ApiVersionsRequest()
    )[4:]
    rows = [
        _row("follower", 0, fetch_frame(1), FETCH, replica_id=1),
        _row("follower", 1, fetch_frame(1), FETCH, replica_id=None),  # old capture: decoded
        _row("client", 0, versions, API_VERSIONS),
        _row("client", 1, versions, API_VERSIONS),
    ]
    schedule = ReplaySchedule(
        addresses={0: server.sockets[0].getsockname()[:2]},
        start_unix_s=time.time(),
        first_received_us=0,
        response_timeout_s=10.0,
    )
    try:
        results = await asyncio.to_thread(lambda: list(replay_rows(rows, schedule)))
    finally:
        server.close()
    named = [dict(zip(RESULT_SCHEMA.fieldNames(), r, strict=True)) for r in results]
    followers = [r for r in named if r["connection_id"] == "follower"]
    assert [r["replay_skip"] for r in followers] == [SKIP_INTER_BROKER] * 2
    assert all(r["replay_error"] is None and r["traffic"] == INTER_BROKER for r in followers)
    assert all(r["replay_correlation_id"] is None for r in followers)
    clients = [r for r in named if r["connection_id"] == "client"]
    assert [r["traffic"] for r in clients] == [CLIENT, CLIENT]
    # The key of the target's own capture record: its connection id (less the index)
    # and the correlation id the replay gave the request.
    assert broker.names == [clients[0]["replay_connection"]]  # no connection for followers
    assert [r["replay_correlation_id"] for r in clients] == broker.correlations == [0, 1]
    assert {r["replay_broker_id"] for r in clients} == {0}
    assert clients[0]["captured_request_queue_ms"] == 0.1
    assert [r["captured_correlation_id"] for r in clients] == [40, 41]  # the mapping


# -- speed ------------------------------------------------------------------------------


def test_captured_waits_come_from_client_requests_only() -> None:
    rows = [
        {"api_key": FETCH, "request": fetch_frame(-1, 500), "replica_id": -1},
        {"api_key": FETCH, "request": fetch_frame(-1, 100), "replica_id": -1},
        {"api_key": FETCH, "request": fetch_frame(2, 9000), "replica_id": 2},  # a follower
        {"api_key": JOIN_GROUP, "request": join_frame(6000), "replica_id": None},
        {"api_key": JOIN_GROUP, "request": b"broken", "replica_id": None},
    ]
    waits = speed.merge_waits(speed.captured_waits(rows))
    assert waits == {
        speed.FETCH_MAX_WAIT: (100, 500),
        speed.SESSION_TIMEOUT: (6000, 6000),
        speed.REBALANCE_TIMEOUT: (12000, 12000),
    }


def test_a_wait_that_cannot_scale_is_warned_about() -> None:
    waits = {speed.FETCH_MAX_WAIT: (500, 500), speed.SESSION_TIMEOUT: (6000, 6000)}
    assert speed.speed_warnings(1.0, waits, {}) == []
    faster = speed.speed_warnings(2.0, waits, {speed.INITIAL_DELAY: "3000"})
    text = "\n".join(faster)
    assert all(w.startswith("--speed 2: ") for w in faster)
    assert "500 ms (max_wait_ms)" in text and "planned 250 ms" in text
    assert "session timeouts (6000 ms)" in text and "parks 3000 ms" in text
    slower = "\n".join(speed.speed_warnings(0.5, waits, {speed.INITIAL_DELAY: "0"}))
    assert "2x wider" in slower and "group.initial" not in slower
    assert "client's schedule only" in speed.SCALED


# -- progress ---------------------------------------------------------------------------


def test_progress_bar_and_eta() -> None:
    assert (
        format_eta(None) == "--:--" and format_eta(75.4) == "1:15" and format_eta(3725) == "1:02:05"
    )
    out = io.StringIO()
    bar = ProgressBar(200, out, tty=False, log_every_s=1e9, clock=lambda: 0.0)
    printed = [bar.update(n, 30.0) for n in (0, 5, 19, 20, 21, 100, 200)]
    assert printed[1] is None and printed[2] is None  # same tenth: no new line
    assert printed[3] == f"replay [{'#' * 3}{'-' * 27}] 20/200 requests  10% ETA 0:30"
    assert out.getvalue().count("\n") == 4  # 0, 20, 100 and 200 requests
    tty = io.StringIO()
    live = ProgressBar(10, tty, tty=True)
    live.update(5, None)
    live.finish()
    assert tty.getvalue().startswith("\rreplay [") and tty.getvalue().endswith("ETA --:--\n")


def test_tasks_report_progress_to_the_driver_over_udp() -> None:
    monitor = ProgressMonitor(None, "group", total=5, span_s=10.0, stream=io.StringIO())
    reporter = ProgressReporter(monitor.address, task=3, total=5, interval_s=0.0)
    start = time.time()
    reporter.started(start)
    for _ in range(5):
        reporter.tick()
    reporter.close()
    assert monitor.receive_available() >= 2  # at least "started" and the last count
    monitor.stop()
    assert monitor.done == 5
    assert monitor.eta_s(start + 4.0) == pytest.approx(6.0)


def test_a_reporter_without_a_driver_is_silent() -> None:
    reporter = ProgressReporter(None, task=0, total=2)
    reporter.tick()
    reporter.close()
    assert reporter.done == 1


# -- tables, pages, metadata ------------------------------------------------------------


def _stats(side: str, key: str, p50: float, count: int = 10) -> dict[str, Any]:
    return {
        "key": key,
        "side": side,
        "count": count,
        "p50": p50,
        "p99": 2 * p50,
        "p999": 3 * p50,
        "expiry_rate": None,
        "parked": 0,
        "parked_p50": None,
        **{f"mean_{c}": 1.0 for c in fidelity.BREAKDOWN},
    }


def test_pivot_and_fidelity_table_mark_what_moved() -> None:
    stats = [
        _stats("a", "Produce", 10.0),
        _stats("b", "Produce", 10.5),
        _stats("c", "Produce", 20.0),
    ]
    stats += [_stats("a", "Fetch", 1.0, 100)]
    pivoted = fidelity.pivot(stats, ["a", "b", "c"])
    produce = next(p for p in pivoted if p["key"] == "Produce")
    assert produce["ratios"] == {
        "b": {"p50": 1.05, "p99": 1.05, "p999": 1.05},
        "c": {"p50": 2.0, "p99": 2.0, "p999": 2.0},
    }
    table = tables.fidelity_table(
        "t", "T", pivoted, ["a", "b", "c"], key_label="API", differences=True
    )
    first, second = table.rows  # the busiest key first
    assert first["key"] == "Fetch" and first["b__count"] is None
    assert second["b__r_p50__class"] == "ok" and second["c__r_p50__class"] == "off"
    assert second["c__d_p50"] == 10.0
    reference = tables.fidelity_table(
        "t", "T", pivoted, ["a", "b", "c"], key_label="API", reference=["c"]
    )
    assert "c__r_p50" not in reference.keys() and "b__r_p50" in reference.keys()  # noqa: SIM118


def test_pages_render_from_templates(tmp_path: Path) -> None:
    assert (fmt(None), fmt(1234.5), fmt(12.345), fmt(0.01234), fmt(True)) == (
        "-",
        "1,234",
        "12.35",
        "0.0123",
        "yes",
    )
    table = Table(
        "t", "A <title>", [Column("key", "API"), Column("n", "n", "side")], [{"key": "<b>", "n": 3}]
    )
    page = render_page(
        "compare.html.j2",
        tmp_path / "index.html",
        variants=[{"label": "default", "capture": "/c"}],
        baseline="default",
        warnings=["careful"],
        tables={
            "variants": table,
            "compare_by_api": table,
            "compare_by_purgatory": table,
            "breakdown": table,
        },
        plots=["plots/a.png", "plots/b.png"],
    ).read_text()
    assert "&lt;b&gt;" in page and "<b>" not in page  # escaped
    assert 'data-sort="3"' in page and "table.sortable" in page and "careful" in page


def test_run_metadata_round_trips_and_labels(tmp_path: Path) -> None:
    assert default_label({}) == "default"
    assert default_label({"b": "2", "a": "1"}) == "a=1, b=2"
    run = ReplayRun(label="x", capture="/c", target_config={"replica.fetch.wait.max.ms": "100"})
    run.write(tmp_path)
    back = read_run(tmp_path)
    assert back is not None and back.config_text() == "replica.fetch.wait.max.ms=100"
    assert {"python", "pyspark", "kio"} <= set(back.versions)
    assert read_run(tmp_path / "nothing") is None
    assert variant_labels(["default", "default", None, "captured"], ["mine"]) == [
        "mine",
        "default",
        "variant 3",
        "captured (replay)",
    ]


def test_out_dir_replaces_a_replay_and_refuses_anything_else(tmp_path: Path) -> None:
    out = tmp_path / "out"
    replay.prepare_out_dir(out)
    (out / "_SUCCESS").write_text("")
    (out / "part-0.parquet").write_text("")
    replay.prepare_out_dir(out)
    assert list(out.iterdir()) == []
    (out / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="not a replay's"):
        replay.prepare_out_dir(out)
    assert (out / "notes.txt").exists()


def test_replay_arguments() -> None:
    args = replay.parse_args(
        ["--capture", "c", "--out", "o", "--target-brokers", "3", "--target-override", "a.b=1"]
    )
    assert (args.target_brokers, args.target_override, args.bootstrap) == (3, ["a.b=1"], None)
    for bad in (
        ["--capture", "c", "--out", "o"],  # no target at all
        ["--capture", "c", "--out", "o", "--bootstrap", "h:1", "--target-brokers", "1"],
        ["--capture", "c", "--out", "o", "--bootstrap", "h:1", "--target-override", "a=1"],
        ["--capture", "c", "--out", "o", "--target-brokers", "1", "--target-override", "nokey"],
    ):
        with pytest.raises(SystemExit):
            replay.parse_args(bad)
    assert parse_override(" a.b = 1 ") == ("a.b", "1")
    command = TargetCluster(2, ["x.y=3"], capture_dir=Path("/cap")).command()
    assert command[-6:] == ["--port", "0", "--capture-dir", "/cap", "--override", "x.y=3"]
    assert "--brokers" in command and socket.gethostbyname(command[command.index("--host") + 1])
