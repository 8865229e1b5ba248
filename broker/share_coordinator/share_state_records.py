"""The share coordinator's records (Kafka's ShareSnapshot and ShareUpdate) and the state
they add up to (``ShareGroupOffset``).

A share partition's durable state — state epoch, leader epoch, share-partition start
offset and state batches (first offset, last offset, delivery state, delivery count) —
is one ``ShareSnapshot`` record followed by ``ShareUpdate`` records, each holding only
the batches that changed; the coordinator folds them (``combine_state_batches``, Kafka's
``PersisterStateBatchCombiner``: later batches win where they overlap, nothing below
the start offset is kept) and writes a new snapshot every
``share.coordinator.snapshot.update.records.per.snapshot`` updates.

The schemas are Kafka's (``ShareSnapshotKey/Value.json``, ``ShareUpdateKey/Value.json``),
declared as data below and compiled by ``broker/coordinator/record_schema.py``: a key
is its record type as an int16 (0 ShareSnapshot, 1 ShareUpdate) then GroupId, TopicId,
Partition (not flexible); a value is an int16 version (0) then the flexible fields
(SnapshotEpoch uint16, ..., a compact array of state batches, tagged fields). A deleted
share partition is a tombstone (no value) for both keys. The records go to
``__share_group_state`` through the coordinator kit's
:class:`~broker.coordinator.state_log.CoordinatorStateLog` (:func:`share_state_log`).

Where we differ from Kafka: Kafka 4.1's CreateTimestamp/WriteTimestamp snapshot fields
are not written (they are tagged fields: skipped when read), nor is a value version
other than 0 read.
"""

from __future__ import annotations

import logging
import struct
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from broker.cluster.cluster_metadata import SHARE_GROUP_STATE_TOPIC
from broker.coordinator.record_schema import Field, RecordType, Schema, Struct, read_int16
from broker.coordinator.state_log import (
    CoordinatorLog,
    CoordinatorStateLog,
    KeyValue,
    plain_records,
)
from purgatory import Clock

if TYPE_CHECKING:
    from broker.replica.replica_manager import ReplicaManager

__all__ = ("KeyValue",)

log = logging.getLogger("broker.share_coordinator")

SNAPSHOT_KEY_VERSION = 0
UPDATE_KEY_VERSION = 1
VALUE_VERSION = 0

ShareStateLog = CoordinatorLog[KeyValue]
"""What the share coordinator needs of its log (tests hand in one in memory)."""


def share_state_log(
    replica_manager: ReplicaManager, clock: Clock, write_timeout_ms: int, load_buffer_size: int
) -> CoordinatorStateLog[KeyValue]:
    """``__share_group_state``: acks=all within ``share.coordinator.write.timeout.ms``,
    loads ``share.coordinator.load.buffer.size`` bytes (at least 1 KB) a read."""
    return CoordinatorStateLog(
        SHARE_GROUP_STATE_TOPIC,
        replica_manager,
        clock,
        required_acks=-1,
        timeout_ms=write_timeout_ms,
        load_buffer_size=max(load_buffer_size, 1024),
        read_entries=plain_records,
        logger=log,
    )


# ------------------------------------------------------------------- schemas
def _key(name: str) -> Schema:
    fields = (Field("GroupId", "string"), Field("TopicId", "uuid"), Field("Partition", "int32"))
    return Schema(name, "0", "none", fields)


STATE_BATCH = Struct(
    "StateBatch",
    (
        Field("FirstOffset", "int64"),
        Field("LastOffset", "int64"),
        Field("DeliveryState", "int8"),
        Field("DeliveryCount", "int16"),
    ),
)
SHARE_SNAPSHOT = RecordType(
    SNAPSHOT_KEY_VERSION,
    _key("ShareSnapshotKey"),
    Schema(
        "ShareSnapshotValue",
        "0",
        "0+",
        (
            Field("SnapshotEpoch", "uint16"),
            Field("StateEpoch", "int32"),
            Field("LeaderEpoch", "int32"),
            Field("StartOffset", "int64"),
            Field.of("StateBatches", STATE_BATCH),
        ),
    ),
)
SHARE_UPDATE = RecordType(
    UPDATE_KEY_VERSION,
    _key("ShareUpdateKey"),
    Schema(
        "ShareUpdateValue",
        "0",
        "0+",
        (
            Field("SnapshotEpoch", "uint16"),
            Field("LeaderEpoch", "int32"),
            Field("StartOffset", "int64"),
            Field.of("StateBatches", STATE_BATCH),
        ),
    ),
)


class RecordFormatError(ValueError):
    """A ``__share_group_state`` record that does not decode."""


@dataclass(frozen=True, slots=True)
class PersisterStateBatch:
    """Kafka's PersisterStateBatch: offsets first..last in one delivery state
    (0 AVAILABLE, 2 ACKNOWLEDGED, 4 ARCHIVED) with one delivery count."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class SharePartitionKey:
    """Kafka's SharePartitionKey; ``coordinator_key`` is FindCoordinator's SHARE key."""

    group_id: str
    topic_id: uuid.UUID
    partition: int

    @property
    def coordinator_key(self) -> str:
        return f"{self.group_id}:{self.topic_id}:{self.partition}"


@dataclass(frozen=True, slots=True)
class ShareGroupOffset:
    """Kafka's ShareGroupOffset: what a ReadShareGroupState answers."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple[PersisterStateBatch, ...]


@dataclass(frozen=True, slots=True)
class ShareUpdate:
    """A ShareUpdate value: start offset -1 and leader epoch -1 leave those unchanged."""

    snapshot_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple[PersisterStateBatch, ...]


# ------------------------------------------------------------------ combining


