"""One log segment: `<base>.log` with its `.index` and `.timeindex`, as Kafka lays out.

The `.log` file is raw record batches back to back, exactly as appended. Appends are a
positioned write to the OS (durable against a kill -9 of the process; fsync only with
fsync_on_append). Reads use the sparse offset index to find a starting position, scan
at most about index.interval.bytes of batch headers, then read the answer with one
pread: nothing reads or copies the whole segment.

Recovery (`recover`) walks every batch verifying length, magic, CRC and offset order,
cuts the file at the first bad or partial batch and rebuilds both indexes from what
remains.

The log cleaner writes a cleaned segment under Kafka's temporary suffixes
(`<base>.log.cleaned`, then `.swap`: `file_suffix`) and renames it into place with
`change_file_suffix("")`; the open file descriptor survives the renames.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Iterator
from pathlib import Path

import crc32c

from broker.log.log_config import LogConfig
from broker.log.offset_index import IndexCorruptError, OffsetIndex
from broker.log.time_index import TimeIndex
from broker.log.timestamps import first_record_at_or_after, record_with_timestamp
from protocol.record_batch import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    CorruptRecordError,
    RecordBatchHeader,
    parse_batch_header,
)

log = logging.getLogger(__name__)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
_INT32_MAX = 2**31 - 1
_RECOVERY_CHUNK = 1024 * 1024  # recovery reads whole batches, in big sequential reads
_LOOKUP_CHUNK = 8 * 1024  # lookups read headers only, over about index.interval.bytes
_OFFSET_AND_LENGTH = struct.Struct(">qi")


def segment_file_name(base_offset: int) -> str:
    """Kafka's 20-digit zero-padded base offset."""
    return f"{base_offset:020d}"


