"""Service-time tables fitted from a capture on disk and from Kafka's request log."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from protocol.capture_files import CaptureWriter
from protocol.service_times import ServiceTimeModel
from spark_jobs.request_log import iter_request_log
from spark_jobs.service_time_fit import fit_capture, fit_request_log, main
from tests.helpers.captures import make_request

DATA = Path(__file__).resolve().parents[1] / "data"
JSON_LOG = DATA / "kafka-request-log-json.sample.log"
TEXT_LOG = DATA / "kafka-request-log-text.sample.log"


def test_a_request_log_gives_each_api_its_local_times() -> None:
    entries = list(iter_request_log(JSON_LOG.read_text().splitlines()))
    model = fit_request_log([JSON_LOG])
    for key in {e.api_key for e in entries}:
        local = sorted(e.local_time_ms for e in entries if e.api_key == key)
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
