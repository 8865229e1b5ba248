"""Service-time tables fitted from a capture on disk and from Kafka's request log."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from protocol.capture_files import CaptureWriter
from protocol.service_times import (
    FETCH_FOLLOWER_KEY,
    FOLLOWER_WORK_KEY,
    ServiceTimeModel,
    fit_capture_records,
    service_key,
)
from spark_jobs.request_log import iter_request_log
from spark_jobs.service_time_fit import fit_capture, fit_request_log, main
from tests.helpers.captures import make_request

DATA = Path(__file__).resolve().parents[1] / "data"
JSON_LOG = DATA / "kafka-request-log-json.sample.log"
TEXT_LOG = DATA / "kafka-request-log-text.sample.log"


def test_a_request_log_gives_each_api_its_local_times() -> None:
    entries = list(iter_request_log(JSON_LOG.read_text().splitlines()))
    model = fit_request_log([JSON_LOG])
    keys = {service_key(e.api_key, e.replica_id) for e in entries}
    assert FETCH_FOLLOWER_KEY in keys  # a follower's fetches are kept apart, as Kafka's metrics
    for key in keys:
        local = sorted(
            e.local_time_ms for e in entries if service_key(e.api_key, e.replica_id) == key
        )
        dist = model.by_api[key]
        assert dist.samples == len(local)
        assert (dist.quantile(0.0), dist.quantile(1.0)) == (local[0], local[-1])
    assert model.by_bucket == {}  # the log has no request sizes
    assert "request log" in model.source


def test_a_gzipped_request_log_reads_the_same(tmp_path: Path) -> None:
    packed = tmp_path / "server.log.gz"
    packed.write_bytes(gzip.compress(TEXT_LOG.read_bytes()))
    plain, zipped = fit_request_log([TEXT_LOG]), fit_request_log([packed])
    assert plain.by_api == zipped.by_api and plain.by_api


def test_a_capture_on_disk_fits_per_size(tmp_path: Path) -> None:
    writer = CaptureWriter(tmp_path, broker_id=0)
    for i in range(40):
        writer.write(make_request(sequence=i, request_size=100, local_time_ms=0.2))
        writer.write(make_request(sequence=40 + i, request_size=100_000, local_time_ms=3.0))
    writer.close()
    model = fit_capture(tmp_path)
    assert model.service_ms(0, 50, 0.5) == pytest.approx(0.2)
    assert model.service_ms(0, 90_000, 0.5) == pytest.approx(3.0)


def test_main_writes_a_table_that_reads_back(tmp_path: Path) -> None:
    out = tmp_path / "table.json"
    assert main(["--request-log", str(JSON_LOG), "--out", str(out)]) == 0
    model = ServiceTimeModel.from_table(json.loads(out.read_text()))
    assert model.by_api == fit_request_log([JSON_LOG]).by_api
    assert model.by_api


def test_main_refuses_an_input_without_requests(tmp_path: Path) -> None:
    empty = tmp_path / "empty.log"
    empty.write_text("[2024-05-01 12:00:00,123] INFO nothing here\n")
    assert main(["--request-log", str(empty), "--out", str(tmp_path / "t.json")]) == 1


def _fetches(connection: str, replica_id: int, gap_ms: float, n: int = 40) -> list[object]:
    """``n`` fetches on one connection, each arriving ``gap_ms`` after the last was answered."""
    out: list[object] = []
    at_us = 1_000_000.0
    for i in range(n):
        out.append(
            make_request(
                api_key=1,
                api_name="Fetch",
                connection_id=connection,
                sequence=i,
                replica_id=replica_id,
                received_unix_us=round(at_us),
                total_time_ms=2.0,
                local_time_ms=0.1 if replica_id >= 0 else 0.02,
                response_send_time_ms=0.01 if replica_id >= 0 else 0.3,
            )
        )
        at_us += (2.0 + gap_ms) * 1000
    return out


def test_links_and_follower_work_come_from_fetch_turnarounds() -> None:
    records = [*_fetches("consumer", -1, 0.1), *_fetches("follower", 2, 0.5)]
    model = fit_capture_records(records)
    # a consumer fetches again at once: its turnaround is the link's round trip
    base, jitter = model.link_latency_ms or (None, None)
    assert (base, jitter) == (pytest.approx(0.05, abs=1e-3), pytest.approx(0.0, abs=1e-3))
    # a follower's is that plus its own work on the answer
    work = model.by_api[FOLLOWER_WORK_KEY]
    assert work.quantile(0.5) == pytest.approx(0.4, abs=1e-3)
    # and its fetches cost apart from a consumer's, to serve and to send
    assert model.by_api[FETCH_FOLLOWER_KEY].quantile(0.5) == pytest.approx(0.1)
    assert model.by_api[1].quantile(0.5) == pytest.approx(0.02)
    assert model.send is not None and model.send.by_api[1].quantile(0.5) == pytest.approx(0.3)
    # the whole model travels as a table
    again = ServiceTimeModel.from_table(json.loads(json.dumps(model.to_table())))
    assert again.link_latency_ms == model.link_latency_ms
    assert again.by_api[FOLLOWER_WORK_KEY] == work
    assert again.send is not None and again.send.by_api == model.send.by_api
