"""Behaviour every PartitionLog shares, run against MemoryLog and DiskLog."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from broker.log import (
    CorruptRecordError,
    DiskLog,
    LogConfig,
    MemoryLog,
    OffsetOutOfRangeError,
    PartitionLog,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)
from protocol.compression import SNAPPY, ZSTD
from protocol.record_batch import iter_batches, iter_records
from protocol.record_builder import build_record_batch

MakeLog = Callable[..., PartitionLog]


@pytest.fixture(params=["memory", "disk"])
def make_log(request: pytest.FixtureRequest, tmp_path: Path) -> MakeLog:
    def make(**config: object) -> PartitionLog:
        cfg = LogConfig(**config)  # type: ignore[arg-type]
        if request.param == "memory":
            return MemoryLog(cfg)
        return DiskLog(tmp_path / "topic-0", cfg)

    return make


def batch(n: int = 3, ts: int = 1000, value_size: int = 10, **kw: object) -> bytes:
    return build_record_batch(
        [(b"k", bytes([65 + i % 26]) * value_size, []) for i in range(n)],
        timestamp_ms=ts,
        **kw,  # type: ignore[arg-type]
    )


def offsets(data: bytes) -> list[tuple[int, int]]:
    return [(h.base_offset, h.last_offset) for _, h in iter_batches(data, verify_crc=True)]


def fill(log: PartitionLog, batches: int, n: int = 3, ts0: int = 1000) -> None:
    for i in range(batches):
        log.append_as_leader(batch(n, ts=ts0 + i))


def test_append_and_read_round_trip(make_log: MakeLog) -> None:
    log = make_log()
    assert (log.log_start_offset, log.log_end_offset, log.size_bytes) == (0, 0, 0)
    first = batch(3, ts=1000)
    info = log.append_as_leader(first + batch(2, ts=2000, compression=SNAPPY), leader_epoch=4)
    assert (info.first_offset, info.last_offset, info.num_records) == (0, 4, 5)
    assert info.max_timestamp == 2000 and info.log_append_time_ms == -1
    assert [h.base_offset for h in info.batches] == [0, 3]
    info = log.append_as_leader(batch(1, ts=1500))
    assert (info.first_offset, info.last_offset) == (5, 5)
    assert log.log_end_offset == 6
    data = log.read(0, 1 << 20)
    assert len(data) == log.size_bytes
    assert offsets(data) == [(0, 2), (3, 4), (5, 5)]
    assert [h.partition_leader_epoch for _, h in iter_batches(data)] == [4, 4, 0]
    assert [r.offset for r in iter_records(data)] == [0, 1, 2]
    assert data[16 : len(first)] == first[16:]  # all but offset and epoch stored as sent


def test_read_starts_at_the_batch_containing_the_offset(make_log: MakeLog) -> None:
    log = make_log()
    fill(log, 4)
    assert offsets(log.read(4, 1 << 20)) == [(3, 5), (6, 8), (9, 11)]
    assert log.read(12, 1 << 20) == b""  # at the log end: nothing yet


def test_read_max_bytes_counts_whole_batches(make_log: MakeLog) -> None:
    log = make_log()
    fill(log, 4)
    one = len(batch(3))
    assert offsets(log.read(0, 2 * one + 5)) == [(0, 2), (3, 5)]


def test_read_smaller_than_first_batch_still_returns_it(make_log: MakeLog) -> None:
    log = make_log()
    log.append_as_leader(batch(50, value_size=100))
    log.append_as_leader(batch(1))
    assert offsets(log.read(0, 10)) == [(0, 49)]
    assert log.read(0, 10, min_one_batch=False) == b""


def test_read_stops_before_max_offset(make_log: MakeLog) -> None:
    log = make_log()
    fill(log, 4)
    assert offsets(log.read(0, 1 << 20, max_offset=6)) == [(0, 2), (3, 5)]
    assert log.read(6, 1 << 20, max_offset=6) == b""


def test_read_out_of_range(make_log: MakeLog) -> None:
    log = make_log()
    fill(log, 2)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(7, 100)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 100)
    log.delete_records_before(3)
    with pytest.raises(OffsetOutOfRangeError) as exc:
        log.read(2, 100)
    assert (exc.value.log_start_offset, exc.value.log_end_offset) == (3, 6)


def test_bad_batch_appends_nothing(make_log: MakeLog) -> None:
    log = make_log()
    bad = bytearray(batch(3))
    bad[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(batch(2) + bytes(bad))
    assert (log.log_end_offset, log.size_bytes) == (0, 0)


def test_batch_over_max_message_bytes(make_log: MakeLog) -> None:
    log = make_log(max_message_bytes=200)
    with pytest.raises(RecordTooLargeError):
        log.append_as_leader(batch(3, value_size=200))
    assert log.log_end_offset == 0


def test_log_append_time_topic_stamps_batches(make_log: MakeLog) -> None:
    log = make_log(message_timestamp_type="LogAppendTime")
    info = log.append_as_leader(batch(3, ts=5, compression=ZSTD), log_append_time_ms=123_456)
    assert info.log_append_time_ms == 123_456 and info.max_timestamp == 123_456
    data = log.read(0, 1 << 20)
    assert {r.timestamp for r in iter_records(data)} == {123_456}


def test_create_time_topic_ignores_append_time(make_log: MakeLog) -> None:
    log = make_log()
    info = log.append_as_leader(batch(1, ts=5), log_append_time_ms=999)
    assert info.log_append_time_ms == -1 and info.max_timestamp == 5


def test_follower_append_keeps_leader_offsets(make_log: MakeLog) -> None:
    leader = MemoryLog()
    fill(leader, 3)
    follower = make_log()
    info = follower.append_as_follower(leader.read(0, 1 << 20))
    assert (info.first_offset, info.last_offset, follower.log_end_offset) == (0, 8, 9)
    assert follower.read(0, 1 << 20) == leader.read(0, 1 << 20)
    with pytest.raises(UnexpectedAppendOffsetError):
        follower.append_as_follower(leader.read(3, 1 << 20))
    assert follower.append_as_follower(b"").num_records == 0


def test_offset_for_timestamp_is_record_granular(make_log: MakeLog) -> None:
    log = make_log(index_interval_bytes=0)
    log.append_as_leader(
        build_record_batch(
            [(None, b"a", [])] * 3, timestamp_ms=0, record_timestamps=[100, 300, 200]
        )
    )
    log.append_as_leader(batch(2, ts=250))  # timestamps need not increase
    log.append_as_leader(batch(2, ts=400))
    assert log.offset_for_timestamp(0) == (0, 100)
    assert log.offset_for_timestamp(150) == (1, 300)
    assert log.offset_for_timestamp(300) == (1, 300)
    assert log.offset_for_timestamp(301) == (5, 400)
    assert log.offset_for_timestamp(401) is None
    assert log.max_timestamp() == (5, 400)


def test_timestamp_lookup_skips_deleted_records(make_log: MakeLog) -> None:
    log = make_log()
    fill(log, 3, ts0=100)  # offsets 0-2 @100, 3-5 @101, 6-8 @102
    log.delete_records_before(4)
    assert log.offset_for_timestamp(0) == (4, 101)


def test_max_timestamp(make_log: MakeLog) -> None:
    log = make_log()
    assert log.max_timestamp() is None
    log.append_as_leader(batch(2, ts=50))
    log.append_as_leader(
        build_record_batch([(None, b"a", [])] * 3, timestamp_ms=0, record_timestamps=[10, 90, 90])
    )
    log.append_as_leader(batch(2, ts=60))
    assert log.max_timestamp() == (3, 90)


def test_truncate_to(make_log: MakeLog) -> None:
    log = make_log()
    fill(log, 4)
    log.truncate_to(6)
    assert log.log_end_offset == 6
    assert offsets(log.read(0, 1 << 20)) == [(0, 2), (3, 5)]
    log.truncate_to(4)  # inside batch 3-5: the whole batch goes
    assert log.log_end_offset == 3
    info = log.append_as_leader(batch(1))
    assert info.first_offset == 3
    log.truncate_to(100)  # above the end: nothing happens
    assert log.log_end_offset == 4


def test_truncate_fully_and_start_at(make_log: MakeLog) -> None:
    log = make_log()
    fill(log, 2)
    log.truncate_fully_and_start_at(50)
    assert (log.log_start_offset, log.log_end_offset, log.size_bytes) == (50, 50, 0)
    assert log.append_as_leader(batch(1)).first_offset == 50


def test_delete_records_before(make_log: MakeLog) -> None:
    log = make_log(segment_bytes=200)
    fill(log, 6)
    assert log.delete_records_before(7) == 7
    assert log.log_start_offset == 7
    data = log.read(7, 1 << 20)
    assert offsets(data)[0] == (6, 8)  # the batch holding offset 7, whole
    assert log.delete_records_before(2) == 7  # never moves back
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records_before(100)
    assert log.delete_records_before(18) == 18  # up to the end
    assert log.log_end_offset == 18
    assert log.append_as_leader(batch(1)).first_offset == 18


def test_retention_by_time(make_log: MakeLog) -> None:
    log = make_log(retention_ms=1000, segment_bytes=100)
    for ts in (1000, 2000, 3000, 4000):
        log.append_as_leader(batch(2, ts=ts))
    size = log.size_bytes
    assert log.apply_retention(now_ms=3500) == size // 2  # 1000 and 2000 expired
    assert log.log_start_offset == 4
    assert log.apply_retention(now_ms=3500) == 0
    # everything expired: data goes but offsets continue
    assert log.apply_retention(now_ms=100_000) == size // 2
    assert (log.log_start_offset, log.log_end_offset, log.size_bytes) == (8, 8, 0)
    assert log.append_as_leader(batch(1, ts=100_000)).first_offset == 8


def test_retention_respects_high_watermark(make_log: MakeLog) -> None:
    log = make_log(retention_ms=0, segment_bytes=100)
    fill(log, 4, n=2)
    log.apply_retention(now_ms=10_000, high_watermark=4)
    assert log.log_start_offset == 4


def test_retention_by_bytes(make_log: MakeLog) -> None:
    log = make_log(retention_bytes=250, segment_bytes=100)
    fill(log, 5, n=2)
    one = len(batch(2))
    deleted = log.apply_retention(now_ms=0)
    assert log.size_bytes >= 250 and log.size_bytes - one < 250
    assert deleted == 5 * one - log.size_bytes
    assert log.log_start_offset == 2 * (deleted // one)


def test_compact_only_topic_keeps_everything(make_log: MakeLog) -> None:
    log = make_log(retention_ms=0, retention_bytes=0, cleanup_policy="compact", segment_bytes=100)
    fill(log, 3)
    assert log.apply_retention(now_ms=10**12) == 0
    assert log.log_start_offset == 0
