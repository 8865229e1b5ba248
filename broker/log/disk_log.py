"""A partition log on disk: Kafka's `<topic>-<partition>/` directory of segments.

Layout, as Kafka's::

    00000000000000000000.log        record batches back to back
    00000000000000000000.index      sparse offset index
    00000000000000000000.timeindex  sparse time index
    00000000000000001234.log        next segment, named by its base offset
    ...
    log-start-offset                the log start when DeleteRecords/retention moved it
                                    inside a segment (Kafka keeps this in a data-dir
                                    checkpoint; one small file per partition is simpler)
    cleaner-offset-checkpoint       the log cleaner's first dirty offset and latest
                                    tombstone delete horizon (Kafka's data-dir file of
                                    that name, here per partition)
    .kafka_cleanshutdown            written by close(), removed on open

Durability: each append is written to the OS before append returns, so a kill -9 of
the broker loses nothing; a power loss can lose what the OS had not written back,
unless the topic sets flush.messages=1 (`LogConfig.fsync_on_append`).

Recovery on open: after a clean shutdown the indexes are trusted (sanity-checked and
the tail past their last entry rescanned). After a crash, the last non-empty segment
(the one being written) is verified batch by batch and cut at the first torn or
corrupt batch; any segment whose indexes are missing or inconsistent is rebuilt the
same way. If corruption turns up in a segment that is not the last, that segment is
cut there and every later segment is deleted, as Kafka does: offsets must stay
contiguous.

The log cleaner's swap, as Kafka's: a cleaned group of segments is written as
`<base>.log.cleaned` (+ `.index.cleaned`, `.timeindex.cleaned`, fsynced), renamed to
`.swap`, the old segments of the group are deleted, and the `.swap` files are renamed
into place (`replace_cleaned`). Recovery on open: a leftover `.cleaned` (or `.deleted`,
`.tmp`) file is deleted; a `<base>.log.swap` completes its swap -- every segment whose
base offset lies in [base, the swap's next offset) is deleted, the swap renamed into
place and its indexes rebuilt.
"""

from __future__ import annotations

import bisect
import logging
import os
import re
from pathlib import Path

from broker.log.cleanable import (
    SWAP_SUFFIX,
    CleanedWriter,
    CleanerCheckpoint,
    DiskSnapshot,
    SegmentWriter,
)
from broker.log.errors import OffsetOutOfRangeError
from broker.log.log_config import LogConfig
from broker.log.partition_log import AppendInfo, prepare_follower_append, prepare_leader_append
from broker.log.retention import deletable_prefix
from broker.log.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, LogSegment
from protocol.record_batch import RecordBatchHeader

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LOG_START_OFFSET_FILE = "log-start-offset"
CLEANER_CHECKPOINT_FILE = "cleaner-offset-checkpoint"
_SEGMENT_NAME = re.compile(r"^(\d{20})\.(log|index|timeindex)$")
_STRAY_SUFFIXES = (".deleted", ".cleaned", ".tmp")
_INT32_MAX = 2**31 - 1


