"""DiskLog specifics: Kafka's file layout, segment rolling, reopen and recovery."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from broker.log import DiskLog, LogConfig
from broker.log.disk_log import CLEAN_SHUTDOWN_FILE
from broker.log.offset_index import OffsetIndex
from protocol.record_batch import iter_batches
from protocol.record_builder import build_record_batch

CONFIG = LogConfig(segment_bytes=1000, index_interval_bytes=150)


def batch(n: int = 3, ts: int = 1000) -> bytes:
    return build_record_batch(
        [(b"key", b"value-%d" % i, [("h", b"v")]) for i in range(n)], timestamp_ms=ts
    )


def write_log(directory: Path, batches: int = 30, config: LogConfig = CONFIG) -> DiskLog:
    log = DiskLog(directory, config)
    for i in range(batches):
        log.append_as_leader(batch(3, ts=1000 + i))
    return log


def read_all(log: DiskLog) -> bytes:
    out = b""
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        chunk = log.read(offset, 1 << 20)
        out += chunk
        offset = [h for _, h in iter_batches(chunk)][-1].last_offset + 1
    return out


def seg_path(directory: Path, base: int, suffix: str = ".log") -> Path:
    return directory / f"{base:020d}{suffix}"


def test_segment_files_use_kafka_names_and_roll_at_segment_bytes(tmp_path: Path) -> None:
    d = tmp_path / "orders-3"
    log = write_log(d)
    bases = log.segment_base_offsets()
    assert len(bases) > 3 and bases[0] == 0
    for base in bases:
        for suffix in (".log", ".index", ".timeindex"):
            assert seg_path(d, base, suffix).exists()
    for base in bases[:-1]:
        assert 0 < seg_path(d, base).stat().st_size <= CONFIG.segment_bytes
    assert sum(seg_path(d, b).stat().st_size for b in bases) == log.size_bytes
    # a segment's name is the offset of its first batch
    for base in bases:
        first = next(iter_batches(seg_path(d, base).read_bytes()))[1]
        assert first.base_offset == base


def test_sparse_indexes_are_written(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = write_log(d)
    index = seg_path(d, 0, ".index").read_bytes()
    timeindex = seg_path(d, 0, ".timeindex").read_bytes()
    assert len(index) % 8 == 0 and len(index) >= 8
    assert len(timeindex) % 12 == 0 and len(timeindex) >= 12
    # each entry names the last offset of the batch that starts at its position
    entries = OffsetIndex.load(seg_path(d, 0, ".index"), 0)
    offset, position = entries.last_entry()  # type: ignore[misc]
    data = seg_path(d, 0).read_bytes()
    header = next(iter_batches(data[position:], allow_partial_tail=True))[1]
    assert header.last_offset == offset
    log.close()


def test_reopen_returns_identical_data_and_continues_offsets(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = write_log(d)
    before = read_all(log)
    end, bases = log.log_end_offset, log.segment_base_offsets()
    log.close()
    assert (d / CLEAN_SHUTDOWN_FILE).exists()
    log = DiskLog(d, CONFIG)
    assert not (d / CLEAN_SHUTDOWN_FILE).exists()
    assert (log.log_end_offset, log.segment_base_offsets()) == (end, bases)
    assert read_all(log) == before
    assert log.offset_for_timestamp(1010) == (30, 1010)
    assert log.max_timestamp() == (87, 1029)
    assert log.append_as_leader(batch(1)).first_offset == end


def test_reopen_after_kill_without_close(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = write_log(d)
    before, end = read_all(log), log.log_end_offset
    del log  # no close(): as after kill -9, data is in the OS, no clean-shutdown marker
    log = DiskLog(d, CONFIG)
    assert log.recovered_bytes == 0
    assert (log.log_end_offset, read_all(log)) == (end, before)


@pytest.mark.parametrize("cut", [1, 30, 61, 70])
def test_torn_tail_is_cut_back_to_last_good_batch(tmp_path: Path, cut: int) -> None:
    d = tmp_path / "t-0"
    log = write_log(d, batches=5, config=LogConfig())
    one = len(batch(3))
    good = read_all(log)[: 4 * one]
    path = seg_path(d, 0)
    with open(path, "r+b") as f:
        f.truncate(4 * one + cut)  # the 5th batch was half-written
    log = DiskLog(d, LogConfig())
    assert log.recovered_bytes == cut
    assert log.log_end_offset == 12
    assert read_all(log) == good
    assert path.stat().st_size == 4 * one
    assert log.append_as_leader(batch(1)).first_offset == 12


def test_garbage_after_last_batch_is_cut(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = write_log(d, batches=3, config=LogConfig())
    good = read_all(log)
    log.close()
    with open(seg_path(d, 0), "ab") as f:
        f.write(os.urandom(500))
    os.unlink(d / CLEAN_SHUTDOWN_FILE)  # as if killed
    log = DiskLog(d, LogConfig())
    assert log.recovered_bytes == 500
    assert read_all(log) == good and log.log_end_offset == 9


def test_corrupt_batch_in_tail_is_cut_with_everything_after(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = write_log(d, batches=4, config=LogConfig())
    one = len(batch(3))
    with open(seg_path(d, 0), "r+b") as f:
        f.seek(2 * one + 70)  # inside batch 3's records: its CRC fails
        f.write(b"\xff\xff")
    log = DiskLog(d, LogConfig())
    assert log.log_end_offset == 6
    assert log.recovered_bytes == 2 * one


@pytest.mark.parametrize("suffix", [".index", ".timeindex"])
def test_missing_index_is_rebuilt(tmp_path: Path, suffix: str) -> None:
    d = tmp_path / "t-0"
    log = write_log(d)
    before = read_all(log)
    index_before = seg_path(d, 0, suffix).read_bytes()
    log.close()
    for base in log.segment_base_offsets():
        seg_path(d, base, suffix).unlink()
    log = DiskLog(d, CONFIG)
    assert seg_path(d, 0, suffix).read_bytes() == index_before
    assert read_all(log) == before
    assert log.offset_for_timestamp(1020) == (60, 1020)


def test_index_that_does_not_match_is_rebuilt(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = write_log(d)
    before = read_all(log)
    index_before = seg_path(d, 0, ".index").read_bytes()
    log.close()
    seg_path(d, 0, ".index").write_bytes(b"\x00\x00\x00\x05\x00\x00\x00\x07")
    log = DiskLog(d, CONFIG)
    assert seg_path(d, 0, ".index").read_bytes() == index_before
    assert read_all(log) == before


def test_corruption_in_an_older_segment_drops_later_segments(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = write_log(d)
    bases = log.segment_base_offsets()
    log.close()
    with open(seg_path(d, bases[1]), "r+b") as f:
        f.seek(100)
        f.write(b"\x00\x01\x02")
    seg_path(d, bases[1], ".index").unlink()  # forces that segment to be verified
    log = DiskLog(d, CONFIG)
    assert log.segment_base_offsets() == bases[:2]
    assert not seg_path(d, bases[2]).exists()
    assert bases[1] <= log.log_end_offset < bases[2]
    assert log.append_as_leader(batch(1)).first_offset == log.log_end_offset - 1


def test_log_start_offset_survives_reopen(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = write_log(d)
    log.delete_records_before(40)
    bases = log.segment_base_offsets()
    assert bases[0] <= 40 < bases[1]
    log.close()
    log = DiskLog(d, CONFIG)
    assert log.log_start_offset == 40


def test_truncate_to_across_segments_then_reopen(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = write_log(d)
    bases = log.segment_base_offsets()
    target = bases[2] + 3
    log.truncate_to(target)
    assert log.log_end_offset == target
    assert log.segment_base_offsets() == bases[:3]
    assert not seg_path(d, bases[3]).exists()
    log.append_as_leader(batch(2, ts=5000))
    data = read_all(log)
    log.close()
    log = DiskLog(d, CONFIG)
    assert log.log_end_offset == target + 2
    assert read_all(log) == data
    assert log.max_timestamp() == (target, 5000)


def test_retention_deleting_everything_rolls_a_new_segment(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = write_log(d, config=LogConfig(segment_bytes=1000, retention_ms=10))
    end = log.log_end_offset
    log.apply_retention(now_ms=10**9)
    assert log.segment_base_offsets() == [end]
    assert (log.log_start_offset, log.size_bytes) == (end, 0)
    log.close()
    log = DiskLog(d, CONFIG)
    assert (log.log_start_offset, log.log_end_offset) == (end, end)


def test_fsync_on_append(tmp_path: Path) -> None:
    log = write_log(tmp_path / "t-0", batches=3, config=LogConfig(flush_messages=1))
    assert log.log_end_offset == 9
    log.flush()


def test_reads_return_exact_bytes_written_at_segment_edges(tmp_path: Path) -> None:
    log = write_log(tmp_path / "t-0")
    for base in log.segment_base_offsets()[1:]:
        data = log.read(base - 1, 1 << 20)  # last batch of the previous segment only
        headers = [h for _, h in iter_batches(data, verify_crc=True)]
        assert headers[-1].last_offset == base - 1
        assert next(iter_batches(log.read(base, 1 << 20)))[1].base_offset == base
