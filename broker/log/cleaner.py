"""Kafka's ``Cleaner``: compacts one log from a snapshot of its cleanable units.

It runs in a worker thread (log_cleaner.py says why) and touches nothing the event loop
uses: it reads the snapshot (cleanable.py) and writes new units through the snapshot's
writers; the log swaps them in afterwards, on the loop.

``clean`` does what Kafka's ``doClean`` does:

1. ``build_offset_map``: every keyed record of the dirty units (offsets at or above the
   first dirty offset, below the first uncleanable one) goes into a map key -> offset of
   its latest record. The map holds at most ``max_entries`` keys (Kafka sizes its
   SkimpyOffsetMap from log.cleaner.dedupe.buffer.size at 24 bytes an entry, with a
   0.9 load factor); when it fills, the dirty section ends after the unit that filled
   it (a unit is never split, so one unit may take it past the bound), and the rest
   waits for the next cleaning.
2. The units from the log start to the end of the mapped section are cleaned, group by
   group (DiskLog: Kafka's groupSegmentsBySize; MemoryLog: one group), every batch
   through cleaner_batch.filter_batch. A group of one unit in which nothing changed is
   not swapped.
3. The new checkpoint: the first dirty offset becomes the end of the mapped section; the
   delete horizon is the latest horizon of a batch that still holds tombstones (a later
   cleaning after it may remove them), -1 if none.

Records are compared with the map whatever section they lie in: a record survives
unless the map holds a later offset for its key, so a stale map entry can only keep a
record, never remove one wrongly.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from broker.log.cleanable import CleanedWriter, CleanerCheckpoint, CleanerSnapshot
from broker.log.cleaner_batch import NO_TIMESTAMP, filter_batch, iter_keys
from broker.log.log_config import LogConfig
from protocol.record_batch import CorruptRecordError, RecordBatchHeader, parse_batch_header

log = logging.getLogger("broker.log.cleaner")

OFFSET_MAP_BYTES_PER_ENTRY = 24  # Kafka: MD5 hash (16) + offset (8)
OFFSET_MAP_LOAD_FACTOR = 0.9  # Kafka's log.cleaner.io.buffer.load.factor
# In a worker thread, hand the GIL over at least this often (seconds), so that the
# event loop never waits for it long: CPython's own switch interval is 5 ms, and a loop
# iteration may need the GIL several times.
YIELD_INTERVAL_S = 0.0005


def offset_map_capacity(dedupe_buffer_size: int, threads: int = 1) -> int:
    """Keys the offset map may hold, as Kafka sizes it per cleaner thread."""
    per_thread = dedupe_buffer_size // max(threads, 1)
    return max(int(per_thread / OFFSET_MAP_BYTES_PER_ENTRY * OFFSET_MAP_LOAD_FACTOR), 1)


class CleanerAbortedError(Exception):
    """The cleaner is stopping: the cleaning in progress is dropped."""


@dataclass(slots=True)
class LogToClean:
    """One log's cleaning, planned on the loop (Kafka's LogToClean)."""

    name: str
    snapshot: CleanerSnapshot
    config: LogConfig
    first_dirty_offset: int
    first_dirty_index: int  # first unit holding a dirty offset
    end_index: int  # units [0, end_index) are cleanable
    clean_bytes: int
    cleanable_bytes: int
    tombstones_due: bool = False

    @property
    def cleanable_ratio(self) -> float:
        total = self.clean_bytes + self.cleanable_bytes
        return self.cleanable_bytes / total if total else 0.0


@dataclass(slots=True)
class CleanerStats:
    bytes_read: int = 0
    bytes_written: int = 0
    batches_read: int = 0
    batches_written: int = 0
    records_removed: int = 0
    map_keys: int = 0


@dataclass(slots=True)
class CleaningResult:
    """Cleaned groups ready to swap in, and the checkpoint the log takes with them."""

    groups: list[tuple[tuple[int, int], CleanedWriter]]
    checkpoint: CleanerCheckpoint
    dirty_start: int
    dirty_end: int
    stats: CleanerStats = field(default_factory=CleanerStats)

    def abort(self) -> None:
        for _, writer in self.groups:
            writer.abort()
        self.groups = []


class Cleaner:
    """Kafka's Cleaner (one per cleaner thread)."""

    def __init__(
        self,
        cleaner_id: int,
        max_entries: int,
        abort: threading.Event,
        yield_interval_s: float = YIELD_INTERVAL_S,
    ) -> None:
        self.id = cleaner_id
        self.max_entries = max_entries
        self._abort = abort
        self._yield_interval_s = yield_interval_s
        self._last_yield = time.perf_counter()

    def _check_abort(self) -> None:
        """Between batches: stop if asked to, and give the GIL away now and then."""
        if self._abort.is_set():
            raise CleanerAbortedError
        now = time.perf_counter()
        if now - self._last_yield >= self._yield_interval_s:
            time.sleep(0)
            self._last_yield = time.perf_counter()

    def build_offset_map(
        self, plan: LogToClean, stats: CleanerStats
    ) -> tuple[dict[bytes, int], int]:
        """Key -> latest offset over the dirty units; returns it and where the mapped
        section ends (an index of units)."""
        snapshot = plan.snapshot
        offset_map: dict[bytes, int] = {}
        first_dirty = plan.first_dirty_offset
        end = min(plan.first_dirty_index, plan.end_index)
        while end < plan.end_index:
            for header, batch in snapshot.read_batches(end, end + 1):
                self._check_abort()
                if header.is_control or header.is_transactional or header.last_offset < first_dirty:
                    continue
                try:
                    for offset, key in iter_keys(batch, header):
                        if offset >= first_dirty:
                            offset_map[key] = offset
                except CorruptRecordError as exc:
                    log.warning("Cleaner %d: %s: skipping a batch: %s", self.id, plan.name, exc)
            end += 1
            if len(offset_map) >= self.max_entries:
                break
        stats.map_keys = len(offset_map)
        return offset_map, end

    def clean(self, plan: LogToClean, now_ms: int) -> CleaningResult:
        """Clean ``plan``'s log up to the end of the mapped dirty section."""
        snapshot = plan.snapshot
        stats = CleanerStats()
        offset_map, end = self.build_offset_map(plan, stats)
        retain_empty = _LastBatchOfProducer(snapshot)
        horizon = NO_TIMESTAMP
        groups: list[tuple[tuple[int, int], CleanedWriter]] = []
        dirty_end = plan.first_dirty_offset
        if end > 0:
            dirty_end = max(dirty_end, snapshot.unit_end_offset(end - 1))
        result = CleaningResult(
            groups, CleanerCheckpoint(dirty_end), plan.first_dirty_offset, dirty_end, stats
        )
        try:
            for group in snapshot.group_units(end):
                writer = snapshot.new_writer(group)
                groups.append((group, writer))
                changed = group[1] - group[0] > 1
                for header, batch in snapshot.read_batches(*group):
                    self._check_abort()
                    stats.batches_read += 1
                    stats.bytes_read += header.size
                    try:
                        filtered = filter_batch(
                            batch,
                            header,
                            offset_map,
                            now_ms=now_ms,
                            delete_retention_ms=plan.config.delete_retention_ms,
                            retain_empty=retain_empty,
                        )
                    except CorruptRecordError as exc:
                        log.warning("Cleaner %d: %s: keeping a batch: %s", self.id, plan.name, exc)
                        writer.append(batch, header)
                        stats.batches_written += 1
                        stats.bytes_written += header.size
                        continue
                    changed = changed or filtered.changed
                    stats.records_removed += filtered.records_removed
                    horizon = max(horizon, filtered.delete_horizon_ms)
                    if filtered.data is None:
                        continue
                    new_header = (
                        header if not filtered.changed else parse_batch_header(filtered.data)
                    )
                    writer.append(filtered.data, new_header)
                    stats.batches_written += 1
                    stats.bytes_written += len(filtered.data)
                if changed:
                    writer.finish()
                else:
                    writer.abort()
                    groups.pop()
        except BaseException:
            result.abort()
            raise
        result.checkpoint = CleanerCheckpoint(result.dirty_end, horizon)
        return result


class _LastBatchOfProducer:
    """Whether a batch is its producer's last in the log (read once, when first asked:
    only a batch of an idempotent producer left without records asks)."""

    def __init__(self, snapshot: CleanerSnapshot) -> None:
        self._snapshot = snapshot
        self._last: dict[int, int] | None = None

    def _load(self) -> dict[int, int]:
        last: dict[int, int] = {}
        snapshot = self._snapshot
        for header, _ in snapshot.read_batches(0, snapshot.unit_count):
            if header.producer_id >= 0:
                last[header.producer_id] = header.last_offset
        for header in snapshot.tail_headers():
            if header.producer_id >= 0:
                last[header.producer_id] = header.last_offset
        return last

    def __call__(self, header: RecordBatchHeader) -> bool:
        if self._last is None:
            self._last = self._load()
        return self._last.get(header.producer_id) == header.last_offset
