"""Persistence of groups and offsets as ``__consumer_offsets`` records.

The :class:`~broker.group.group_metadata_manager.GroupMetadataManager` never touches a
log itself. Whenever Kafka's would append to the offsets topic (an offset commit, a
group's new generation and assignment, a deletion), ours encodes key/value records and
hands them to an injected :class:`GroupLog`, naming the offsets-topic partition; when
this broker becomes the leader of a partition it reads the partition back through the
same interface and rebuilds the same groups and offsets. The broker's ``GroupLog`` is
:class:`~broker.group.offsets_topic_log.OffsetsTopicLog` (over the replica manager);
:class:`InMemoryGroupLog` here serves unit tests.

Encoding: Kafka's own record schemas, so a real Kafka tool reading our topic (or our
replay reading Kafka's) sees familiar bytes. Every key and value starts with an int16
schema version; strings are int16-length UTF-8 (length -1 for null), bytes are
int32-length, integers big-endian:

* offset commit key (version 1): ``group: string, topic: string, partition: int32``
* offset commit value (version 3): ``offset: int64, leader_epoch: int32,
  metadata: string, commit_timestamp: int64``; version 1 (``offset, metadata,
  commit_timestamp, expire_timestamp: int64``) when the commit carried an explicit
  expiry; versions 0-3 are all read back.
* group metadata key (version 2): ``group: string``
* group metadata value (version 3): ``protocol_type: string, generation: int32,
  protocol: nullable string, leader: nullable string, current_state_timestamp: int64,
  members: [member_id: string, group_instance_id: nullable string, client_id: string,
  client_host: string, rebalance_timeout: int32, session_timeout: int32,
  subscription: bytes, assignment: bytes]``; versions 0-3 are read back.
* a value of ``None`` is a tombstone: the offset, or the whole group, was deleted.
* key versions 3-8 are a KIP-848 consumer group's records (group epoch, subscription
  metadata, member subscription, target assignment epoch and members, current member
  assignment), encoded and decoded by ``consumer/consumer_group_records.py``; the
  loader and the manager route them there, ``decode_record`` skips them quietly.

Records of a group go to partition ``partition_for(group_id)`` of ``__consumer_offsets``;
the later record for a key wins, which is also what log compaction keeps.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

from kio.schema.errors import ErrorCode

from broker.group.offsets import OffsetAndMetadata
from broker.server.purgatories import ParkedRequest, PurgatoryName, PurgatoryOutcome

log = logging.getLogger("broker.group")

GROUP_METADATA_TOPIC_NAME = "__consumer_offsets"

KeyValue = tuple[bytes, bytes | None]

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_VALUE_VERSION = 3


AppendCallback = Callable[[ErrorCode], None]


class GroupLog(Protocol):
    """Where the group metadata manager's records go, and where it reads them back.

    With ``on_done``, ``append_to_log`` is Kafka's ``appendForGroup``: written with
    ``offsets.commit.required.acks`` (acks=all) and ``on_done`` is called exactly once
    with the append's own error — NONE once the in-sync replicas have the records, or
    e.g. NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT, NOT_LEADER_OR_FOLLOWER. It may be called
    before ``append_to_log`` returns (a single replica: the high watermark moves with
    the append). While it waits, the request it serves (``parked_request``, if any)
    waits in the Produce purgatory and is told so, and how it left. The manager maps
    the error to its API's and changes its state only in the callback, which is why a
    commit is never visible before it is replicated.

    Without ``on_done`` nobody waits: Kafka writes its cleanup tombstones that way.

    With ``producer`` (producer id, epoch) the records are a TxnOffsetCommit's: one
    transactional batch of that producer, pending until its transaction's marker.

    ``open_log`` reads the partition back for a load: the entries of each record batch
    from the log start up to the log end it had when it was opened, one list per batch,
    read when the iterator gets there -- a key/value pair for a plain record, a
    :class:`TxnRecord` for a record of a transactional batch and a :class:`TxnMarker` for
    a transaction's COMMIT/ABORT marker; None when this broker has no online replica of
    the partition (yet).
    """

    def append_to_log(
        self,
        partition: int,
        records: list[KeyValue],
        on_done: AppendCallback | None = None,
        parked_request: ParkedRequest | None = None,
        *,
        producer: tuple[int, int] | None = None,
    ) -> None: ...

    def open_log(self, partition: int) -> Iterator[list[LogEntry]] | None: ...


@dataclass(frozen=True, slots=True)
class TxnRecord:
    """A record written by a transaction (a TxnOffsetCommit): pending until its marker."""

    producer_id: int
    key: bytes
    value: bytes | None


@dataclass(frozen=True, slots=True)
class TxnMarker:
    """A transaction's COMMIT or ABORT marker."""

    producer_id: int
    commit: bool