class DiskLog:
    def __init__(self, directory: Path, config: LogConfig | None = None) -> None:
        self.directory = directory
        self.config = config or LogConfig()
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._size = 0
        self._log_start_offset = 0
        self._log_end_offset = 0
        self.recovered_bytes = 0  # bytes cut off by recovery when this log was opened
        self._closed = False
        # bumped whenever batches below the log end are removed or replaced
        self._layout_version = 0
        self.cleaner_checkpoint = CleanerCheckpoint()
        directory.mkdir(parents=True, exist_ok=True)
        self._complete_swaps()
        self._load()

    # -- loading --------------------------------------------------------------------

    def _load(self) -> None:
        marker = self.directory / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        bases: list[int] = []
        index_only: set[int] = set()
        for path in self.directory.iterdir():
            if path.name.endswith(_STRAY_SUFFIXES):
                path.unlink(missing_ok=True)
                continue
            m = _SEGMENT_NAME.match(path.name)
            if m is None:
                continue
            base = int(m.group(1))
            if m.group(2) == "log":
                bases.append(base)
            else:
                index_only.add(base)
        bases.sort()
        for base in index_only - set(bases):  # indexes whose segment is gone
            for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                (self.directory / f"{base:020d}{suffix}").unlink(missing_ok=True)

        persisted_start = self._read_log_start_offset()
        recover_from = len(bases)
        if not clean:
            recover_from = len(bases) - 1
            while recover_from > 0 and (
                (self.directory / f"{bases[recover_from]:020d}{LOG_SUFFIX}").stat().st_size == 0
            ):
                recover_from -= 1
        for i, base in enumerate(bases):
            seg, truncated = LogSegment.open(
                self.directory, base, self.config, recover=i >= recover_from
            )
            self._segments.append(seg)
            self.recovered_bytes += truncated
            if truncated and i < len(bases) - 1:
                log.warning(
                    "%s: corruption in segment %d; deleting the %d segments after it",
                    self.directory,
                    base,
                    len(bases) - 1 - i,
                )
                for later in bases[i + 1 :]:
                    for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                        (self.directory / f"{later:020d}{suffix}").unlink(missing_ok=True)
                break
        if not self._segments:
            start = persisted_start if persisted_start is not None else 0
            self._segments.append(LogSegment.create(self.directory, start, self.config))
        for seg in self._segments[:-1]:
            seg.on_become_inactive()
        self._bases = [s.base_offset for s in self._segments]
        self._size = sum(s.size for s in self._segments)
        active = self._segments[-1]
        self._log_end_offset = max(active.next_offset, active.base_offset)
        start = self._segments[0].base_offset
        if persisted_start is not None:
            start = max(start, persisted_start)
        self._log_start_offset = min(start, self._log_end_offset)
        self.cleaner_checkpoint = self._read_cleaner_checkpoint()
        marker.unlink(missing_ok=True)

    def _complete_swaps(self) -> None:
        """Finish a cleaner swap a crash interrupted (see the module docstring)."""
        swaps: list[int] = []
        for path in self.directory.iterdir():
            if not path.name.endswith(SWAP_SUFFIX):
                continue
            m = _SEGMENT_NAME.match(path.name[: -len(SWAP_SUFFIX)])
            if m is not None and m.group(2) == "log":
                swaps.append(int(m.group(1)))
            else:
                path.unlink(missing_ok=True)  # index swaps: rebuilt below
        for base in sorted(swaps):
            seg, _ = LogSegment.open(
                self.directory, base, self.config, recover=True, file_suffix=SWAP_SUFFIX
            )
            end = max(seg.next_offset, base + 1)
            for path in list(self.directory.iterdir()):
                m = _SEGMENT_NAME.match(path.name)
                if m is not None and base <= int(m.group(1)) < end:
                    path.unlink(missing_ok=True)
            seg.change_file_suffix("")
            seg.close()
            log.warning("%s: completed the swap of cleaned segment %d", self.directory, base)

    def _read_cleaner_checkpoint(self) -> CleanerCheckpoint:
        try:
            first_dirty, horizon = (self.directory / CLEANER_CHECKPOINT_FILE).read_text().split()
            checkpoint = CleanerCheckpoint(int(first_dirty), int(horizon))
        except (FileNotFoundError, ValueError):
            return CleanerCheckpoint(self._log_start_offset)
        if not self._log_start_offset <= checkpoint.first_dirty_offset <= self._log_end_offset:
            return CleanerCheckpoint(self._log_start_offset, checkpoint.delete_horizon_ms)
        return checkpoint

    def _write_cleaner_checkpoint(self) -> None:
        path = self.directory / CLEANER_CHECKPOINT_FILE
        tmp = path.with_name(path.name + ".tmp")
        checkpoint = self.cleaner_checkpoint
        tmp.write_text(f"{checkpoint.first_dirty_offset} {checkpoint.delete_horizon_ms}\n")
        os.replace(tmp, path)

    def _read_log_start_offset(self) -> int | None:
        path = self.directory / LOG_START_OFFSET_FILE
        try:
            return int(path.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None

    def _write_log_start_offset(self) -> None:
        path = self.directory / LOG_START_OFFSET_FILE
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(f"{self._log_start_offset}\n")
        os.replace(tmp, path)

    # -- properties -----------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def size_bytes(self) -> int:
        return self._size

    def segment_base_offsets(self) -> list[int]:
        """Base offsets of the segments, oldest first (for tests and metrics)."""
        return list(self._bases)

    @property
    def active_segment_base_offset(self) -> int:
        return self._bases[-1]

    @property
    def layout_version(self) -> int:
        return self._layout_version

    # -- appends --------------------------------------------------------------------

    def append_as_leader(
        self,
        records: bytes,
        *,
        log_append_time_ms: int | None = None,
        leader_epoch: int = 0,
        validated: list[RecordBatchHeader] | None = None,
    ) -> AppendInfo:
        data, info = prepare_leader_append(
            records,
            config=self.config,
            log_end_offset=self._log_end_offset,
            log_append_time_ms=log_append_time_ms,
            leader_epoch=leader_epoch,
            validated=validated,
        )
        self._append(data, info.batches)
        info.log_start_offset = self._log_start_offset
        return info

    def append_as_follower(self, records: bytes) -> AppendInfo:
        info = prepare_follower_append(records, log_end_offset=self._log_end_offset)
        if info.batches:
            self._append(records, info.batches)
        info.log_start_offset = self._log_start_offset
        return info

    def _append(self, data: bytes | bytearray, headers: list[RecordBatchHeader]) -> None:
        active = self._segments[-1]
        first, last = headers[0].base_offset, headers[-1].last_offset
        if active.size > 0 and (
            active.size + len(data) > self.config.segment_bytes
            or last - active.base_offset > _INT32_MAX
        ):
            active = self._roll(first)
        active.append(data, headers)
        self._size += len(data)
        self._log_end_offset = last + 1

    def _roll(self, base_offset: int) -> LogSegment:
        """Start a new active segment at `base_offset`."""
        self._segments[-1].on_become_inactive()
        seg = LogSegment.create(self.directory, base_offset, self.config)
        self._segments.append(seg)
        self._bases.append(base_offset)
        return seg

    # -- reads ----------------------------------------------------------------------

    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one_batch: bool = True,
    ) -> bytes:
        """Whole batches from the one holding fetch_offset, from a single segment (as
        Kafka: a fetch that reaches a segment's end returns what that segment has)."""
        if fetch_offset < self._log_start_offset or fetch_offset > self._log_end_offset:
            raise OffsetOutOfRangeError(fetch_offset, self._log_start_offset, self._log_end_offset)
        if fetch_offset == self._log_end_offset:
            return b""
        i = max(bisect.bisect_right(self._bases, fetch_offset) - 1, 0)
        for seg in self._segments[i:]:
            data = seg.read(fetch_offset, max_bytes, max_offset, min_one_batch)
            if data is not None:
                return data
        return b""

    def offset_for_timestamp(self, ts_ms: int) -> tuple[int, int] | None:
        """Earliest (offset, timestamp) of a record with timestamp >= ts_ms (record
        granularity), ignoring records below the log start offset."""
        for seg in self._segments:
            if seg.max_timestamp >= ts_ms and seg.next_offset > self._log_start_offset:
                found = seg.find_offset_by_timestamp(ts_ms, self._log_start_offset)
                if found is not None:
                    return found
        return None

    def max_timestamp(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with the largest timestamp."""
        best: LogSegment | None = None
        for seg in self._segments:
            if seg.next_offset <= self._log_start_offset:
                continue
            if best is None or seg.max_timestamp > best.max_timestamp:
                best = seg
        if best is None or best.max_timestamp < 0:
            return None
        return best.record_for_max_timestamp(self._log_start_offset)

    # -- deletion -------------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Drop everything at and above `offset`. A batch is removed whole: if `offset`
        falls inside one, the log end becomes that batch's base offset."""
        if offset >= self._log_end_offset:
            return
        if offset < self._log_start_offset:
            self.truncate_fully_and_start_at(offset)
            return
        while len(self._segments) > 1 and self._segments[-1].base_offset >= offset:
            self._delete_segment(self._segments.pop())
            self._bases.pop()
        active = self._segments[-1]
        new_end = offset
        if active.base_offset >= offset:
            self._delete_segment(self._segments.pop())
            self._bases.pop()
            self._segments.append(LogSegment.create(self.directory, offset, self.config))
            self._bases.append(offset)
        else:
            before = active.size
            removed_from = active.truncate_to(offset)
            self._size -= before - active.size
            if removed_from is not None:
                new_end = min(offset, removed_from)
        self._log_end_offset = new_end
        if self._log_start_offset > new_end:
            self._log_start_offset = new_end
            self._write_log_start_offset()
        self._layout_changed()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and restart the log, empty, at `offset`."""
        for seg in self._segments:
            self._delete_segment(seg)
        self._segments = [LogSegment.create(self.directory, offset, self.config)]
        self._bases = [offset]
        self._size = 0
        self._log_start_offset = self._log_end_offset = offset
        self._write_log_start_offset()
        self._layout_changed()

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start to `offset`, delete segments wholly below
        it (never the active one). Returns the new log start offset."""
        if offset > self._log_end_offset:
            raise OffsetOutOfRangeError(offset, self._log_start_offset, self._log_end_offset)
        if offset <= self._log_start_offset:
            return self._log_start_offset
        self._log_start_offset = offset
        self._write_log_start_offset()
        self._layout_changed()
        count = 0
        while count + 1 < len(self._segments) and self._bases[count + 1] <= offset:
            count += 1
        self._delete_oldest(count)
        return self._log_start_offset

    def apply_retention(self, now_ms: int, *, high_watermark: int | None = None) -> int:
        """retention.ms, retention.bytes and log-start rules over whole segments
        (see retention.py); returns bytes deleted. If every segment goes, a new empty
        active segment is rolled at the log end first, so offsets continue."""
        count = deletable_prefix(
            base_offsets=self._bases,
            sizes=[s.size for s in self._segments],
            largest_timestamps=[s.largest_timestamp for s in self._segments],
            log_end_offset=self._log_end_offset,
            log_start_offset=self._log_start_offset,
            high_watermark=high_watermark,
            config=self.config,
            now_ms=now_ms,
        )
        if count == 0:
            return 0
        if count == len(self._segments):
            self._roll(self._log_end_offset)
        return self._delete_oldest(count)

    def _delete_oldest(self, count: int) -> int:
        if count <= 0:
            return 0
        self._layout_changed()
        deleted = 0
        for seg in self._segments[:count]:
            deleted += seg.size
            self._delete_segment(seg)
        del self._segments[:count]
        del self._bases[:count]
        if self._bases[0] > self._log_start_offset:
            self._log_start_offset = self._bases[0]
            self._write_log_start_offset()
        return deleted

    def _delete_segment(self, seg: LogSegment) -> None:
        self._size -= seg.size
        seg.delete()

    def _layout_changed(self) -> None:
        """Batches went: a cleaning under way is void; the cleaner's first dirty offset
        stays within the log (Kafka's maybeTruncateCheckpoint)."""
        self._layout_version += 1
        checkpoint = self.cleaner_checkpoint
        if checkpoint.first_dirty_offset > self._log_end_offset:
            self.cleaner_checkpoint = CleanerCheckpoint(
                self._log_end_offset, checkpoint.delete_horizon_ms
            )
            self._write_cleaner_checkpoint()

    # -- the log cleaner (log_cleaner.py) ---------------------------------------------

    def cleaner_snapshot(self) -> DiskSnapshot:
        """The segments below the active one, for the cleaner."""
        return DiskSnapshot(self._layout_version, self.directory, self.config, self._segments)

    def replace_cleaned(
        self,
        snapshot: object,
        groups: list[tuple[tuple[int, int], CleanedWriter]],
        checkpoint: CleanerCheckpoint | None,
    ) -> bool:
        """Swap each cleaned segment in for its group of segments (`.cleaned` ->
        `.swap` -> delete the old ones -> rename into place). False, and nothing
        changes, if the log changed since ``snapshot`` (the caller aborts the writers).
        Groups may come in several calls, last group first (the snapshot follows);
        the checkpoint, when given, is taken with the call's groups.
        """
        if (
            self._closed
            or not isinstance(snapshot, DiskSnapshot)
            or snapshot.layout_version != self._layout_version
        ):
            return False
        for (start, end), writer in sorted(groups, key=lambda g: g[0], reverse=True):
            assert isinstance(writer, SegmentWriter)
            old = self._segments[start:end]
            assert [s.segment for s in snapshot.views[start:end]] == old
            cleaned = writer.segment
            cleaned.change_file_suffix(SWAP_SUFFIX)
            for seg in old:
                self._delete_segment(seg)
            cleaned.change_file_suffix("")
            self._segments[start:end] = [cleaned]
            self._bases[start:end] = [cleaned.base_offset]
            self._size += cleaned.size
        self._layout_version += 1
        snapshot.layout_version = self._layout_version
        if checkpoint is not None:
            self.cleaner_checkpoint = checkpoint
            self._write_cleaner_checkpoint()
        return True

    # -- lifecycle ------------------------------------------------------------------

    def flush(self) -> None:
        """fsync every segment and index (rare: shutdown, or an operator's request)."""
        for seg in self._segments:
            seg.flush()

    def close(self) -> None:
        """Close files and mark the shutdown clean, so the next open skips recovery."""
        if self._closed:
            return
        self._closed = True
        self._layout_version += 1
        for seg in self._segments:
            seg.close()
        (self.directory / CLEAN_SHUTDOWN_FILE).touch()