def combine_state_batches(
    current: tuple[PersisterStateBatch, ...],
    new: tuple[PersisterStateBatch, ...],
    start_offset: int,
) -> tuple[PersisterStateBatch, ...]:
    """``current`` overlaid by ``new`` (new wins), cut at ``start_offset``, adjacent
    batches of one state and count merged, in offset order."""
    spans: list[PersisterStateBatch] = sorted(current, key=lambda b: b.first_offset)
    for batch in new:
        spans = [*_cut(spans, batch.first_offset, batch.last_offset), batch]
        spans.sort(key=lambda b: b.first_offset)
    result: list[PersisterStateBatch] = []
    for batch in spans:
        if batch.last_offset < start_offset:
            continue
        if batch.first_offset < start_offset:
            batch = PersisterStateBatch(
                start_offset, batch.last_offset, batch.delivery_state, batch.delivery_count
            )
        last = result[-1] if result else None
        if (
            last is not None
            and last.last_offset + 1 == batch.first_offset
            and last.delivery_state == batch.delivery_state
            and last.delivery_count == batch.delivery_count
        ):
            result[-1] = PersisterStateBatch(
                last.first_offset, batch.last_offset, last.delivery_state, last.delivery_count
            )
        else:
            result.append(batch)
    return tuple(result)


def _cut(spans: list[PersisterStateBatch], first: int, last: int) -> list[PersisterStateBatch]:
    """``spans`` without the offsets first..last."""
    kept: list[PersisterStateBatch] = []
    for b in spans:
        if b.last_offset < first or b.first_offset > last:
            kept.append(b)
            continue
        if b.first_offset < first:
            kept.append(
                PersisterStateBatch(b.first_offset, first - 1, b.delivery_state, b.delivery_count)
            )
        if b.last_offset > last:
            kept.append(
                PersisterStateBatch(last + 1, b.last_offset, b.delivery_state, b.delivery_count)
            )
    return kept


def apply_update(state: ShareGroupOffset, update: ShareUpdate) -> ShareGroupOffset:
    """Kafka's ``ShareCoordinatorShard.merge``."""
    start = state.start_offset if update.start_offset == -1 else update.start_offset
    leader_epoch = state.leader_epoch if update.leader_epoch == -1 else update.leader_epoch
    return ShareGroupOffset(
        state.snapshot_epoch,
        state.state_epoch,
        leader_epoch,
        start,
        combine_state_batches(state.state_batches, update.state_batches, start),
    )


# ------------------------------------------------------------------- encoding


def encode_key(key: SharePartitionKey, *, update: bool) -> bytes:
    record_type = SHARE_UPDATE if update else SHARE_SNAPSHOT
    return record_type.key_bytes(
        {"GroupId": key.group_id, "TopicId": key.topic_id, "Partition": key.partition}
    )


def decode_key(data: bytes) -> tuple[SharePartitionKey, bool]:
    """(key, is_update)."""
    try:
        version = read_int16(data, 0)
        if version not in (SNAPSHOT_KEY_VERSION, UPDATE_KEY_VERSION):
            raise RecordFormatError(f"unknown share state key version {version}")
        k = (SHARE_UPDATE if version == UPDATE_KEY_VERSION else SHARE_SNAPSHOT).read_key(data)
    except RecordFormatError:
        raise
    except (struct.error, ValueError, UnicodeDecodeError) as exc:
        raise RecordFormatError(str(exc)) from exc
    return SharePartitionKey(k["GroupId"], k["TopicId"], k["Partition"]), version == 1


def _batches(batches: tuple[PersisterStateBatch, ...]) -> list[dict[str, int]]:
    return [
        {
            "FirstOffset": b.first_offset,
            "LastOffset": b.last_offset,
            "DeliveryState": b.delivery_state,
            "DeliveryCount": b.delivery_count,
        }
        for b in batches
    ]


def _read_batches(items: list[dict[str, int]]) -> tuple[PersisterStateBatch, ...]:
    return tuple(
        PersisterStateBatch(
            b["FirstOffset"], b["LastOffset"], b["DeliveryState"], b["DeliveryCount"]
        )
        for b in items
    )


def _read_value(record_type: RecordType, data: bytes) -> dict[str, Any]:
    try:
        return record_type.read_value(data)[1]
    except (struct.error, ValueError, UnicodeDecodeError) as exc:
        raise RecordFormatError(str(exc)) from exc


def encode_snapshot(value: ShareGroupOffset) -> bytes:
    return SHARE_SNAPSHOT.value_bytes(
        VALUE_VERSION,
        {
            "SnapshotEpoch": value.snapshot_epoch,
            "StateEpoch": value.state_epoch,
            "LeaderEpoch": value.leader_epoch,
            "StartOffset": value.start_offset,
            "StateBatches": _batches(value.state_batches),
        },
    )


def encode_update(value: ShareUpdate) -> bytes:
    return SHARE_UPDATE.value_bytes(
        VALUE_VERSION,
        {
            "SnapshotEpoch": value.snapshot_epoch,
            "LeaderEpoch": value.leader_epoch,
            "StartOffset": value.start_offset,
            "StateBatches": _batches(value.state_batches),
        },
    )


def decode_snapshot(data: bytes) -> ShareGroupOffset:
    v = _read_value(SHARE_SNAPSHOT, data)
    return ShareGroupOffset(
        v["SnapshotEpoch"],
        v["StateEpoch"],
        v["LeaderEpoch"],
        v["StartOffset"],
        _read_batches(v["StateBatches"]),
    )


def decode_update(data: bytes) -> ShareUpdate:
    v = _read_value(SHARE_UPDATE, data)
    return ShareUpdate(
        v["SnapshotEpoch"], v["LeaderEpoch"], v["StartOffset"], _read_batches(v["StateBatches"])
    )
