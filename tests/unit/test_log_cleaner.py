"""The log cleaner (compaction) on MemoryLog and DiskLog, on a ManualClock: no sleeping."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from broker.log import DiskLog, LogConfig, MemoryLog, PartitionLog
from broker.log.cleaner_batch import DELETE_HORIZON_FLAG
from broker.log.log_cleaner import CleanerConfig, LogCleaner
from broker.log.offset_index import OffsetIndex
from broker.log.time_index import TimeIndex
from protocol.compression import GZIP
from protocol.record_batch import (
    RecordBatchHeader,
    iter_batches,
    iter_records,
)
from protocol.record_builder import build_record_batch
from purgatory import ManualClock, SystemTimer

NOW = 1_700_000_000_000
SMALL = {"cleanup_policy": "compact", "segment_bytes": 500, "index_interval_bytes": 100}

MakeLog = Callable[..., PartitionLog]
Rec = tuple[int, bytes | None, bytes | None, int]  # offset, key, value, timestamp


@dataclass
class Replica:
    log: PartitionLog
    last_stable_offset: int


@pytest.fixture(params=["memory", "disk"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_log(kind: str, tmp_path: Path) -> MakeLog:
    def make(**config: object) -> PartitionLog:
        cfg = LogConfig(**{**SMALL, **config})  # type: ignore[arg-type]
        if kind == "memory":
            return MemoryLog(cfg)
        return DiskLog(tmp_path / "compacted-0", cfg)

    return make


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


def make_cleaner(clock: ManualClock, **replicas: Replica) -> LogCleaner:
    by_tp = {(name, 0): replica for name, replica in replicas.items()}
    return LogCleaner(CleanerConfig(backoff_ms=100), clock, clock.now_ms, SystemTimer(clock), by_tp)


def put(
    log: PartitionLog,
    records: Sequence[tuple[bytes | None, bytes | None]],
    ts: int = NOW,
    **kw: object,
) -> None:
    log.append_as_leader(
        build_record_batch([(k, v, []) for k, v in records], timestamp_ms=ts, **kw)  # type: ignore[arg-type]
    )


def fill(log: PartitionLog, count: int, keys: int, ts: int = NOW, prefix: bytes = b"v") -> None:
    for i in range(count):
        put(log, [(b"key-%d" % (i % keys), prefix + b"%d" % i)], ts=ts + i)


def all_batches(log: PartitionLog) -> list[tuple[RecordBatchHeader, bytes]]:
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        chunk = log.read(offset, 1 << 20)
        if not chunk:
            break
        for pos, header in iter_batches(chunk, verify_crc=True):
            out.append((header, chunk[pos : pos + header.size]))
            offset = header.last_offset + 1
    return out


def all_records(log: PartitionLog) -> list[Rec]:
    return [
        (r.offset, r.key, r.value, r.timestamp)
        for _, data in all_batches(log)
        for r in iter_records(data)
    ]


def compacted(records: list[Rec], end: int) -> list[Rec]:
    """The model: below ``end`` only the last record of each key survives."""
    last = {r[1]: r[0] for r in records if r[0] < end}
    return [r for r in records if r[0] >= end or last.get(r[1]) == r[0]]


def clean(cleaner: LogCleaner, log: PartitionLog, hw: int | None = None) -> int | None:
    """Clean ``log`` (HW = log end unless given); the end of the cleaned dirty
    section, or None if it needed no cleaning."""
    result = cleaner.clean_log("t-0", log, log.log_end_offset if hw is None else hw)
    return None if result is None else result.dirty_end


# -- what survives ---------------------------------------------------------------------


def test_last_record_per_key_kept_with_its_offset(make_log: MakeLog, clock: ManualClock) -> None:
    log = make_log()
    fill(log, 120, keys=7)
    before = all_records(log)
    end = clean(make_cleaner(clock), log)
    assert end is not None and 0 < end <= log.active_segment_base_offset
    after = all_records(log)
    assert after == compacted(before, end)
    below = [r for r in after if r[0] < end]
    assert len(below) == len({r[1] for r in below}) <= 7  # one record a key
    assert log.log_start_offset == 0 and log.log_end_offset == 120
    assert log.size_bytes < sum(h.size for h, _ in all_batches(log)) + 1


def test_many_records_a_batch_and_compressed_batches(make_log: MakeLog, clock: ManualClock) -> None:
    log = make_log(segment_bytes=400)
    for i in range(12):
        records = [(b"k%d" % (j % 3), b"v%d-%d" % (i, j)) for j in range(5)]
        put(log, records, ts=NOW + i, compression=GZIP if i % 2 else 0)
    before = all_records(log)
    end = clean(make_cleaner(clock), log)
    assert end is not None
    assert all_records(log) == compacted(before, end)
    for header, _ in all_batches(log):
        if header.base_offset < end and header.records_count:
            # base and last offset of the original batch stay; records keep their offsets
            assert (header.base_offset % 5, header.last_offset_delta) == (0, 4)
            assert header.compression == (GZIP if (header.base_offset // 5) % 2 else 0)


def test_records_without_a_key_are_removed(make_log: MakeLog, clock: ManualClock) -> None:
    log = make_log()
    put(log, [(None, b"no key"), (b"a", b"1")])
    fill(log, 30, keys=30)
    end = clean(make_cleaner(clock), log)
    assert end is not None and end > 2
    assert [r[0] for r in all_records(log)][:1] == [1]


def test_active_segment_is_untouched(make_log: MakeLog, clock: ManualClock) -> None:
    log = make_log()
    fill(log, 60, keys=2)
    active = log.active_segment_base_offset
    assert 0 < active < 60
    tail = log.read(active, 1 << 20)
    end = clean(make_cleaner(clock), log)
    assert end is not None and end <= active
    assert log.read(active, 1 << 20) == tail
    assert log.active_segment_base_offset == active


def test_nothing_at_or_above_the_high_watermark_is_cleaned(
    make_log: MakeLog, clock: ManualClock
) -> None:
    log = make_log()
    fill(log, 100, keys=3)
    before = all_records(log)
    hw = 40
    end = clean(make_cleaner(clock), log, hw=hw)
    assert end is not None and end <= hw
    after = all_records(log)
    assert [r for r in after if r[0] >= hw] == [r for r in before if r[0] >= hw]
    assert after == compacted(before, end)
    assert clean(make_cleaner(clock), log, hw=0) is None  # nothing below a HW of 0


def test_reads_of_a_removed_offset_return_the_next_surviving_batch(
    make_log: MakeLog, clock: ManualClock
) -> None:
    log = make_log()
    fill(log, 80, keys=4)
    end = clean(make_cleaner(clock), log)
    assert end is not None
    survivors = [r[0] for r in all_records(log)]
    removed = [o for o in range(80) if o not in survivors]
    assert removed
    for offset in removed:
        first = next(iter_batches(log.read(offset, 1 << 20)))[1]
        assert first.last_offset >= offset
        assert next(iter(iter_records(log.read(offset, 1 << 20)))).offset == min(
            o for o in survivors if o > offset
        )


# -- tombstones ----------------------------------------------------------------------------


def test_tombstones_stay_delete_retention_ms_after_cleaning_then_go(
    make_log: MakeLog, clock: ManualClock
) -> None:
    log = make_log(delete_retention_ms=10_000)
    put(log, [(b"gone", b"value")])
    put(log, [(b"gone", None)])
    fill(log, 40, keys=40)
    cleaner = make_cleaner(clock)
    assert clean(cleaner, log) is not None
    records = all_records(log)
    assert (1, b"gone", None, NOW) in records and records[0][0] == 1  # value gone, tombstone kept
    tomb = next(h for h, _ in all_batches(log) if h.base_offset == 1)
    assert tomb.attributes & DELETE_HORIZON_FLAG and tomb.base_timestamp == NOW + 10_000
    assert log.cleaner_checkpoint.delete_horizon_ms == NOW + 10_000

    clock.advance(9_999)
    assert clean(cleaner, log) is None  # nothing dirty, horizon not reached
    assert (1, b"gone", None, NOW) in all_records(log)
    clock.advance(1)
    assert clean(cleaner, log) is not None  # the horizon passed: a cleaning is due
    assert all(r[1] != b"gone" for r in all_records(log))
    assert log.cleaner_checkpoint.delete_horizon_ms == -1
    assert clean(cleaner, log) is None


def test_a_cleaned_tombstone_batch_keeps_its_records_timestamps(
    make_log: MakeLog, clock: ManualClock
) -> None:
    log = make_log()
    put(log, [(b"a", b"1"), (b"b", None), (b"c", b"3")], ts=NOW - 500)
    fill(log, 40, keys=40)
    before = all_records(log)
    assert clean(make_cleaner(clock), log) is not None
    assert all_records(log)[:3] == before[:3]


def test_idempotent_producers_last_batch_is_kept_empty(
    make_log: MakeLog, clock: ManualClock
) -> None:
    log = make_log()
    ids = {"producer_id": 7, "producer_epoch": 0}
    put(log, [(b"a", b"1")], base_sequence=0, **ids)
    put(log, [(b"a", b"2")], base_sequence=1, **ids)
    put(log, [(b"a", b"3")])  # another writer overwrites both
    fill(log, 40, keys=40)
    assert clean(make_cleaner(clock), log) is not None
    headers = [h for h, _ in all_batches(log)]
    assert [(h.base_offset, h.records_count, h.base_sequence) for h in headers[:2]] == [
        (1, 0, 1),  # the producer's last batch, empty; its first batch is gone
        (2, 1, -1),
    ]


def test_transactional_and_control_batches_are_kept_whole(
    make_log: MakeLog, clock: ManualClock
) -> None:
    log = make_log()
    txn = {"producer_id": 5, "producer_epoch": 0, "is_transactional": True}
    put(log, [(b"a", b"0")])
    put(log, [(b"a", b"1"), (b"a", b"1b")], base_sequence=0, **txn)
    put(log, [(b"marker", b"")], is_control=True, **txn)
    put(log, [(b"a", b"2")])
    fill(log, 40, keys=40)
    assert clean(make_cleaner(clock), log) is not None
    kept = [(r[0], r[2]) for r in all_records(log) if r[1] in (b"a", b"marker")]
    # the plain a=0 goes (a=2 is later); the transaction's records and the marker stay,
    # and they are no later value for "a" (the offset map leaves them out)
    assert kept == [(1, b"1"), (2, b"1b"), (3, b""), (4, b"2")]


# -- when to clean -------------------------------------------------------------------------


def test_min_cleanable_dirty_ratio_is_respected(make_log: MakeLog, clock: ManualClock) -> None:
    log = make_log(min_cleanable_dirty_ratio=0.5)
    fill(log, 60, keys=60, prefix=b"first")  # distinct keys: cleaning keeps them all
    cleaner = make_cleaner(clock)
    assert clean(cleaner, log) is not None
    checkpoint = log.cleaner_checkpoint.first_dirty_offset
    fill(log, 12, keys=3, prefix=b"second")
    assert cleaner.plan("t-0", log, log.log_end_offset, clock.now_ms()) is None
    assert clean(cleaner, log) is None
    assert log.cleaner_checkpoint.first_dirty_offset == checkpoint
    fill(log, 120, keys=3, prefix=b"third")
    plan = cleaner.plan("t-0", log, log.log_end_offset, clock.now_ms())
    assert plan is not None and plan.cleanable_ratio > 0.5
    assert clean(cleaner, log) is not None
    assert log.cleaner_checkpoint.first_dirty_offset > checkpoint


def test_min_compaction_lag_ms_is_respected(make_log: MakeLog, clock: ManualClock) -> None:
    log = make_log(min_compaction_lag_ms=60_000)
    fill(log, 60, keys=2, ts=NOW - 1_000)
    cleaner = make_cleaner(clock)
    assert clean(cleaner, log) is None  # every record is younger than the lag
    clock.advance(58_000)
    assert clean(cleaner, log) is None
    clock.advance(3_000)
    before = all_records(log)
    end = clean(cleaner, log)
    assert end is not None and all_records(log) == compacted(before, end)


def test_delete_policy_logs_are_not_compacted(make_log: MakeLog, clock: ManualClock) -> None:
    log = make_log(cleanup_policy="delete")
    fill(log, 60, keys=2)
    assert clean(make_cleaner(clock), log) is None


def test_compact_delete_topics_also_get_retention(make_log: MakeLog, clock: ManualClock) -> None:
    log = make_log(cleanup_policy="compact,delete", retention_ms=60_000)
    fill(log, 40, keys=3, ts=NOW - 120_000)  # old: past retention.ms
    fill(log, 40, keys=3, ts=NOW, prefix=b"new")
    assert log.apply_retention(NOW, high_watermark=log.log_end_offset) > 0
    start = log.log_start_offset
    assert start > 0
    before = all_records(log)
    end = clean(make_cleaner(clock), log)
    assert end is not None and log.log_start_offset == start
    assert all_records(log) == compacted(before, end)


def test_clean_once_cleans_every_replica_that_needs_it(tmp_path: Path, clock: ManualClock) -> None:
    leader = MemoryLog(LogConfig(**SMALL))  # type: ignore[arg-type]
    follower = DiskLog(tmp_path / "f-0", LogConfig(**SMALL))  # type: ignore[arg-type]
    plain = MemoryLog(LogConfig(segment_bytes=500))
    for log in (leader, follower, plain):
        fill(log, 60, keys=2)
    cleaner = make_cleaner(
        clock,
        a=Replica(leader, 60),
        b=Replica(follower, 60),
        c=Replica(plain, 60),
    )
    assert cleaner.clean_once() == 2
    assert len(all_records(leader)) < 60 and len(all_records(follower)) < 60
    assert len(all_records(plain)) == 60
    assert cleaner.clean_once() == 0


async def test_the_periodic_pass_cleans_in_a_worker_thread(clock: ManualClock) -> None:
    log = MemoryLog(LogConfig(**SMALL))  # type: ignore[arg-type]
    fill(log, 60, keys=2)
    timer = SystemTimer(clock)
    cleaner = LogCleaner(
        CleanerConfig(backoff_ms=100), clock, clock.now_ms, timer, {("t", 0): Replica(log, 60)}
    )
    await cleaner.start()
    clock.advance(100)
    timer.advance_clock()  # the backoff task starts a pass on this loop
    running = cleaner._pass
    assert running is not None
    assert await running == 1
    assert len(all_records(log)) < 60
    await cleaner.stop()


# -- the log changing under a cleaning -----------------------------------------------------


@pytest.mark.parametrize("change", ["truncate", "retention", "delete_records"])
def test_a_result_is_dropped_if_the_log_changed_meanwhile(
    make_log: MakeLog, clock: ManualClock, kind: str, tmp_path: Path, change: str
) -> None:
    log = make_log(cleanup_policy="compact,delete", retention_ms=60_000)
    fill(log, 30, keys=3, ts=NOW - 120_000)
    fill(log, 30, keys=3)
    cleaner = make_cleaner(clock)
    plan = cleaner.plan("t-0", log, log.log_end_offset, NOW)
    assert plan is not None
    plan.snapshot.freeze()
    result = cleaner.cleaner.clean(plan, NOW)  # what the worker thread does
    if change == "truncate":
        log.truncate_to(50)
    elif change == "retention":
        assert log.apply_retention(NOW, high_watermark=log.log_end_offset)
    else:
        log.delete_records_before(5)
    before = all_records(log)
    assert not log.replace_cleaned(plan.snapshot, result.groups, result.checkpoint)
    result.abort()
    assert all_records(log) == before
    if kind == "disk":
        assert not [p for p in (tmp_path / "compacted-0").iterdir() if ".cleaned" in p.name]


def test_truncation_lowers_the_first_dirty_offset(make_log: MakeLog, clock: ManualClock) -> None:
    log = make_log()
    fill(log, 60, keys=2)
    assert clean(make_cleaner(clock), log) is not None
    assert log.cleaner_checkpoint.first_dirty_offset > 10
    log.truncate_to(10)
    assert log.cleaner_checkpoint.first_dirty_offset <= 10


# -- DiskLog: files, indexes, crashes ------------------------------------------------------


def disk_log(tmp_path: Path, **config: object) -> DiskLog:
    return DiskLog(tmp_path / "compacted-0", LogConfig(**{**SMALL, **config}))  # type: ignore[arg-type]


def test_indexes_of_cleaned_segments_find_offsets_and_timestamps(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = disk_log(tmp_path, segment_bytes=1200)
    fill(log, 200, keys=120)
    end = clean(make_cleaner(clock), log)
    assert end is not None
    survivors = all_records(log)

    def check(log: DiskLog) -> None:
        for offset, key, value, ts in survivors:
            found = next(iter_records(log.read(offset, 1 << 20)))
            assert (found.offset, found.key, found.value) == (offset, key, value)
            assert log.offset_for_timestamp(ts) == (offset, ts)
        for ts in range(NOW, NOW + 200):
            later = [(o, t) for o, _, _, t in survivors if t >= ts]
            assert log.offset_for_timestamp(ts) == (later[0] if later else None)

    check(log)
    directory = log.directory
    entries = times = 0
    for base in log.segment_base_offsets()[:-1]:
        entries += len(OffsetIndex.load(directory / f"{base:020d}.index", base))
        times += len(TimeIndex.load(directory / f"{base:020d}.timeindex", base))
    assert entries > 0 and times > 0
    log.close()
    reopened = DiskLog(directory, log.config)
    assert all_records(reopened) == survivors
    check(reopened)
    assert reopened.cleaner_checkpoint == log.cleaner_checkpoint
    reopened.close()


def test_cleaning_merges_small_cleaned_segments(tmp_path: Path, clock: ManualClock) -> None:
    log = disk_log(tmp_path)
    fill(log, 100, keys=2)
    cleaner = make_cleaner(clock)
    assert clean(cleaner, log) is not None  # each full segment cleaned on its own
    cleaned = log.segment_base_offsets()
    fill(log, 100, keys=2)
    assert clean(cleaner, log) is not None  # the small cleaned ones now go together
    assert len(cleaned) > 10
    assert [b for b in log.segment_base_offsets() if b < cleaned[-1]] == [0]
    assert log.segment_base_offsets()[0] == 0
    names = {p.name for p in log.directory.iterdir() if p.name[0].isdigit()}
    assert names == {
        f"{base:020d}{suffix}"
        for base in log.segment_base_offsets()
        for suffix in (".log", ".index", ".timeindex")
    }


def test_a_leftover_cleaned_file_is_deleted_at_open(tmp_path: Path, clock: ManualClock) -> None:
    log = disk_log(tmp_path)
    fill(log, 60, keys=2)
    before = all_records(log)
    cleaner = make_cleaner(clock)
    plan = cleaner.plan("t-0", log, log.log_end_offset, NOW)
    assert plan is not None
    result = cleaner.cleaner.clean(plan, NOW)  # written, never swapped: the crash
    assert [p for p in log.directory.iterdir() if p.name.endswith(".cleaned")]
    for _, writer in result.groups:
        writer.segment.close()  # type: ignore[attr-defined]
    log.close()
    reopened = DiskLog(log.directory, log.config)
    assert not [p for p in reopened.directory.iterdir() if p.name.endswith(".cleaned")]
    assert all_records(reopened) == before
    reopened.close()


@pytest.mark.parametrize("old_deleted", ["none", "first", "all"])
def test_a_swap_interrupted_by_a_crash_completes_at_open(
    tmp_path: Path, clock: ManualClock, old_deleted: str
) -> None:
    log = disk_log(tmp_path)
    fill(log, 60, keys=2)
    before = all_records(log)
    cleaner = make_cleaner(clock)
    plan = cleaner.plan("t-0", log, log.log_end_offset, NOW)
    assert plan is not None
    result = cleaner.cleaner.clean(plan, NOW)
    directory = log.directory
    old_bases = log.segment_base_offsets()
    # the crash: cleaned files renamed to .swap, some old segments already deleted
    for (start, end), writer in result.groups:
        segment = writer.segment  # type: ignore[attr-defined]
        segment.change_file_suffix(".swap")
        segment.close()
        doomed = {"none": [], "first": old_bases[start : start + 1], "all": old_bases[start:end]}
        for base in doomed[old_deleted]:
            for suffix in (".log", ".index", ".timeindex"):
                (directory / f"{base:020d}{suffix}").unlink()
    log.close()
    os.remove(directory / ".kafka_cleanshutdown")  # and it was a crash
    reopened = DiskLog(directory, log.config)
    assert not [p for p in directory.iterdir() if ".swap" in p.name or ".cleaned" in p.name]
    assert all_records(reopened) == compacted(before, result.dirty_end)
    assert reopened.log_end_offset == 60 and reopened.log_start_offset == 0
    fill(reopened, 5, keys=2)  # and it goes on
    assert reopened.log_end_offset == 65
    reopened.close()


def test_config_keys_parse() -> None:
    cfg = LogConfig.from_topic_configs(
        {
            "cleanup.policy": "compact,delete",
            "delete.retention.ms": "5",
            "min.cleanable.dirty.ratio": "0.25",
            "min.compaction.lag.ms": "7",
        }
    )
    assert (cfg.compacts, cfg.deletes) == (True, True)
    assert (cfg.delete_retention_ms, cfg.min_cleanable_dirty_ratio, cfg.min_compaction_lag_ms) == (
        5,
        0.25,
        7,
    )
    assert LogConfig.from_topic_configs(cfg.to_topic_configs()) == cfg
    with pytest.raises(ValueError, match=r"min\.cleanable\.dirty\.ratio"):
        LogConfig.from_topic_configs({"min.cleanable.dirty.ratio": "1.5"})