class LogSegment:
    def __init__(
        self,
        directory: Path,
        base_offset: int,
        config: LogConfig,
        fd: int,
        file_suffix: str = "",
    ) -> None:
        name = segment_file_name(base_offset)
        self.directory = directory
        self.base_offset = base_offset
        self.config = config
        self.file_suffix = file_suffix
        self.log_path = directory / (name + LOG_SUFFIX + file_suffix)
        self.offset_index = OffsetIndex(
            directory / (name + INDEX_SUFFIX + file_suffix), base_offset
        )
        self.time_index = TimeIndex(
            directory / (name + TIME_INDEX_SUFFIX + file_suffix), base_offset
        )
        self._fd = fd
        self.size = 0
        # offset after the last batch here (base_offset while empty)
        self.next_offset = base_offset
        self.max_timestamp = -1
        # last offset of the batch where max_timestamp first appeared
        self.offset_of_max_timestamp = -1
        self._bytes_since_index_entry = 0

    # -- creation and loading -----------------------------------------------------

    @classmethod
    def create(
        cls, directory: Path, base_offset: int, config: LogConfig, file_suffix: str = ""
    ) -> LogSegment:
        name = segment_file_name(base_offset)
        fd = os.open(
            directory / (name + LOG_SUFFIX + file_suffix),
            os.O_RDWR | os.O_CREAT | os.O_TRUNC,
            0o644,
        )
        seg = cls(directory, base_offset, config, fd, file_suffix)
        seg.offset_index.reset()
        seg.time_index.reset()
        return seg

    @classmethod
    def open(
        cls,
        directory: Path,
        base_offset: int,
        config: LogConfig,
        *,
        recover: bool,
        file_suffix: str = "",
    ) -> tuple[LogSegment, int]:
        """Open an existing segment; returns it and how many bytes recovery cut off.

        With `recover`, every batch is verified (the segment was being written when the
        process died). Otherwise the indexes are trusted after a sanity check and only
        the tail past the last index entry is scanned; a missing or inconsistent index
        falls back to a full recovery.
        """
        name = segment_file_name(base_offset)
        fd = os.open(directory / (name + LOG_SUFFIX + file_suffix), os.O_RDWR)
        seg = cls(directory, base_offset, config, fd, file_suffix)
        seg.size = os.fstat(fd).st_size
        if not recover:
            try:
                seg.offset_index = OffsetIndex.load(seg.offset_index.path, base_offset)
                seg.time_index = TimeIndex.load(seg.time_index.path, base_offset)
                seg._load_tail()
            except (FileNotFoundError, IndexCorruptError) as exc:
                log.warning("%s: rebuilding indexes (%s)", seg.log_path, exc)
                recover = True
        truncated = seg.recover() if recover else 0
        return seg, truncated

    def _load_tail(self) -> None:
        """Recompute next offset, max timestamp and the index cadence from the last
        index entry on; IndexCorruptError if the index does not match the log."""
        entry = self.offset_index.last_entry()
        start = 0
        if entry is not None:
            last_offset, start = entry
            if start >= self.size:
                raise IndexCorruptError(f"index points at {start}, past the log end")
            header = self._header_at(start)
            if header is None or header.last_offset != last_offset:
                raise IndexCorruptError(f"index entry for offset {last_offset} does not match")
        tentry = self.time_index.last_entry()
        if tentry is not None:
            self.max_timestamp, self.offset_of_max_timestamp = tentry
        self.next_offset = self.base_offset
        end = start
        self._bytes_since_index_entry = 0
        for pos, header in self._scan(start, self.size, verify_crc=False):
            self._track(header)
            self._bytes_since_index_entry += header.size
            end = pos + header.size
        if end != self.size:
            raise IndexCorruptError(f"log does not end on a batch boundary ({end} != {self.size})")
        if entry is not None and self.next_offset == self.base_offset:
            raise IndexCorruptError("no batch found after the last index entry")

    def recover(self) -> int:
        """Verify every batch, cut the file after the last good one, rebuild indexes.

        Returns the number of bytes cut off.
        """
        file_size = os.fstat(self._fd).st_size
        self.offset_index.reset()
        self.time_index.reset()
        self.size = 0
        self.next_offset = self.base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self._bytes_since_index_entry = 0
        valid_end = 0
        for pos, header in self._scan(0, file_size, verify_crc=True):
            if (
                header.base_offset < self.next_offset
                or header.last_offset_delta < 0
                or header.last_offset - self.base_offset > _INT32_MAX
            ):
                log.warning("%s: batch at position %d has offsets out of order", self.log_path, pos)
                break
            self._index_batch(pos, header)
            valid_end = pos + header.size
        self.size = valid_end
        truncated = file_size - valid_end
        if truncated:
            log.warning(
                "%s: cut %d bytes of torn or corrupt data at position %d",
                self.log_path,
                truncated,
                valid_end,
            )
            os.ftruncate(self._fd, valid_end)
        return truncated

    # -- appends ------------------------------------------------------------------

    def append(self, data: bytes | bytearray, headers: list[RecordBatchHeader]) -> None:
        """Write whole batches (already offset-assigned) at the end of the segment."""
        position = self.size
        view = memoryview(data)
        written = 0
        while written < len(view):
            written += os.pwrite(self._fd, view[written:], position + written)
        for header in headers:
            self._index_batch(position, header)
            position += header.size
        self.size = position
        if self.config.fsync_on_append:
            os.fsync(self._fd)

    def _index_batch(self, position: int, header: RecordBatchHeader) -> None:
        """Kafka's cadence: a batch starting more than index.interval.bytes after the
        last indexed one gets an offset-index entry (and a time-index entry if the max
        timestamp grew)."""
        self._track(header)
        if self._bytes_since_index_entry > self.config.index_interval_bytes:
            self.offset_index.append(header.last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self._bytes_since_index_entry = 0
        self._bytes_since_index_entry += header.size

    def _track(self, header: RecordBatchHeader) -> None:
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp = header.max_timestamp
            self.offset_of_max_timestamp = header.last_offset
        self.next_offset = header.last_offset + 1

    def on_become_inactive(self) -> None:
        """Called when a newer segment takes over appends: record the final max
        timestamp so a reopen gets it from the time index alone, and free the index
        writers."""
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        self.offset_index.close()
        self.time_index.close()

    # -- reads --------------------------------------------------------------------

    def _header_at(self, position: int) -> RecordBatchHeader | None:
        data = os.pread(self._fd, BATCH_HEADER_SIZE, position)
        try:
            return parse_batch_header(data)
        except CorruptRecordError:
            return None

    def _scan(
        self, start: int, end: int, *, verify_crc: bool
    ) -> Iterator[tuple[int, RecordBatchHeader]]:
        """(position, header) of each whole batch in [start, end), reading in chunks.

        Stops silently at the first batch that is partial, malformed or (with
        verify_crc) fails its CRC: callers compare where it stopped with `end`.
        """
        chunk = _RECOVERY_CHUNK if verify_crc else _LOOKUP_CHUNK
        buf = b""
        buf_start = start
        pos = start
        while pos < end:
            rel = pos - buf_start
            if len(buf) - rel < BATCH_HEADER_SIZE:
                buf = os.pread(self._fd, min(chunk, end - pos), pos)
                buf_start, rel = pos, 0
                if len(buf) < LOG_OVERHEAD:
                    return
            _, batch_length = _OFFSET_AND_LENGTH.unpack_from(buf, rel)
            size = batch_length + LOG_OVERHEAD
            if size < BATCH_HEADER_SIZE or pos + size > end:
                return
            try:
                header = parse_batch_header(buf, rel)
            except CorruptRecordError:
                return
            if verify_crc:
                if len(buf) - rel < size:
                    buf = os.pread(self._fd, max(size, min(chunk, end - pos)), pos)
                    buf_start, rel = pos, 0
                    if len(buf) < size:
                        return
                if crc32c.crc32c(memoryview(buf)[rel + 21 : rel + size]) != header.crc:
                    return
            yield pos, header
            pos += size

    def translate_offset(self, offset: int) -> tuple[int, RecordBatchHeader] | None:
        """(position, header) of the first batch whose last offset is >= `offset`."""
        start = self.offset_index.lookup(offset)
        for pos, header in self._scan(start, self.size, verify_crc=False):
            if header.last_offset >= offset:
                return pos, header
        return None

    def read(
        self, fetch_offset: int, max_bytes: int, max_offset: int | None, min_one_batch: bool
    ) -> bytes | None:
        """Whole batches from the one holding `fetch_offset`; None if this segment has
        nothing at or after it (the caller tries the next segment)."""
        found = self.translate_offset(fetch_offset)
        if found is None:
            return None
        position, first = found
        if max_offset is not None and first.base_offset >= max_offset:
            return b""
        available = self.size - position
        if first.size > max_bytes:
            if not min_one_batch:
                return b""
            return os.pread(self._fd, first.size, position)
        chunk = os.pread(self._fd, min(max_bytes, available), position)
        end = 0
        while end + LOG_OVERHEAD <= len(chunk):
            base_offset, batch_length = _OFFSET_AND_LENGTH.unpack_from(chunk, end)
            size = batch_length + LOG_OVERHEAD
            if end + size > len(chunk) or (max_offset is not None and base_offset >= max_offset):
                break
            end += size
        return chunk if end == len(chunk) else chunk[:end]

    def read_batch(self, position: int, size: int) -> bytes:
        return os.pread(self._fd, size, position)

    def find_offset_by_timestamp(self, ts_ms: int, min_offset: int) -> tuple[int, int] | None:
        """Earliest (offset, timestamp) here of a record with timestamp >= ts_ms and
        offset >= min_offset."""
        if self.max_timestamp < ts_ms:
            return None
        start = 0
        indexed = self.time_index.lookup(ts_ms)
        if indexed is not None:
            start = self.offset_index.lookup(indexed)
        start = max(start, self.offset_index.lookup(min_offset))
        for pos, header in self._scan(start, self.size, verify_crc=False):
            if header.max_timestamp >= ts_ms and header.last_offset >= min_offset:
                batch = self.read_batch(pos, header.size)
                found = first_record_at_or_after(batch, ts_ms, min_offset)
                if found is not None:
                    return found
        return None

    def record_for_max_timestamp(self, min_offset: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record carrying this segment's largest
        timestamp."""
        if self.max_timestamp < 0:
            return None
        found = self.translate_offset(self.offset_of_max_timestamp)
        if found is None:
            return None
        pos, header = found
        return record_with_timestamp(
            self.read_batch(pos, header.size), self.max_timestamp, min_offset
        )

    @property
    def largest_timestamp(self) -> int:
        """For retention.ms: the max timestamp, or the file's mtime when no batch has
        one (Kafka's fallback)."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return os.stat(self.log_path).st_mtime_ns // 1_000_000

    # -- truncation and lifecycle -------------------------------------------------

    def truncate_to(self, offset: int) -> int | None:
        """Remove the batch holding `offset` and everything after it.

        Returns the base offset of the first removed batch, or None if nothing here is
        at or above `offset`.
        """
        found = self.translate_offset(offset)
        if found is None:
            return None
        position, header = found
        os.ftruncate(self._fd, position)
        self.size = position
        self.offset_index.truncate_to_position(position)
        self.time_index.truncate_to_offset(header.base_offset)
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        try:
            self._load_tail()
        except IndexCorruptError:
            self.recover()
        return header.base_offset

    def flush(self) -> None:
        os.fsync(self._fd)
        self.offset_index.flush()
        self.time_index.flush()

    def change_file_suffix(self, file_suffix: str) -> None:
        """Rename the three files (Kafka's changeFileSuffixes): `.cleaned` -> `.swap`
        -> ``""``. The log file goes last, so a `.log.swap` on disk means its indexes
        were renamed before it (recovery rebuilds them anyway)."""
        name = segment_file_name(self.base_offset)
        for index, suffix in (
            (self.offset_index, INDEX_SUFFIX),
            (self.time_index, TIME_INDEX_SUFFIX),
        ):
            target = self.directory / (name + suffix + file_suffix)
            index.close()
            if index.path.exists():
                os.replace(index.path, target)
            index.path = target
        target = self.directory / (name + LOG_SUFFIX + file_suffix)
        os.replace(self.log_path, target)
        self.log_path = target
        self.file_suffix = file_suffix

    def close(self) -> None:
        self.offset_index.close()
        self.time_index.close()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def delete(self) -> None:
        self.close()
        for path in (self.log_path, self.offset_index.path, self.time_index.path):
            path.unlink(missing_ok=True)
