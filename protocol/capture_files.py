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
* Speed. The broker does not build a pydantic model per record: ``line_encoder(model,
  order)`` generates, from the model's own fields, a function that formats one JSON line
  (a bytes ``%``-format with the field names, types and constants in it) from values
  given in ``order``: about 3 us for a Produce, against about 20 us for
  ``model_construct`` + ``model_dump_json``; a test holds its lines equal to pydantic's.
  ``CaptureWriter.write_lines`` takes many lines at once and feeds them to one
  incremental ``zlib`` compressor per member (which releases the GIL, so the broker's
  capture thread compresses while its event loop runs). Level 1 gives most of gzip's
  ratio on JSON for a fraction of level 6's CPU.
* JSON rather than a binary framing: one format for people (``zcat | jq``), for Python
  (pydantic validates each line into the same model) and for Spark; base64 request
  bytes cost a third more raw bytes but compress back, and the records are small
  beside the request bytes anyway.

A file is never overwritten: the writer continues after the highest index it finds for
its broker, and opens files exclusively.
"""

from __future__ import annotations

import binascii
import json
import keyword
import os
import re
import time
import types
import typing
import warnings
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Final, Literal

from pydantic import BaseModel, ValidationError

from protocol.capture import (
    CAPTURE_FORMAT_VERSION,
    CaptureFileHeader,
    CaptureRequest,
    ClientTelemetryPush,
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
    "captured_cluster_config",
    "iter_capture_lines",
    "line_encoder",
    "read_capture",
    "read_client_telemetry",
]

DEFAULT_ROLL_BYTES: Final = 64 * 1024 * 1024
DEFAULT_FLUSH_INTERVAL_MS: Final = 1000
_GZIP_WBITS: Final = 16 + zlib.MAX_WBITS  # zlib writes/reads the gzip wrapper
_PENDING_BYTES: Final = 256 * 1024  # lines gathered before a compressor call
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


# -- fast lines --------------------------------------------------------------------

# Lines are bytes from the start: bytes %-formatting (PEP 461) takes the base64 of the
# request as b2a_base64 returns it, and nothing is decoded or encoded again afterwards.

_json_strings: dict[str, bytes] = {}
_json_int_lists: dict[tuple[int, ...], bytes] = {}
_CACHE_MAX: Final = 1 << 16


def _json_string(value: str) -> bytes:
    """``value`` as JSON text in UTF-8, cached: client ids, connection ids, names repeat."""
    text = _json_strings.get(value)
    if text is None:
        if len(_json_strings) >= _CACHE_MAX:
            _json_strings.clear()
        text = _json_strings[value] = json.dumps(value, ensure_ascii=False).encode()
    return text


def _json_ints(values: Iterable[int]) -> bytes:
    """A JSON array of ints; short ones (error codes: mostly ``[0]``) cached."""
    key = tuple(values)
    text = _json_int_lists.get(key)
    if text is None:
        # int.__repr__, not str: an IntEnum would print its name through str().
        text = ("[" + ",".join(map(int.__repr__, key)) + "]").encode()
        if len(key) <= 8:
            if len(_json_int_lists) >= _CACHE_MAX:
                _json_int_lists.clear()
            _json_int_lists[key] = text
    return text


def _json_strings_list(values: Iterable[str]) -> bytes:
    return b"[" + b",".join(map(_json_string, values)) + b"]"


def _quoted_base64(value: bytes) -> bytes:
    return b'"' + binascii.b2a_base64(value, newline=False) + b'"'


_HELPERS: Final[dict[str, Any]] = {
    "_s": _json_string,
    "_b": binascii.b2a_base64,
    "_qb": _quoted_base64,
    "_il": _json_ints,
    "_sl": _json_strings_list,
}


def _strip_optional(annotation: Any) -> tuple[Any, bool]:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) != 1:
            raise TypeError(f"no JSON line encoding for the union {annotation!r}")
        return args[0], True
    return annotation, False


def _field_format(name: str, annotation: Any) -> tuple[str, str]:
    """(its place in the bytes template, Python expression of the parameter ``name``)."""
    inner, optional = _strip_optional(annotation)
    origin = typing.get_origin(inner)
    if inner is bool:
        spec, expr = "%s", f"(b'true' if {name} else b'false')"
    elif inner is int:
        spec, expr = "%d", name
    elif inner is float:
        spec, expr = "%a", name  # repr: the shortest text that reads back the same float
    elif inner is str or (
        origin is Literal and all(isinstance(v, str) for v in typing.get_args(inner))
    ):
        spec, expr = "%s", f"_s({name})"
    elif inner is bytes:
        # Standard base64 (``protocol.capture.Base64Bytes``' JSON form), quoted.
        if optional:
            spec, expr = "%s", f"_qb({name})"
        else:
            spec, expr = '"%s"', f"_b({name}, newline=False)"
    elif origin is list and typing.get_args(inner) == (int,):
        spec, expr = "%s", f"_il({name})"
    elif origin is list and typing.get_args(inner) == (str,):
        spec, expr = "%s", f"_sl({name})"
    else:
        raise TypeError(f"no JSON line encoding for field {name!r}: {annotation!r}")
    if optional:
        if spec != "%s":
            expr = f"b'{spec}' % {name}"
        return "%s", f"(b'null' if {name} is None else {expr})"
    return spec, expr


def line_encoder(
    model: type[BaseModel], order: Sequence[str] | None = None
) -> Callable[..., bytes]:
    """A function returning one JSON line of ``model`` (UTF-8 bytes with the newline)
    that reads back as ``model_dump_json`` of the same values does.

    Generated once from the model's fields: the field names, their order, the constant
    of a one-value ``Literal`` field with that default (``type``), each type's JSON form
    (ints, floats by ``repr``, strings through a cache of their JSON text, bytes as
    standard base64, lists of ints or strings, ``None`` as null) and the defaults of
    optional fields. No validation: the caller passes values of the declared types, as
    it would to ``model_construct``. A field type it has no form for is a ``TypeError``
    here, when the model is first used, not a bad line later.

    Without ``order`` the function takes every field by keyword. With ``order`` (field
    names) it takes those fields positionally, in that order -- a call with twenty
    keywords costs more than the formatting -- and writes every other field's default
    (a field left out must have one). Either way the names are checked here.
    """
    fields = {
        name: info
        for name, info in model.model_fields.items()
        if not _is_constant(info.annotation, info.default)
    }
    if order is not None:
        unknown = [name for name in order if name not in fields]
        if unknown or len(set(order)) != len(order):
            raise TypeError(f"order names unknown or repeated fields of {model.__name__}")
        missing = [n for n, info in fields.items() if n not in order and info.is_required()]
        if missing:
            raise TypeError(f"order leaves out required fields of {model.__name__}: {missing}")
    parts: list[str] = []
    params: list[str] = []
    values: list[str] = []
    defaults: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        if not name.isidentifier() or keyword.iskeyword(name) or name.startswith("_"):
            raise TypeError(f"field name {name!r} cannot be a parameter")
        key = json.dumps(name)
        if name not in fields:
            parts.append(f"{key}:{json.dumps(info.default)}".replace("%", "%%"))
            continue
        spec, expr = _field_format(name, info.annotation)
        if order is not None and name not in order:
            default = info.get_default(call_default_factory=True)
            text = spec.encode() % eval(expr, {**_HELPERS, name: default})  # our own expr
            parts.append(f"{key}:{text.decode()}".replace("%", "%%"))
            continue
        parts.append(f"{key}:{spec}")
        values.append(expr)
        if order is not None or info.is_required():
            params.append(name)
        else:
            defaults[f"_d_{name}"] = info.get_default(call_default_factory=True)
            params.append(f"{name}=_d_{name}")
    if order is not None:
        signature = ", ".join(order)
    else:
        signature = "*, " + ", ".join(params) if params else ""
    template = ("{" + ",".join(parts) + "}\n").encode()
    source = (
        f"def encode({signature}):\n"
        f"    return _T % ({', '.join(values)}{',' if len(values) == 1 else ''})\n"
    )
    namespace: dict[str, Any] = {**_HELPERS, **defaults, "_T": template}
    exec(compile(source, f"<line_encoder {model.__name__}>", "exec"), namespace)
    encode: Callable[..., bytes] = namespace["encode"]
    encode.__doc__ = f"One JSON line of a {model.__name__} (``line_encoder``)."
    return encode


def _is_constant(annotation: Any, default: Any) -> bool:
    """A one-value ``Literal`` field whose default is that value (``type``)."""
    literal = typing.get_args(annotation) if typing.get_origin(annotation) is Literal else ()
    return len(literal) == 1 and default == literal[0]


class CaptureWriter:
    """Writes capture records of one broker into rolling gzip files in ``directory``.

    Plain synchronous IO, for one thread at a time (the broker's capture thread):
    ``write``/``write_lines`` only compress into memory (and hand full zlib blocks to a
    buffered file); ``maybe_flush(now_monotonic)`` closes the gzip member and flushes
    the file once ``flush_interval_ms`` has passed since the last flush, so call it
    periodically as well as after writes. ``now_monotonic`` is in seconds, as
    ``time.monotonic()`` gives it.

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
        cluster_config: Mapping[str, str] | None = None,
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
        #: Written in every file's header (``CaptureFileHeader.cluster_config``).
        self.cluster_config: Mapping[str, str] = cluster_config or {}
        self._next_index = self._first_free_index()
        self._file: IO[bytes] | None = None
        self._path: Path | None = None
        self._compressor: zlib._Compress | None = None
        self._file_bytes = 0  # compressed bytes handed to the current file
        self._pending: list[bytes] = []  # lines not yet given to the compressor
        self._pending_bytes = 0
        self._pending_limit = min(_PENDING_BYTES, max(1, roll_bytes // 8))
        self._last_flush: float | None = None
        self._closed = False
        #: Records written since this writer started (all files).
        self.records_written = 0
        #: Files this writer created, oldest first.
        self.paths: list[Path] = []

    # -- public API ---------------------------------------------------------------

    def write(self, record: CaptureRequest | DelayedOperationEvent | ClientTelemetryPush) -> None:
        """Append one record; it is durable after the next flush."""
        self.write_lines(record.model_dump_json().encode() + b"\n", 1)

    def write_lines(self, lines: bytes, count: int) -> None:
        """Append ``count`` records already encoded as JSON lines, each ending with a
        newline (``line_encoder``), joined into one ``bytes``. Lines wait uncompressed
        until ``_PENDING_BYTES`` (or an eighth of ``roll_bytes``) of them are there, or
        the next flush: a compressor call costs microseconds whatever its input (it
        allocates its output buffer), so one per record would cost more than the
        compression. The file rolls after a batch, never in the middle of a record."""
        if self._closed:
            raise ValueError("write() on a closed CaptureWriter")
        if self._file is None:
            self._open_next_file()
        self._pending.append(lines)
        self._pending_bytes += len(lines)
        self.records_written += count
        if self._pending_bytes >= self._pending_limit:
            self._compress_pending()
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
        if self._pending:
            self._compress_pending()
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
            cluster_config=dict(self.cluster_config),
        )
        self._feed(header.model_dump_json().encode() + b"\n")

    def _compress_pending(self) -> None:
        data = b"".join(self._pending) if len(self._pending) > 1 else self._pending[0]
        self._pending.clear()
        self._pending_bytes = 0
        self._feed(data)

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


#: How `line_encoder` starts a delayed-operation event (``type`` is its first key).
_DELAYED_OP_PREFIX = b'{"type":"delayed_op"'
#: How a client telemetry push's line starts (pydantic writes ``type`` first).
_CLIENT_TELEMETRY_PREFIX = b'{"type":"client_telemetry"'


def read_capture(
    path_or_dir: str | os.PathLike[str], *, requests_only: bool = False
) -> Iterator[CaptureRequest | DelayedOperationEvent]:
    """Yield the records of a capture file or of every capture file in a directory.

    Reads up to a cut record with a warning (see ``iter_capture_lines``); a line that is
    not a valid record is skipped with a ``CaptureCorruptWarning``. A file written in a
    newer, unknown format version raises ``ValueError`` rather than being misread.
    ``requests_only`` leaves out the delayed-operation events, and the ones this project
    wrote are not even parsed (most lines of a capture: a replay reads only requests).
    Client telemetry pushes (KIP-714) are left out: ``read_client_telemetry`` reads them.
    """
    for file in capture_files(path_or_dir):
        for line in iter_capture_lines(file):
            if line.startswith(_CLIENT_TELEMETRY_PREFIX):
                continue  # read_client_telemetry's
            if requests_only and line.startswith(_DELAYED_OP_PREFIX):
                continue
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
            if isinstance(record, ClientTelemetryPush) or (
                requests_only and not isinstance(record, CaptureRequest)
            ):
                continue
            yield record


def read_client_telemetry(path_or_dir: str | os.PathLike[str]) -> Iterator[ClientTelemetryPush]:
    """The client telemetry pushes (KIP-714) of a capture file or directory, in order;
    a line that does not validate is skipped with a ``CaptureCorruptWarning``."""
    for file in capture_files(path_or_dir):
        for line in iter_capture_lines(file):
            if not line.startswith(_CLIENT_TELEMETRY_PREFIX):
                continue
            try:
                record = parse_file_record(line)
            except ValidationError as exc:
                warnings.warn(
                    f"{file}: skipped a client telemetry line: {exc.errors()[0]['msg']}",
                    CaptureCorruptWarning,
                    stacklevel=2,
                )
                continue
            if isinstance(record, ClientTelemetryPush):
                yield record


def captured_cluster_config(path_or_dir: str | os.PathLike[str]) -> dict[str, str]:
    """The cluster configs the capture's brokers ran with (``CaptureFileHeader.cluster_config``
    of its first file; empty for a capture written before headers carried them)."""
    for file in capture_files(path_or_dir):
        for line in iter_capture_lines(file):
            try:
                record = parse_file_record(line)
            except ValidationError:
                continue
            if isinstance(record, CaptureFileHeader):
                return dict(record.cluster_config)
            break
    return {}
