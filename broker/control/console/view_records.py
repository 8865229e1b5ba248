"""The record browser: a page of one partition's records, read from its leader's log.

Read as a follower would (up to the log end), so records above the high watermark show
too, marked as not yet committed. A batch's producer id, epoch and base sequence, its
timestamp type and whether it is transactional show per record; a control batch shows
as its COMMIT or ABORT marker, not as bytes. A value shows as text, as JSON (pretty,
when it parses) or as hex.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from protocol.control_batch import parse_control_batch
from protocol.record_batch import CorruptRecordError, iter_batches, iter_records

if TYPE_CHECKING:
    from broker.replica.partition import Partition

__all__ = ["FORMATS", "MAX_RECORDS", "browse", "render_bytes"]

FORMATS = ("text", "json", "hex")
MAX_RECORDS = 200
_READ_BYTES = 1 << 20
_TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")


def render_bytes(data: bytes | None, fmt: str) -> str | None:
    """``data`` as the user asked: text (undecodable bytes replaced), JSON or hex."""
    if data is None:
        return None
    if fmt == "hex":
        return data.hex(" ")
    text = data.decode("utf-8", errors="replace")
    if fmt == "json":
        try:
            return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except ValueError:
            return text
    return text


def browse(
    partition: Partition,
    *,
    offset: int | None,
    timestamp_ms: int | None,
    limit: int,
    fmt: str,
) -> dict[str, Any]:
    """Up to ``limit`` records from ``offset`` (or the first at or after
    ``timestamp_ms``; else the log start)."""
    start = partition.log_start_offset
    if timestamp_ms is not None:
        found = partition.log.offset_for_timestamp(timestamp_ms)
        start = found[0] if found is not None else partition.log_end_offset
    elif offset is not None:
        start = max(offset, start)
    limit = max(1, min(limit, MAX_RECORDS))
    page: dict[str, Any] = {
        "from": start,
        "high_watermark": partition.high_watermark,
        "log_start": partition.log_start_offset,
        "log_end": partition.log_end_offset,
        "records": [],
        "next": None,
    }
    rows: list[dict[str, Any]] = page["records"]
    position = start
    while len(rows) < limit and position < partition.log_end_offset:
        data = partition.log.read(position, _READ_BYTES, min_one_batch=True)
        if not data:
            break
        try:
            after = _decode(data, start, limit, fmt, partition.high_watermark, rows)
        except CorruptRecordError as exc:
            page["error"] = f"cannot decode the batch at {position}: {exc}"
            break
        if after <= position:
            break
        position = after
    if rows:
        page["next"] = rows[-1]["offset"] + 1
    return page


def _decode(
    data: bytes, start: int, limit: int, fmt: str, hw: int, rows: list[dict[str, Any]]
) -> int:
    """Append the records of ``data`` at or past ``start``; the offset after the last
    batch read."""
    after = start
    for position, header in iter_batches(data, allow_partial_tail=True):
        batch = data[position : position + header.size]
        after = header.next_offset
        common = {
            "timestamp_type": _TIMESTAMP_TYPES[header.timestamp_type],
            "batch": f"{header.base_offset}..{header.last_offset}",
            "producer_id": header.producer_id,
            "producer_epoch": header.producer_epoch,
            "base_sequence": header.base_sequence,
            "transactional": header.is_transactional,
        }
        if header.is_control:
            marker = parse_control_batch(batch)
            if header.base_offset >= start:
                kind = "none" if marker is None else "COMMIT" if marker.is_commit else "ABORT"
                rows.append(
                    {
                        **common,
                        "offset": header.base_offset,
                        "timestamp": header.max_timestamp,
                        "control": kind,
                        "committed": header.base_offset < hw,
                    }
                )
        else:
            for record in iter_records(batch):
                if record.offset < start:
                    continue
                rows.append(
                    {
                        **common,
                        "offset": record.offset,
                        "timestamp": record.timestamp,
                        "control": None,
                        "key": render_bytes(record.key, fmt),
                        "value": render_bytes(record.value, fmt),
                        "headers": [
                            (name, render_bytes(value, fmt)) for name, value in record.headers
                        ],
                        "committed": record.offset < hw,
                    }
                )
                if len(rows) >= limit:
                    return after
        if len(rows) >= limit:
            return after
    return after
