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
declared as data below and compiled by ``broker/coordinator/record_schema.py`` straight
to and from the dataclasses here (each schema and the state batch name its class as
``make``: no dict is built on the way, which the hand-written codec this replaced did
not build either): a key
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
from broker.coordinator.record_schema import (
    Codec,
    Field,
    RecordType,
    Schema,
    Struct,
    read_int16,
)
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
class StateSummary(ShareGroupOffset):
    """What a ReadShareGroupStateSummary answers: the state without its batches, and how
    many offsets at or past the start offset are done (ACKNOWLEDGED or ARCHIVED: Kafka
    4.2's DeliveryCompleteCount, KIP-1226). The start offset a share partition writes
    moves only with its next write, as Kafka's; the count is what lag subtracts. Kafka's
    share partition sends its count with each write; ours is counted from the batches the
    share coordinator holds, which is the same number."""

    delivery_complete_count: int = -1


def summary_of(state: ShareGroupOffset) -> StateSummary:
    """The summary of ``state``; -1 done for a partition without durable state."""
    start = state.start_offset
    done = sum(
        b.last_offset - max(b.first_offset, start) + 1
        for b in state.state_batches
        if b.delivery_state in _DONE_STATES and b.last_offset >= start
    )
    return StateSummary(
        state.snapshot_epoch,
        state.state_epoch,
        state.leader_epoch,
        start,
        (),
        done if start >= 0 else -1,
    )


_DONE_STATES = (2, 4)  # ACKNOWLEDGED, ARCHIVED


@dataclass(frozen=True, slots=True)
class ShareUpdate:
    """A ShareUpdate value: start offset -1 and leader epoch -1 leave those unchanged."""

    snapshot_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple[PersisterStateBatch, ...]


# ------------------------------------------------------------------- schemas
def _key(name: str) -> Schema:
    fields = (Field("GroupId", "string"), Field("TopicId", "uuid"), Field("Partition", "int32"))
    return Schema(name, "0", "none", fields, make=SharePartitionKey)


STATE_BATCH = Struct(
    "StateBatch",
    (
        Field("FirstOffset", "int64"),
        Field("LastOffset", "int64"),
        Field("DeliveryState", "int8"),
        Field("DeliveryCount", "int16"),
    ),
    make=PersisterStateBatch,
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
        make=ShareGroupOffset,
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
        make=ShareUpdate,
    ),
)


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


# The compiled codecs, bound once: a share partition's every write and load goes here.
_SNAPSHOT_KEY = SHARE_SNAPSHOT.key.codec(0)
_UPDATE_KEY = SHARE_UPDATE.key.codec(0)
_SNAPSHOT_VALUE = SHARE_SNAPSHOT.value.codec(VALUE_VERSION)
_UPDATE_VALUE = SHARE_UPDATE.value.codec(VALUE_VERSION)


def encode_key(key: SharePartitionKey, *, update: bool) -> bytes:
    if update:
        return _UPDATE_KEY.framed(UPDATE_KEY_VERSION, key)
    return _SNAPSHOT_KEY.framed(SNAPSHOT_KEY_VERSION, key)


def decode_key(data: bytes) -> tuple[SharePartitionKey, bool]:
    """(key, is_update)."""
    try:
        version = read_int16(data, 0)
        if version == SNAPSHOT_KEY_VERSION:
            key: SharePartitionKey = _SNAPSHOT_KEY.decode(data, 2)[0]
        elif version == UPDATE_KEY_VERSION:
            key = _UPDATE_KEY.decode(data, 2)[0]
        else:
            raise RecordFormatError(f"unknown share state key version {version}")
    except RecordFormatError:
        raise
    except (struct.error, ValueError, UnicodeDecodeError) as exc:
        raise RecordFormatError(str(exc)) from exc
    return key, version == UPDATE_KEY_VERSION


def _read_value(codec: Codec, record_type: RecordType, data: bytes) -> Any:
    """The value's object (the schema's ``make``): by ``codec`` when it is of
    ``codec``'s version, else by the version it names (an unknown one is an error);
    RecordFormatError when it does not decode."""
    try:
        if read_int16(data, 0) == codec.version:
            return codec.decode(data, 2)[0]
        return record_type.read_value(data)[1]
    except (struct.error, ValueError, UnicodeDecodeError) as exc:
        raise RecordFormatError(str(exc)) from exc


def encode_snapshot(value: ShareGroupOffset) -> bytes:
    return _SNAPSHOT_VALUE.framed(VALUE_VERSION, value)


def encode_update(value: ShareUpdate) -> bytes:
    return _UPDATE_VALUE.framed(VALUE_VERSION, value)


def decode_snapshot(data: bytes) -> ShareGroupOffset:
    snapshot: ShareGroupOffset = _read_value(_SNAPSHOT_VALUE, SHARE_SNAPSHOT, data)
    return snapshot


def decode_update(data: bytes) -> ShareUpdate:
    update: ShareUpdate = _read_value(_UPDATE_VALUE, SHARE_UPDATE, data)
    return update
