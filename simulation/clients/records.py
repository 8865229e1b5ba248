"""The data records of a fetched partition's bytes, by offset (control batches left out)."""

from __future__ import annotations

from protocol.record_batch import CorruptRecordError, iter_batches, iter_records

__all__ = ["data_records"]


def data_records(data: bytes | None) -> dict[int, bytes | None]:
    """offset -> value of every data record; a partial batch at the end is left out (the
    fetch size cut it), and a corrupt one ends the reading (what came before it stands)."""
    out: dict[int, bytes | None] = {}
    if not data:
        return out
    view = memoryview(data)
    try:
        for pos, header in iter_batches(view, allow_partial_tail=True):
            if header.is_control:
                continue
            for record in iter_records(view[pos : pos + header.size]):
                out[record.offset] = record.value
    except CorruptRecordError:
        pass
    return out