LogEntry = KeyValue | TxnRecord | TxnMarker


# --------------------------------------------------------------------- records
@dataclass(frozen=True)
class OffsetCommitRecord:
    """A committed offset of one partition; ``value=None`` deletes it."""

    group_id: str
    topic: str
    partition: int
    value: OffsetAndMetadata | None


@dataclass(frozen=True)
class MemberRecord:
    """A member as stored with its group's generation."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupMetadataValue:
    """A group's generation, protocol, leader and members at a Stable or Empty point."""

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: list[MemberRecord] = field(default_factory=list)


@dataclass(frozen=True)
class GroupMetadataRecord:
    """A group's metadata; ``value=None`` deletes the group."""

    group_id: str
    value: GroupMetadataValue | None


Record = OffsetCommitRecord | GroupMetadataRecord


# ------------------------------------------------------------ primitive codec
class _Writer:
    def __init__(self) -> None:
        self.buf = bytearray()

    def int16(self, v: int) -> None:
        self.buf += struct.pack(">h", v)

    def int32(self, v: int) -> None:
        self.buf += struct.pack(">i", v)

    def int64(self, v: int) -> None:
        self.buf += struct.pack(">q", v)

    def string(self, v: str | None) -> None:
        if v is None:
            self.int16(-1)
            return
        raw = v.encode("utf-8")
        self.int16(len(raw))
        self.buf += raw

    def bytes_(self, v: bytes) -> None:
        self.int32(len(v))
        self.buf += v


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _unpack(self, fmt: str, size: int) -> int:
        (v,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return int(v)

    def int16(self) -> int:
        return self._unpack(">h", 2)

    def int32(self) -> int:
        return self._unpack(">i", 4)

    def int64(self) -> int:
        return self._unpack(">q", 8)

    def nullable_string(self) -> str | None:
        n = self.int16()
        if n < 0:
            return None
        raw = self.data[self.pos : self.pos + n]
        if len(raw) != n:
            raise ValueError("truncated string")
        self.pos += n
        return raw.decode("utf-8")

    def string(self) -> str:
        v = self.nullable_string()
        if v is None:
            raise ValueError("null where a string is required")
        return v

    def bytes_(self) -> bytes:
        n = self.int32()
        if n < 0:
            return b""
        raw = self.data[self.pos : self.pos + n]
        if len(raw) != n:
            raise ValueError("truncated bytes")
        self.pos += n
        return bytes(raw)


# ------------------------------------------------------------- record codec
def encode_record(record: Record) -> KeyValue:
    """Key and value bytes of a record (value None for a tombstone)."""
    key = _Writer()
    if isinstance(record, OffsetCommitRecord):
        key.int16(OFFSET_COMMIT_KEY_VERSION)
        key.string(record.group_id)
        key.string(record.topic)
        key.int32(record.partition)
        return bytes(key.buf), None if record.value is None else _encode_offset(record.value)
    key.int16(GROUP_METADATA_KEY_VERSION)
    key.string(record.group_id)
    return bytes(key.buf), None if record.value is None else _encode_group(record.value)


def _encode_offset(om: OffsetAndMetadata) -> bytes:
    w = _Writer()
    if om.expire_timestamp is not None:
        w.int16(1)
        w.int64(om.offset)
        w.string(om.metadata)
        w.int64(om.commit_timestamp)
        w.int64(om.expire_timestamp)
    else:
        w.int16(OFFSET_COMMIT_VALUE_VERSION)
        w.int64(om.offset)
        w.int32(om.leader_epoch)
        w.string(om.metadata)
        w.int64(om.commit_timestamp)
    return bytes(w.buf)


def _encode_group(value: GroupMetadataValue) -> bytes:
    w = _Writer()
    w.int16(GROUP_METADATA_VALUE_VERSION)
    w.string(value.protocol_type)
    w.int32(value.generation)
    w.string(value.protocol)
    w.string(value.leader)
    w.int64(value.current_state_timestamp)
    w.int32(len(value.members))
    for m in value.members:
        w.string(m.member_id)
        w.string(m.group_instance_id)
        w.string(m.client_id)
        w.string(m.client_host)
        w.int32(m.rebalance_timeout_ms)
        w.int32(m.session_timeout_ms)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
    return bytes(w.buf)


def decode_record(key: bytes, value: bytes | None) -> Record | None:
    """The record a key/value pair holds; None (with a warning) for an unknown schema."""
    try:
        r = _Reader(key)
        key_version = r.int16()
        if key_version in (0, 1):
            group_id, topic, partition = r.string(), r.string(), r.int32()
            om = None if value is None else _decode_offset(value)
            return OffsetCommitRecord(group_id, topic, partition, om)
        if key_version == 2:
            group_id = r.string()
            gv = None if value is None else _decode_group(value)
            return GroupMetadataRecord(group_id, gv)
        if 3 <= key_version <= 8:
            return None  # a consumer group's (consumer/consumer_group_records.py)
        log.warning(
            "Skipping %s record with unknown key version %d", GROUP_METADATA_TOPIC_NAME, key_version
        )
    except (struct.error, ValueError, UnicodeDecodeError) as exc:
        log.warning("Skipping malformed %s record: %s", GROUP_METADATA_TOPIC_NAME, exc)
    return None


def _decode_offset(value: bytes) -> OffsetAndMetadata:
    r = _Reader(value)
    version = r.int16()
    if version not in (0, 1, 2, 3):
        raise ValueError(f"unknown offset commit value version {version}")
    offset = r.int64()
    leader_epoch = r.int32() if version >= 3 else -1
    metadata = r.string()
    commit_ts = r.int64()
    expire_ts = r.int64() if version == 1 else -1
    return OffsetAndMetadata(
        offset=offset,
        leader_epoch=leader_epoch,
        metadata=metadata,
        commit_timestamp=commit_ts,
        expire_timestamp=None if expire_ts < 0 else expire_ts,
    )


def _decode_group(value: bytes) -> GroupMetadataValue:
    r = _Reader(value)
    version = r.int16()
    if version not in (0, 1, 2, 3):
        raise ValueError(f"unknown group metadata value version {version}")
    protocol_type = r.string()
    generation = r.int32()
    protocol = r.nullable_string()
    leader = r.nullable_string()
    state_ts = r.int64() if version >= 2 else -1
    members = []
    for _ in range(r.int32()):
        member_id = r.string()
        instance_id = r.nullable_string() if version >= 3 else None
        client_id = r.string()
        client_host = r.string()
        rebalance_timeout = r.int32() if version >= 1 else -1
        session_timeout = r.int32()
        if rebalance_timeout < 0:
            rebalance_timeout = session_timeout
        members.append(
            MemberRecord(
                member_id,
                instance_id,
                client_id,
                client_host,
                rebalance_timeout,
                session_timeout,
                r.bytes_(),
                r.bytes_(),
            )
        )
    return GroupMetadataValue(protocol_type, generation, protocol, leader, state_ts, members)


# ------------------------------------------------------------ in-memory log
class InMemoryGroupLog:
    """A :class:`GroupLog` that keeps records in a list, per offsets-topic partition.

    Enough for unit tests; ``records()`` is what a restart would replay. Appends
    complete at once (there are no other replicas to wait for) unless ``hold`` is set:
    then, as a lagging ISR would, the append is written but its callback waits for
    :meth:`complete`, and the request it serves waits in the Produce purgatory meanwhile.
    """

    def __init__(self) -> None:
        self._entries: list[tuple[int, bytes, bytes | None]] = []
        # What read_log gives back, by partition (transactional records and markers too).
        self._log: dict[int, list[LogEntry]] = {}
        # Tests: the next append fails with this append error (nothing is written), or
        # raises this exception.
        self.fail_next: ErrorCode | Exception | None = None
        self.hold = False
        self.waiting: list[tuple[AppendCallback, ParkedRequest | None]] = []

    def append_to_log(
        self,
        partition: int,
        records: list[KeyValue],
        on_done: AppendCallback | None = None,
        parked_request: ParkedRequest | None = None,
        *,
        producer: tuple[int, int] | None = None,
    ) -> None:
        failure, self.fail_next = self.fail_next, None
        if isinstance(failure, Exception):
            raise failure
        if failure is None:
            self._entries.extend((partition, k, v) for k, v in records)
            self._log.setdefault(partition, []).extend(
                records if producer is None else [TxnRecord(producer[0], k, v) for k, v in records]
            )
        if on_done is None:
            return
        if self.hold and failure is None:
            if parked_request is not None:
                parked_request.parked_in(PurgatoryName.PRODUCE)
            self.waiting.append((on_done, parked_request))
            return
        on_done(ErrorCode.none if failure is None else failure)

    def complete(self, error: ErrorCode = ErrorCode.none) -> None:
        """The oldest held append's replicas caught up (NONE) or it failed (e.g.
        REQUEST_TIMED_OUT: its DelayedProduce expired)."""
        on_done, parked_request = self.waiting.pop(0)
        if parked_request is not None:
            parked_request.purgatory_done(PurgatoryOutcome.COMPLETED)
        on_done(error)
        if parked_request is not None and error is ErrorCode.request_timed_out:
            parked_request.purgatory_done(PurgatoryOutcome.EXPIRED)

    def read_log(self, partition: int) -> list[LogEntry]:
        """Every entry of ``partition``, in order."""
        return list(self._log.get(partition, []))

    def open_log(self, partition: int) -> Iterator[list[LogEntry]]:
        """One entry a "batch", up to the end the partition has now."""
        return iter([[entry] for entry in self.read_log(partition)])

    def write_marker(self, partition: int, producer_id: int, commit: bool) -> None:
        """A transaction's marker lands in ``partition`` (what WriteTxnMarkers writes)."""
        self._log.setdefault(partition, []).append(TxnMarker(producer_id, commit))

    def records(self, partition: int | None = None) -> list[KeyValue]:
        """Every appended key/value in append order (optionally of one partition)."""
        return [(k, v) for p, k, v in self._entries if partition is None or p == partition]

    @property
    def partitions(self) -> set[int]:
        """The partitions written to."""
        return {p for p, _, _ in self._entries}

    def decoded(self) -> list[Record]:
        """The appended records, decoded (for tests and debugging)."""
        out = []
        for k, v in self.records():
            rec = decode_record(k, v)
            if rec is not None:
                out.append(rec)
        return out


def decode_all(records: Iterable[KeyValue]) -> list[Record]:
    """Decode a replayed stream, skipping what does not parse."""
    return [rec for k, v in records if (rec := decode_record(k, v)) is not None]
