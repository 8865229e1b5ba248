"""Capture files: rolling, flushing, and reading what a crash leaves behind."""

from __future__ import annotations

import gzip
import json
import random
import shutil
import warnings
from pathlib import Path

import pytest

from protocol.capture import CaptureRequest, DelayedOperationEvent
from protocol.capture_files import (
    CaptureCorruptWarning,
    CaptureTruncatedWarning,
    CaptureWriter,
    capture_file_name,
    capture_files,
    captured_cluster_config,
    read_capture,
)
from tests.helpers.captures import make_event, make_request

Record = CaptureRequest | DelayedOperationEvent


def some_records(n: int, start: int = 0) -> list[Record]:
    out: list[Record] = []
    for i in range(start, start + n):
        if i % 5 == 4:
            out.append(make_event(operation_id=i, event="created"))
        else:
            out.append(
                make_request(sequence=i, correlation_id=i, request=bytes([i % 256]) * (i % 97 + 1))
            )
    return out


def read_all(path: Path) -> list[Record]:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a clean file reads without any warning
        return list(read_capture(path))


def test_records_read_back_in_order(tmp_path: Path) -> None:
    records = some_records(50)
    with CaptureWriter(tmp_path, broker_id=1) as writer:
        for r in records:
            writer.write(r)
    assert read_all(tmp_path) == records
    assert writer.records_written == 50


def test_files_are_plain_gzip_json_lines(tmp_path: Path) -> None:
    # What a person does: zcat | jq. Several gzip members read as one stream.
    with CaptureWriter(tmp_path, broker_id=3, flush_interval_ms=0) as writer:
        for i, r in enumerate(some_records(6)):
            writer.write(r)
            writer.maybe_flush(float(i))
    (path,) = writer.paths
    lines = gzip.decompress(path.read_bytes()).decode().splitlines()
    docs = [json.loads(line) for line in lines]
    assert docs[0]["type"] == "header" and docs[0]["broker_id"] == 3
    assert [d["type"] for d in docs[1:]].count("delayed_op") == 1
    assert path.name == capture_file_name(3, 0)


def test_rolls_by_size_and_keeps_order_across_files(tmp_path: Path) -> None:
    # Incompressible request bytes, so that zlib hands out compressed blocks steadily
    # (it holds back up to some tens of KiB, by which a file may pass roll_bytes).
    rng = random.Random(6)
    records = [make_request(sequence=i, request=rng.randbytes(1000)) for i in range(300)]
    with CaptureWriter(tmp_path, broker_id=1, roll_bytes=50_000) as writer:
        for r in records:
            writer.write(r)
    assert len(writer.paths) >= 4
    assert all(p.stat().st_size < 50_000 + 70_000 for p in writer.paths)
    assert capture_files(tmp_path) == writer.paths
    assert read_all(tmp_path) == records
    # One file can be read on its own.
    assert read_all(writer.paths[0]) == records[: len(read_all(writer.paths[0]))]


def test_a_restarted_writer_never_overwrites(tmp_path: Path) -> None:
    first, second = some_records(10), some_records(10, start=10)
    with CaptureWriter(tmp_path, broker_id=1) as writer:
        for r in first:
            writer.write(r)
    with CaptureWriter(tmp_path, broker_id=1) as writer:
        for r in second:
            writer.write(r)
    assert [p.name for p in writer.paths] == [capture_file_name(1, 1)]
    assert read_all(tmp_path) == first + second


def test_brokers_share_a_directory(tmp_path: Path) -> None:
    a = [make_request(broker_id=1, sequence=i) for i in range(3)]
    b = [make_request(broker_id=2, sequence=i) for i in range(3)]
    with CaptureWriter(tmp_path, 2) as wb, CaptureWriter(tmp_path, 1) as wa:
        for ra, rb in zip(a, b, strict=True):
            wa.write(ra)
            wb.write(rb)
    assert read_all(tmp_path) == a + b  # ordered by broker, then file


def test_maybe_flush_waits_for_the_interval(tmp_path: Path) -> None:
    writer = CaptureWriter(tmp_path, broker_id=1, flush_interval_ms=1000)
    writer.write(make_request())
    assert writer.maybe_flush(100.0) is False  # first call starts the interval
    assert writer.maybe_flush(100.999) is False
    assert writer.maybe_flush(101.0) is True
    assert writer.maybe_flush(102.5) is False  # nothing pending
    writer.close()


