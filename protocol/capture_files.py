"""Capture files: rolling, gzip-compressed JSON lines, written and read without network IO.

Format (``CAPTURE_FORMAT_VERSION`` 1)
-------------------------------------
A broker writes ``capture-broker{id}-{index:06d}.jsonl.gz`` files into a directory. Each
file is a series of independent **gzip members**; each member holds newline-delimited
JSON records (``protocol.capture``), the first record of a file being a
``CaptureFileHeader``. A member is closed (gzip trailer written) and the file flushed
to the OS at least every ``flush_interval_ms`` and when the file rolls.

Why this shape:

* Robustness. A gzip member is self-contained, so a crash leaves every closed member
  readable and at most the member being written damaged; that member holds at most one
  flush interval of records (one second by default). The reader decompresses a cut
  member as far as its bytes go (zlib streams), keeps every complete line, and warns
  about the cut record instead of failing. Concatenated members are still one valid
  gzip file, so ``zcat file | jq`` works for a person.
* Speed. Records are serialised by pydantic-core (Rust) and fed to one incremental
  ``zlib`` compressor per member, so the per-record cost is a few microseconds and there
  is no once-a-second burst of compression on the broker's event loop. Level 1 gives
  most of gzip's ratio on JSON for a fraction of level 6's CPU.
* JSON rather than a binary framing: one format for people (``zcat | jq``), for Python
  (pydantic validates each line into the same model) and for Spark; base64 request
  bytes cost a third more raw bytes but compress back, and the records are small
  beside the request bytes anyway.

A file is never overwritten: the writer continues after the highest index it finds for
its broker, and opens files exclusively.
"""

from __future__ import annotations

import os
import re
import time
import warnings
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Final

from pydantic import ValidationError

from protocol.capture import (
    CAPTURE_FORMAT_VERSION,
    CaptureFileHeader,
    CaptureRequest,
    DelayedOperationEvent,
    parse_file_record,
)

__all__ = [
    "DEFAULT_FLUSH_INTERVAL_MS",
    "DEFAULT_ROLL_BYTES",
    "CaptureCorruptWarning",
    "CaptureTruncatedWarning",
    "CaptureWriter",
    "capture_file_name",
    "capture_files",
    "iter_capture_lines",
    "read_capture",
]

DEFAULT_ROLL_BYTES: Final = 64 * 1024 * 1024
DEFAULT_FLUSH_INTERVAL_MS: Final = 1000
_GZIP_WBITS: Final = 16 + zlib.MAX_WBITS  # zlib writes/reads the gzip wrapper
_READ_CHUNK: Final = 1 << 20
_FILE_RE: Final = re.compile(r"^capture-broker(?P<broker>-?\d+)-(?P<index>\d+)\.jsonl\.gz$")


class CaptureTruncatedWarning(UserWarning):
    """A capture file ends in the middle of a member or a record (crash or live file)."""


class CaptureCorruptWarning(UserWarning):
    """A capture file holds bytes or a line that cannot be read; the rest is skipped."""


def capture_file_name(broker_id: int, index: int) -> str:
    return f"capture-broker{broker_id}-{index:06d}.jsonl.gz"


def _wall_clock_us() -> int:
    return time.time_ns() // 1000


