"""The share coordinator's records (Kafka's ShareSnapshot and ShareUpdate) and the state
they add up to (``ShareGroupOffset``).

A share partition's durable state — state epoch, leader epoch, share-partition start
offset and state batches (first offset, last offset, delivery state, delivery count) —
is one ``ShareSnapshot`` record followed by ``ShareUpdate`` records, each holding only
the batches that changed; the coordinator folds them (``combine_state_batches``, Kafka's
``PersisterStateBatchCombiner``: later batches win where they overlap, nothing below
the start offset is kept) and writes a new snapshot every
``share.coordinator.snapshot.update.records.per.snapshot`` updates.

The bytes are Kafka's: a key is its record type as an int16 version (0 ShareSnapshot,
1 ShareUpdate) then GroupId, TopicId, Partition (not flexible); a value is an int16
version (0) then the flexible fields (compact array of batches, empty tagged fields).
A deleted share partition is a tombstone (no value) for both keys. Kafka 4.1's
CreateTimestamp/WriteTimestamp snapshot fields are not written.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

SNAPSHOT_KEY_VERSION = 0
UPDATE_KEY_VERSION = 1
VALUE_VERSION = 0

_KEY_TAIL = struct.Struct(">16si")
_SNAPSHOT_HEAD = struct.Struct(">hHiiq")  # version, snapshot epoch, state, leader, start
_UPDATE_HEAD = struct.Struct(">hHiq")  # version, snapshot epoch, leader epoch, start
_BATCH = struct.Struct(">qqbh")


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
    group = key.group_id.encode()
    version = UPDATE_KEY_VERSION if update else SNAPSHOT_KEY_VERSION
    return (
        struct.pack(">hh", version, len(group))
        + group
        + _KEY_TAIL.pack(key.topic_id.bytes, key.partition)
    )


def decode_key(data: bytes) -> tuple[SharePartitionKey, bool]:
    """(key, is_update)."""
    try:
        version, length = struct.unpack_from(">hh", data)
        if version not in (SNAPSHOT_KEY_VERSION, UPDATE_KEY_VERSION) or length < 0:
            raise RecordFormatError(f"unknown share state key version {version}")
        group = data[4 : 4 + length].decode()
        topic_id, partition = _KEY_TAIL.unpack_from(data, 4 + length)
    except (struct.error, UnicodeDecodeError) as exc:
        raise RecordFormatError(str(exc)) from exc
    return SharePartitionKey(group, uuid.UUID(bytes=topic_id), partition), version == 1


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _read_uvarint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 28:
            raise RecordFormatError("bad varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _encode_batches(batches: tuple[PersisterStateBatch, ...]) -> bytes:
    parts = [_uvarint(len(batches) + 1)]
    for b in batches:
        parts.append(_BATCH.pack(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count))
        parts.append(b"\x00")  # the batch's tagged fields
    parts.append(b"\x00")  # the value's tagged fields
    return b"".join(parts)


def _decode_batches(data: bytes, pos: int) -> tuple[PersisterStateBatch, ...]:
    count, pos = _read_uvarint(data, pos)
    if count - 1 > (len(data) - pos) // (_BATCH.size + 1):
        raise RecordFormatError("state batch count past the record's end")
    batches = []
    for _ in range(count - 1):
        try:
            first, last, state, delivered = _BATCH.unpack_from(data, pos)
        except struct.error as exc:
            raise RecordFormatError(str(exc)) from exc
        pos += _BATCH.size
        tags, pos = _read_uvarint(data, pos)
        if tags:
            raise RecordFormatError("unexpected tagged fields in a state batch")
        batches.append(PersisterStateBatch(first, last, state, delivered))
    return tuple(batches)


def encode_snapshot(value: ShareGroupOffset) -> bytes:
    return _SNAPSHOT_HEAD.pack(
        VALUE_VERSION,
        value.snapshot_epoch,
        value.state_epoch,
        value.leader_epoch,
        value.start_offset,
    ) + _encode_batches(value.state_batches)


def encode_update(value: ShareUpdate) -> bytes:
    return _UPDATE_HEAD.pack(
        VALUE_VERSION, value.snapshot_epoch, value.leader_epoch, value.start_offset
    ) + _encode_batches(value.state_batches)


def decode_snapshot(data: bytes) -> ShareGroupOffset:
    try:
        _version, snapshot_epoch, state_epoch, leader_epoch, start = _SNAPSHOT_HEAD.unpack_from(
            data
        )
    except struct.error as exc:
        raise RecordFormatError(str(exc)) from exc
    batches = _decode_batches(data, _SNAPSHOT_HEAD.size)
    return ShareGroupOffset(snapshot_epoch, state_epoch, leader_epoch, start, batches)


def decode_update(data: bytes) -> ShareUpdate:
    try:
        _version, snapshot_epoch, leader_epoch, start = _UPDATE_HEAD.unpack_from(data)
    except struct.error as exc:
        raise RecordFormatError(str(exc)) from exc
    return ShareUpdate(
        snapshot_epoch, leader_epoch, start, _decode_batches(data, _UPDATE_HEAD.size)
    )