def test_crash_loses_only_what_was_not_flushed(tmp_path: Path) -> None:
    flushed, unflushed = some_records(40), some_records(40, start=40)
    writer = CaptureWriter(tmp_path, broker_id=1, flush_interval_ms=1000)
    writer.maybe_flush(0.0)
    for r in flushed:
        writer.write(r)
    assert writer.maybe_flush(1.0)
    for r in unflushed:
        writer.write(r)
    # "Crash": copy the file as the OS has it now, without closing the writer.
    assert writer.current_path is not None
    crashed = tmp_path / "crashed"
    crashed.mkdir()
    shutil.copy(writer.current_path, crashed / writer.current_path.name)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        got = list(read_capture(crashed))
    assert got[: len(flushed)] == flushed
    assert got == (flushed + unflushed)[: len(got)]
    writer.close()


@pytest.mark.parametrize("keep_fraction", [0.1, 0.35, 0.5, 0.77, 0.95, 0.999])
def test_reads_up_to_a_cut_with_a_warning(tmp_path: Path, keep_fraction: float) -> None:
    records = some_records(200)
    with CaptureWriter(tmp_path, broker_id=1, flush_interval_ms=0) as writer:
        for i, r in enumerate(records):
            writer.write(r)
            if i % 50 == 49:
                writer.maybe_flush(float(i))
    (path,) = writer.paths
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep_fraction)])
    with pytest.warns(CaptureTruncatedWarning):
        got = list(read_capture(path))
    assert got == records[: len(got)]


def test_record_cut_in_the_middle_is_dropped_with_a_warning(tmp_path: Path) -> None:
    records = some_records(5)
    lines = [r.model_dump_json() for r in records]
    text = "\n".join(lines) + "\n"
    cut = text[: len(text) - len(lines[-1]) // 2 - 1]  # last record half written
    path = tmp_path / capture_file_name(1, 0)
    path.write_bytes(gzip.compress(cut.encode()))
    with pytest.warns(CaptureTruncatedWarning, match="cut in the middle"):
        got = list(read_capture(tmp_path))
    assert got == records[:4]


def test_garbage_after_good_members_is_skipped_with_a_warning(tmp_path: Path) -> None:
    records = some_records(20)
    with CaptureWriter(tmp_path, broker_id=1) as writer:
        for r in records:
            writer.write(r)
    (path,) = writer.paths
    with open(path, "ab") as fh:
        fh.write(b"\x00" * 4096)  # e.g. a preallocated block after a power cut
    with pytest.warns(CaptureCorruptWarning):
        assert list(read_capture(path)) == records


def test_invalid_line_is_skipped_with_a_warning(tmp_path: Path) -> None:
    good = some_records(3)
    lines = [good[0].model_dump_json(), '{"type":"request","broker_id":"x"}']
    lines += [r.model_dump_json() for r in good[1:]]
    path = tmp_path / capture_file_name(1, 0)
    path.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    with pytest.warns(CaptureCorruptWarning, match="not a capture record"):
        assert list(read_capture(path)) == good


def test_newer_format_version_is_refused(tmp_path: Path) -> None:
    header = {"type": "header", "format_version": 999, "broker_id": 1}
    header |= {"created_unix_us": 0, "file_index": 0}
    path = tmp_path / capture_file_name(1, 0)
    path.write_bytes(gzip.compress((json.dumps(header) + "\n").encode()))
    with pytest.raises(ValueError, match="format version 999"):
        list(read_capture(path))


def test_write_after_close_is_an_error(tmp_path: Path) -> None:
    writer = CaptureWriter(tmp_path, broker_id=1, fsync=True)
    writer.write(make_request())
    writer.close()
    writer.close()  # idempotent
    with pytest.raises(ValueError):
        writer.write(make_request())
    assert len(read_all(tmp_path)) == 1


def test_no_file_until_the_first_record(tmp_path: Path) -> None:
    CaptureWriter(tmp_path, broker_id=1).close()
    assert capture_files(tmp_path) == []


def test_headers_carry_the_cluster_config_a_replay_starts_from(tmp_path: Path) -> None:
    configs = {"offsets.topic.num.partitions": "3", "min.insync.replicas": "2"}
    with CaptureWriter(tmp_path, broker_id=0, cluster_config=configs) as writer:
        for record in some_records(3):
            writer.write(record)
    assert captured_cluster_config(tmp_path) == configs
    assert len(read_all(tmp_path)) == 3  # the header is not a record


def test_a_capture_without_configs_in_its_header_reads_as_none(tmp_path: Path) -> None:
    with CaptureWriter(tmp_path, broker_id=0) as writer:
        writer.write(some_records(1)[0])
    assert captured_cluster_config(tmp_path) == {}