class CaptureWriter:
    """Writes capture records of one broker into rolling gzip files in ``directory``.

    Plain synchronous IO, meant to be called from the broker's event loop: ``write``
    only serialises and compresses into memory (and hands full zlib blocks to a
    buffered file); ``maybe_flush(now_monotonic)`` closes the gzip member and flushes
    the file once ``flush_interval_ms`` has passed since the last flush, so call it
    from a periodic task as well as after writes. ``now_monotonic`` is in seconds, as
    ``loop.time()`` and ``time.monotonic()`` give it.

    A file rolls once the compressed bytes handed to it reach ``roll_bytes``; zlib
    holds back up to some tens of KiB before it emits a block, so a file may pass
    ``roll_bytes`` by that much.

    ``fsync=True`` also asks the OS to put flushed bytes on disk, so that a machine
    crash (not only a process crash) loses at most the last interval.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        broker_id: int,
        roll_bytes: int = DEFAULT_ROLL_BYTES,
        flush_interval_ms: int = DEFAULT_FLUSH_INTERVAL_MS,
        *,
        compresslevel: int = 1,
        fsync: bool = False,
        wall_clock_us: Callable[[], int] = _wall_clock_us,
    ) -> None:
        if roll_bytes <= 0:
            raise ValueError(f"roll_bytes must be positive, got {roll_bytes}")
        if flush_interval_ms < 0:
            raise ValueError(f"flush_interval_ms must be >= 0, got {flush_interval_ms}")
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.broker_id = broker_id
        self.roll_bytes = roll_bytes
        self.flush_interval_s = flush_interval_ms / 1000.0
        self._level = compresslevel
        self._fsync = fsync
        self._wall_clock_us = wall_clock_us
        self._next_index = self._first_free_index()
        self._file: IO[bytes] | None = None
        self._path: Path | None = None
        self._compressor: zlib._Compress | None = None
        self._file_bytes = 0  # compressed bytes handed to the current file
        self._last_flush: float | None = None
        self._closed = False
        #: Records written since this writer started (all files).
        self.records_written = 0
        #: Files this writer created, oldest first.
        self.paths: list[Path] = []

    # -- public API ---------------------------------------------------------------

    def write(self, record: CaptureRequest | DelayedOperationEvent) -> None:
        """Append one record; it is durable after the next flush."""
        if self._closed:
            raise ValueError("write() on a closed CaptureWriter")
        if self._file is None:
            self._open_next_file()
        self._feed(record.model_dump_json().encode() + b"\n")
        self.records_written += 1
        if self._file_bytes >= self.roll_bytes:
            self._finish_file()

    def maybe_flush(self, now_monotonic: float) -> bool:
        """Flush if ``flush_interval_ms`` has passed since the last flush; True if it did."""
        if self._last_flush is None:
            self._last_flush = now_monotonic
            return False
        if now_monotonic - self._last_flush < self.flush_interval_s:
            return False
        self._last_flush = now_monotonic
        return self.flush()

    def flush(self) -> bool:
        """Close the open gzip member and flush the file now; True if anything was pending."""
        if self._compressor is None or self._file is None:
            return False
        self._end_member()
        self._file.flush()
        if self._fsync:
            os.fsync(self._file.fileno())
        return True

    def close(self) -> None:
        """Flush and close the current file. Idempotent."""
        if self._closed:
            return
        self._finish_file()
        self._closed = True

    @property
    def current_path(self) -> Path | None:
        """The file being written, if one is open."""
        return self._path

    def __enter__(self) -> CaptureWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- internals ----------------------------------------------------------------

    def _first_free_index(self) -> int:
        highest = -1
        for entry in self.directory.iterdir():
            m = _FILE_RE.match(entry.name)
            if m and int(m["broker"]) == self.broker_id:
                highest = max(highest, int(m["index"]))
        return highest + 1

    def _open_next_file(self) -> None:
        index = self._next_index
        self._next_index += 1
        path = self.directory / capture_file_name(self.broker_id, index)
        # "xb": never clobber a file another writer (or an earlier run) left there.
        self._file = open(path, "xb")  # noqa: SIM115 - lives across calls, closed in _finish_file
        self._path = path
        self._file_bytes = 0
        self.paths.append(path)
        header = CaptureFileHeader(
            broker_id=self.broker_id,
            created_unix_us=self._wall_clock_us(),
            file_index=index,
        )
        self._feed(header.model_dump_json().encode() + b"\n")

    def _feed(self, line: bytes) -> None:
        assert self._file is not None
        if self._compressor is None:
            self._compressor = zlib.compressobj(self._level, zlib.DEFLATED, _GZIP_WBITS)
        out = self._compressor.compress(line)
        if out:
            self._file.write(out)
            self._file_bytes += len(out)

    def _end_member(self) -> None:
        assert self._file is not None and self._compressor is not None
        out = self._compressor.flush(zlib.Z_FINISH)
        self._compressor = None
        self._file.write(out)
        self._file_bytes += len(out)

    def _finish_file(self) -> None:
        if self._file is None:
            return
        self.flush()
        self._file.close()
        self._file = None
        self._path = None


# -- reading ---------------------------------------------------------------------


def capture_files(path: str | os.PathLike[str]) -> list[Path]:
    """The capture files under ``path`` (a file or a directory), in (broker, index) order."""
    p = Path(path)
    if p.is_file():
        return [p]
    found: list[tuple[int, int, Path]] = []
    for entry in p.iterdir():
        m = _FILE_RE.match(entry.name)
        if m and entry.is_file():
            found.append((int(m["broker"]), int(m["index"]), entry))
    found.sort(key=lambda t: (t[0], t[1]))
    return [f for _, _, f in found]


def iter_capture_lines(path: str | os.PathLike[str]) -> Iterator[bytes]:
    """Yield each complete JSON line of one capture file, surviving a cut tail.

    A member cut short (the writer crashed, or is still writing) yields what it
    decompresses to, and a record cut in the middle is dropped, each with a
    ``CaptureTruncatedWarning``. Bytes zlib cannot read stop the file with a
    ``CaptureCorruptWarning``.
    """
    decomp = zlib.decompressobj(_GZIP_WBITS)
    in_member = False
    pending = b""
    with open(path, "rb") as fh:
        while True:
            chunk = fh.read(_READ_CHUNK)
            if not chunk:
                break
            while chunk:
                try:
                    data = decomp.decompress(chunk)
                except zlib.error as exc:
                    warnings.warn(
                        f"{path}: unreadable compressed data ({exc}); rest of file skipped",
                        CaptureCorruptWarning,
                        stacklevel=2,
                    )
                    return
                in_member = not decomp.eof
                if data:
                    pending += data
                    *lines, pending = pending.split(b"\n")
                    yield from (line for line in lines if line)
                if decomp.eof:
                    chunk = decomp.unused_data
                    decomp = zlib.decompressobj(_GZIP_WBITS)
                else:
                    chunk = b""
    if in_member:
        warnings.warn(
            f"{path}: last gzip member is cut short (crash, or file still being written); "
            "read up to the cut",
            CaptureTruncatedWarning,
            stacklevel=2,
        )
    if pending:
        warnings.warn(
            f"{path}: last record is cut in the middle ({len(pending)} bytes); dropped",
            CaptureTruncatedWarning,
            stacklevel=2,
        )


def read_capture(
    path_or_dir: str | os.PathLike[str],
) -> Iterator[CaptureRequest | DelayedOperationEvent]:
    """Yield the records of a capture file or of every capture file in a directory.

    Reads up to a cut record with a warning (see ``iter_capture_lines``); a line that is
    not a valid record is skipped with a ``CaptureCorruptWarning``. A file written in a
    newer, unknown format version raises ``ValueError`` rather than being misread.
    """
    for file in capture_files(path_or_dir):
        for line in iter_capture_lines(file):
            try:
                record = parse_file_record(line)
            except ValidationError as exc:
                warnings.warn(
                    f"{file}: skipped a line that is not a capture record: "
                    f"{exc.error_count()} error(s), first: {exc.errors()[0]['msg']}",
                    CaptureCorruptWarning,
                    stacklevel=2,
                )
                continue
            if isinstance(record, CaptureFileHeader):
                if record.format_version > CAPTURE_FORMAT_VERSION:
                    raise ValueError(
                        f"{file}: capture format version {record.format_version} is newer "
                        f"than this reader's {CAPTURE_FORMAT_VERSION}"
                    )
                continue
            yield record
