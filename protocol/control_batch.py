"""Control batches: transaction markers (Kafka's EndTransactionMarker, ControlRecordType).

A COMMIT or ABORT marker is a batch with the transactional and control attributes set,
the producer's id and epoch, base sequence -1, and one record::

    key   = version int16 (0) | type int16 (0 ABORT, 1 COMMIT)
    value = version int16 (0) | coordinator_epoch int32

The transaction coordinator writes one to every partition of a transaction when it ends
(WriteTxnMarkers); consumers skip control batches, and a read_committed consumer drops
the records of a transaction whose marker is ABORT. The names are importable from
``protocol.record_batch`` as well.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from protocol.record_batch import Buffer, InvalidRecordError, iter_records
from protocol.record_builder import build_record_batch

__all__ = [
    "CONTROL_TYPE_ABORT",
    "CONTROL_TYPE_COMMIT",
    "EndTransactionMarker",
    "build_control_batch",
    "parse_control_batch",
]

CONTROL_TYPE_ABORT = 0
CONTROL_TYPE_COMMIT = 1
_CONTROL_KEY = struct.Struct(">hh")
_END_TXN_MARKER_VALUE = struct.Struct(">hi")


@dataclass(frozen=True, slots=True)
class EndTransactionMarker:
    """A parsed COMMIT/ABORT marker: its control type and the coordinator's epoch."""

    control_type: int
    coordinator_epoch: int

    @property
    def is_commit(self) -> bool:
        return self.control_type == CONTROL_TYPE_COMMIT


def build_control_batch(
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    commit: bool,
    timestamp_ms: int,
    *,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A COMMIT (``commit``) or ABORT marker batch, as Kafka's
    ``MemoryRecords.withEndTransactionMarker`` writes it (uncompressed, base sequence -1)."""
    control_type = CONTROL_TYPE_COMMIT if commit else CONTROL_TYPE_ABORT
    key = _CONTROL_KEY.pack(0, control_type)
    value = _END_TXN_MARKER_VALUE.pack(0, coordinator_epoch)
    return build_record_batch(
        [(key, value, ())],
        base_offset=base_offset,
        timestamp_ms=timestamp_ms,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=-1,
        is_transactional=True,
        is_control=True,
        partition_leader_epoch=partition_leader_epoch,
    )


def parse_control_batch(batch: Buffer) -> EndTransactionMarker | None:
    """The marker a whole control batch carries; None for an empty control batch (the log
    cleaner's leftover) or a control record that is not a transaction marker (KRaft's
    leader-change and snapshot records). Raises InvalidRecordError for a key or value
    too short or with a negative version, as Kafka's ControlRecordType and
    EndTransactionMarker parsers do."""
    for record in iter_records(batch):
        key, value = record.key, record.value
        if key is None or len(key) < _CONTROL_KEY.size:
            raise InvalidRecordError("control record key is shorter than 4 bytes")
        version, control_type = _CONTROL_KEY.unpack_from(key)
        if version < 0:
            raise InvalidRecordError(f"control record key has version {version}")
        if control_type not in (CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT):
            return None
        if value is None or len(value) < _END_TXN_MARKER_VALUE.size:
            raise InvalidRecordError("end transaction marker value is shorter than 6 bytes")
        value_version, coordinator_epoch = _END_TXN_MARKER_VALUE.unpack_from(value)
        if value_version < 0:
            raise InvalidRecordError(f"end transaction marker has version {value_version}")
        return EndTransactionMarker(control_type, coordinator_epoch)
    return None
