"""A consumer group's records in ``__consumer_offsets`` (KIP-848), in Kafka 4's formats.

Kafka 4 keeps a consumer group durable as six record types beside the classic group's
``OffsetCommit`` (key versions 0-1) and ``GroupMetadata`` (2); the key's int16 version
says which type a record is (``GroupCoordinatorRecordSerde``):

=====  ==========================================  ==================================
key    record                                      value (version 0)
=====  ==========================================  ==================================
3      ConsumerGroupMetadata (group)               Epoch: the group epoch
4      ConsumerGroupPartitionMetadata (group)      Topics: [TopicId, TopicName,
                                                   NumPartitions, PartitionMetadata]
5      ConsumerGroupMemberMetadata (group, member) InstanceId, RackId, ClientId,
                                                   ClientHost, SubscribedTopicNames,
                                                   SubscribedTopicRegex,
                                                   RebalanceTimeoutMs, ServerAssignor
6      ConsumerGroupTargetAssignmentMetadata       AssignmentEpoch
7      ConsumerGroupTargetAssignmentMember         TopicPartitions: [TopicId, Partitions]
8      ConsumerGroupCurrentMemberAssignment        MemberEpoch, PreviousMemberEpoch,
                                                   State (int8), AssignedPartitions,
                                                   PartitionsPendingRevocation
=====  ==========================================  ==================================

Keys are not flexible: int16 version, then int16-length strings. Values are flexible
(``flexibleVersions: 0+``): int16 version 0, compact strings and arrays (unsigned varint
length + 1, 0 for null), 16-byte UUIDs, and an empty tagged-field section after every
struct (tagged fields read back are skipped, but for the member's tag-0
ClassicMemberMetadata — SessionTimeoutMs, SupportedProtocols [Name, Metadata] — which
Kafka writes only for a classic member in a consumer group). A value of ``None`` is a
tombstone.

Kafka 4.0 still writes ConsumerGroupPartitionMetadata (the subscribed topics' ids and
partition counts, the group's subscription metadata); its per-partition racks are
deprecated and written empty, as Kafka's ``newConsumerGroupSubscriptionMetadataRecord``
does. Its topics are written in name order and assignments by topic id and partition,
sorted (Kafka writes hash-map order).

``records_for_changes`` turns a group's change (the :class:`ConsumerGroupView` taken
before it, the group after it) into these records, in the order Kafka's heartbeat emits
them; ``ConsumerGroupLoad`` rebuilds the groups from them on a load (Kafka's
``replay``).
"""

from __future__ import annotations

import logging
import struct
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from broker.group.consumer.consumer_group import ConsumerGroup, TopicMetadata
from broker.group.consumer.consumer_group_member import (
    Assignment,
    ClassicMemberMetadata,
    ConsumerGroupMember,
    MemberState,
)

log = logging.getLogger("broker.group.consumer")

KeyValue = tuple[bytes, bytes | None]

CONSUMER_GROUP_METADATA_KEY_VERSION = 3
CONSUMER_GROUP_PARTITION_METADATA_KEY_VERSION = 4
CONSUMER_GROUP_MEMBER_METADATA_KEY_VERSION = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY_VERSION = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY_VERSION = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY_VERSION = 8
CONSUMER_GROUP_KEY_VERSIONS = frozenset(range(3, 9))
VALUE_VERSION = 0

# Kafka's MemberState values (the int8 of ConsumerGroupCurrentMemberAssignmentValue).
MEMBER_STATE_VALUES: Mapping[MemberState, int] = {
    MemberState.STABLE: 0,
    MemberState.UNREVOKED_PARTITIONS: 1,
    MemberState.UNRELEASED_PARTITIONS: 2,
    MemberState.UNKNOWN: 127,
}
_STATE_OF_VALUE = {v: s for s, v in MEMBER_STATE_VALUES.items()}
_V = TypeVar("_V")


# --------------------------------------------------------------------- records
@dataclass(frozen=True)
class MemberSubscription:
    """ConsumerGroupMemberMetadataValue."""

    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    classic_member_metadata: ClassicMemberMetadata | None = None


@dataclass(frozen=True)
class CurrentAssignment:
    """ConsumerGroupCurrentMemberAssignmentValue."""

    member_epoch: int
    previous_member_epoch: int
    state: MemberState
    assigned_partitions: Assignment
    partitions_pending_revocation: Assignment


@dataclass(frozen=True)
class ConsumerGroupMetadataRecord:
    group_id: str
    epoch: int | None  # None: tombstone (the group is deleted)


@dataclass(frozen=True)
class ConsumerGroupPartitionMetadataRecord:
    group_id: str
    topics: tuple[TopicMetadata, ...] | None


@dataclass(frozen=True)
class ConsumerGroupMemberMetadataRecord:
    group_id: str
    member_id: str
    value: MemberSubscription | None


@dataclass(frozen=True)
class ConsumerGroupTargetAssignmentMetadataRecord:
    group_id: str
    assignment_epoch: int | None


@dataclass(frozen=True)
class ConsumerGroupTargetAssignmentMemberRecord:
    group_id: str
    member_id: str
    partitions: Assignment | None


@dataclass(frozen=True)
class ConsumerGroupCurrentMemberAssignmentRecord:
    group_id: str
    member_id: str
    value: CurrentAssignment | None


ConsumerGroupRecord = (
    ConsumerGroupMetadataRecord
    | ConsumerGroupPartitionMetadataRecord
    | ConsumerGroupMemberMetadataRecord
    | ConsumerGroupTargetAssignmentMetadataRecord
    | ConsumerGroupTargetAssignmentMemberRecord
    | ConsumerGroupCurrentMemberAssignmentRecord
)


# ------------------------------------------------------------ primitive codec
class _Writer:
    def __init__(self) -> None:
        self.buf = bytearray()

    def int8(self, v: int) -> None:
        self.buf += struct.pack(">b", v)

    def int16(self, v: int) -> None:
        self.buf += struct.pack(">h", v)

    def int32(self, v: int) -> None:
        self.buf += struct.pack(">i", v)

    def string(self, v: str) -> None:  # non-flexible (keys)
        raw = v.encode("utf-8")
        self.int16(len(raw))
        self.buf += raw

    def uvarint(self, v: int) -> None:
        while v >= 0x80:
            self.buf.append((v & 0x7F) | 0x80)
            v >>= 7
        self.buf.append(v)

    def compact_string(self, v: str | None) -> None:
        if v is None:
            self.uvarint(0)
            return
        raw = v.encode("utf-8")
        self.uvarint(len(raw) + 1)
        self.buf += raw

    def array_length(self, n: int) -> None:
        self.uvarint(n + 1)

    def uuid(self, v: uuid.UUID) -> None:
        self.buf += v.bytes

    def no_tagged_fields(self) -> None:
        self.uvarint(0)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _unpack(self, fmt: str, size: int) -> int:
        (v,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return int(v)

    def int8(self) -> int:
        return self._unpack(">b", 1)

    def int16(self) -> int:
        return self._unpack(">h", 2)

    def int32(self) -> int:
        return self._unpack(">i", 4)

    def _raw(self, n: int) -> bytes:
        raw = self.data[self.pos : self.pos + n]
        if len(raw) != n:
            raise ValueError("truncated record")
        self.pos += n
        return bytes(raw)

    def string(self) -> str:
        n = self.int16()
        if n < 0:
            raise ValueError("null where a string is required")
        return self._raw(n).decode("utf-8")

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            if shift > 28:
                raise ValueError("varint too long")
            b = self._raw(1)[0]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7

    def compact_nullable_string(self) -> str | None:
        n = self.uvarint()
        return None if n == 0 else self._raw(n - 1).decode("utf-8")

    def compact_string(self) -> str:
        v = self.compact_nullable_string()
        if v is None:
            raise ValueError("null where a string is required")
        return v

    def array_length(self) -> int:
        n = self.uvarint()
        if n == 0:
            raise ValueError("null where an array is required")
        if n - 1 > len(self.data) - self.pos:
            raise ValueError("array longer than the record")
        return n - 1

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=self._raw(16))

    def skip_tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self._raw(self.uvarint())


# ------------------------------------------------------------------ encoding
def _sorted_assignment(assignment: Assignment) -> list[tuple[uuid.UUID, list[int]]]:
    return [(t, sorted(ps)) for t, ps in sorted(assignment.items(), key=lambda e: str(e[0]))]


def _write_topic_partitions(w: _Writer, assignment: Assignment) -> None:
    items = _sorted_assignment(assignment)
    w.array_length(len(items))
    for topic_id, partitions in items:
        w.uuid(topic_id)
        w.array_length(len(partitions))
        for p in partitions:
            w.int32(p)
        w.no_tagged_fields()


def _read_topic_partitions(r: _Reader) -> dict[uuid.UUID, frozenset[int]]:
    out: dict[uuid.UUID, frozenset[int]] = {}
    for _ in range(r.array_length()):
        topic_id = r.uuid()
        partitions = frozenset(r.int32() for _ in range(r.array_length()))
        r.skip_tagged_fields()
        if partitions:
            out[topic_id] = partitions
    return out


def encode_consumer_group_record(record: ConsumerGroupRecord) -> KeyValue:
    """Key and value bytes (value None for a tombstone), Kafka's versions."""
    key = _Writer()
    value = _Writer()
    value.int16(VALUE_VERSION)
    tombstone = False
    if isinstance(record, ConsumerGroupMetadataRecord):
        key.int16(CONSUMER_GROUP_METADATA_KEY_VERSION)
        key.string(record.group_id)
        tombstone = record.epoch is None
        if record.epoch is not None:
            value.int32(record.epoch)
    elif isinstance(record, ConsumerGroupPartitionMetadataRecord):
        key.int16(CONSUMER_GROUP_PARTITION_METADATA_KEY_VERSION)
        key.string(record.group_id)
        tombstone = record.topics is None
        topics = sorted(record.topics or (), key=lambda t: t.name)
        value.array_length(len(topics))
        for t in topics:
            value.uuid(t.topic_id)
            value.compact_string(t.name)
            value.int32(t.num_partitions)
            value.array_length(0)  # PartitionMetadata: deprecated, stored empty
            value.no_tagged_fields()
    elif isinstance(record, ConsumerGroupMemberMetadataRecord):
        key.int16(CONSUMER_GROUP_MEMBER_METADATA_KEY_VERSION)
        key.string(record.group_id)
        key.string(record.member_id)
        m = record.value
        tombstone = m is None
        if m is not None:
            value.compact_string(m.instance_id)
            value.compact_string(m.rack_id)
            value.compact_string(m.client_id)
            value.compact_string(m.client_host)
            names = sorted(m.subscribed_topic_names)
            value.array_length(len(names))
            for name in names:
                value.compact_string(name)
            value.compact_string(m.subscribed_topic_regex)
            value.int32(m.rebalance_timeout_ms)
            value.compact_string(m.server_assignor)
            if m.classic_member_metadata is not None:
                _write_classic_member_metadata(value, m.classic_member_metadata)
                return bytes(key.buf), bytes(value.buf)
    elif isinstance(record, ConsumerGroupTargetAssignmentMetadataRecord):
        key.int16(CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY_VERSION)
        key.string(record.group_id)
        tombstone = record.assignment_epoch is None
        if record.assignment_epoch is not None:
            value.int32(record.assignment_epoch)
    elif isinstance(record, ConsumerGroupTargetAssignmentMemberRecord):
        key.int16(CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY_VERSION)
        key.string(record.group_id)
        key.string(record.member_id)
        tombstone = record.partitions is None
        _write_topic_partitions(value, record.partitions or {})
    else:
        key.int16(CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY_VERSION)
        key.string(record.group_id)
        key.string(record.member_id)
        a = record.value
        tombstone = a is None
        if a is not None:
            value.int32(a.member_epoch)
            value.int32(a.previous_member_epoch)
            value.int8(MEMBER_STATE_VALUES[a.state])
            _write_topic_partitions(value, a.assigned_partitions)
            _write_topic_partitions(value, a.partitions_pending_revocation)
    value.no_tagged_fields()
    return bytes(key.buf), None if tombstone else bytes(value.buf)


def _write_classic_member_metadata(w: _Writer, c: ClassicMemberMetadata) -> None:
    """The value's tagged fields: one, tag 0, the ClassicMemberMetadata struct."""
    body = _Writer()
    body.int32(c.session_timeout_ms)
    body.array_length(len(c.supported_protocols))
    for name, metadata in c.supported_protocols:
        body.compact_string(name)
        body.uvarint(len(metadata) + 1)
        body.buf += metadata
        body.no_tagged_fields()
    body.no_tagged_fields()
    w.uvarint(1)  # one tagged field
    w.uvarint(0)  # tag 0
    w.uvarint(len(body.buf))
    w.buf += body.buf


def _read_classic_member_metadata(r: _Reader) -> ClassicMemberMetadata | None:
    """The value's tagged fields: tag 0 read as ClassicMemberMetadata, others skipped."""
    found = None
    for _ in range(r.uvarint()):
        tag, size = r.uvarint(), r.uvarint()
        if tag != 0:
            r._raw(size)
            continue
        end = r.pos + size
        timeout = r.int32()
        protocols = []
        for _ in range(r.array_length()):
            name = r.compact_string()
            n = r.uvarint() - 1
            protocols.append((name, r._raw(n) if n > 0 else b""))
            r.skip_tagged_fields()
        r.skip_tagged_fields()
        if r.pos != end:
            raise ValueError("bad ClassicMemberMetadata size")
        found = ClassicMemberMetadata(timeout, tuple(protocols))
    return found


# ------------------------------------------------------------------ decoding
def decode_consumer_group_record(key: bytes, value: bytes | None) -> ConsumerGroupRecord:
    """The record of a key with version 3-8; raises ValueError / struct.error when it
    does not parse (the caller skips it with a warning, as any record)."""
    k = _Reader(key)
    version = k.int16()
    group_id = k.string()
    v: _Reader | None = None
    if value is not None:
        v = _Reader(value)
        value_version = v.int16()
        if value_version != VALUE_VERSION:
            raise ValueError(f"unknown value version {value_version} for key version {version}")
    record: ConsumerGroupRecord
    if version == CONSUMER_GROUP_METADATA_KEY_VERSION:
        record = ConsumerGroupMetadataRecord(group_id, None if v is None else v.int32())
    elif version == CONSUMER_GROUP_PARTITION_METADATA_KEY_VERSION:
        topics: tuple[TopicMetadata, ...] | None = None
        if v is not None:
            found = []
            for _ in range(v.array_length()):
                topic_id, name, count = v.uuid(), v.compact_string(), v.int32()
                for _ in range(v.array_length()):  # deprecated racks: skipped
                    v.int32()
                    for _ in range(v.array_length()):
                        v.compact_string()
                    v.skip_tagged_fields()
                v.skip_tagged_fields()
                found.append(TopicMetadata(topic_id, name, count))
            topics = tuple(found)
        record = ConsumerGroupPartitionMetadataRecord(group_id, topics)
    elif version == CONSUMER_GROUP_MEMBER_METADATA_KEY_VERSION:
        member_id = k.string()
        sub = None
        if v is not None:
            sub = MemberSubscription(
                instance_id=v.compact_nullable_string(),
                rack_id=v.compact_nullable_string(),
                client_id=v.compact_string(),
                client_host=v.compact_string(),
                subscribed_topic_names=tuple(v.compact_string() for _ in range(v.array_length())),
                subscribed_topic_regex=v.compact_nullable_string(),
                rebalance_timeout_ms=v.int32(),
                server_assignor=v.compact_nullable_string(),
                classic_member_metadata=_read_classic_member_metadata(v),
            )
            v = None  # its tagged fields are read
        record = ConsumerGroupMemberMetadataRecord(group_id, member_id, sub)
    elif version == CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY_VERSION:
        record = ConsumerGroupTargetAssignmentMetadataRecord(
            group_id, None if v is None else v.int32()
        )
    elif version == CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY_VERSION:
        member_id = k.string()
        record = ConsumerGroupTargetAssignmentMemberRecord(
            group_id, member_id, None if v is None else _read_topic_partitions(v)
        )
    elif version == CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY_VERSION:
        member_id = k.string()
        current = None
        if v is not None:
            current = CurrentAssignment(
                member_epoch=v.int32(),
                previous_member_epoch=v.int32(),
                state=_STATE_OF_VALUE.get(v.int8(), MemberState.UNKNOWN),
                assigned_partitions=_read_topic_partitions(v),
                partitions_pending_revocation=_read_topic_partitions(v),
            )
        record = ConsumerGroupCurrentMemberAssignmentRecord(group_id, member_id, current)
    else:
        raise ValueError(f"not a consumer group key version: {version}")
    if v is not None:
        v.skip_tagged_fields()
    return record


def is_consumer_group_key(key: bytes) -> bool:
    """Whether ``key`` is one of a consumer group's records (key version 3-8)."""
    return len(key) >= 2 and struct.unpack_from(">h", key)[0] in CONSUMER_GROUP_KEY_VERSIONS


def decode_or_skip(key: bytes, value: bytes | None) -> ConsumerGroupRecord | None:
    """The record; None, with a warning, when it does not parse."""
    try:
        return decode_consumer_group_record(key, value)
    except (struct.error, ValueError, UnicodeDecodeError) as exc:
        log.warning("Skipping malformed consumer group record: %s", exc)
        return None


# ------------------------------------------------------------ changes -> records
@dataclass(frozen=True)
class ConsumerGroupView:
    """What of a group its records hold, at one moment (members are immutable, so the
    copies are shallow)."""

    group_epoch: int
    assignment_epoch: int
    subscription_metadata: dict[str, TopicMetadata]
    members: dict[str, ConsumerGroupMember]
    target_assignment: dict[str, Assignment]
    exists: bool

    @classmethod
    def of(cls, group: ConsumerGroup | None) -> ConsumerGroupView:
        if group is None:
            return cls(0, 0, {}, {}, {}, exists=False)
        return cls(
            group.group_epoch,
            group.assignment_epoch,
            dict(group.subscription_metadata),
            dict(group.members),
            dict(group.target_assignment),
            exists=True,
        )


def member_subscription(member: ConsumerGroupMember) -> MemberSubscription:
    return MemberSubscription(
        instance_id=member.instance_id,
        rack_id=member.rack_id,
        client_id=member.client_id,
        client_host=member.client_host,
        subscribed_topic_names=tuple(sorted(member.subscribed_topic_names)),
        subscribed_topic_regex=member.subscribed_topic_regex,
        rebalance_timeout_ms=member.rebalance_timeout_ms,
        server_assignor=member.server_assignor_name,
        classic_member_metadata=member.classic_member_metadata,
    )


def current_assignment(member: ConsumerGroupMember) -> CurrentAssignment:
    return CurrentAssignment(
        member_epoch=member.member_epoch,
        previous_member_epoch=member.previous_member_epoch,
        state=member.state,
        assigned_partitions=_normalized(member.assigned_partitions),
        partitions_pending_revocation=_normalized(member.partitions_pending_revocation),
    )


def _normalized(assignment: Assignment) -> dict[uuid.UUID, frozenset[int]]:
    return {t: frozenset(ps) for t, ps in assignment.items() if ps}


def records_for_changes(
    group_id: str, before: ConsumerGroupView, after: ConsumerGroupView
) -> list[ConsumerGroupRecord]:
    """The records that take the log from ``before`` to ``after``, in Kafka's order: the
    members that left (current assignment, target assignment, subscription tombstones),
    the members' subscriptions, the subscription metadata, the group epoch, the target
    assignment (members, then its epoch), the members' current assignments; and, when the
    group is gone, its own tombstones (target assignment epoch, subscription metadata,
    group epoch)."""
    records: list[ConsumerGroupRecord] = []
    for member_id in before.members:
        if member_id not in after.members:
            records.append(ConsumerGroupCurrentMemberAssignmentRecord(group_id, member_id, None))
            records.append(ConsumerGroupTargetAssignmentMemberRecord(group_id, member_id, None))
            records.append(ConsumerGroupMemberMetadataRecord(group_id, member_id, None))
    for member_id, old_target in before.target_assignment.items():
        # Kafka writes a target tombstone only with the member's removal; a member left
        # out of the target has an empty one.
        if member_id not in after.target_assignment and member_id in after.members and old_target:
            records.append(ConsumerGroupTargetAssignmentMemberRecord(group_id, member_id, {}))
    if not after.exists:
        if before.exists:
            records.append(ConsumerGroupTargetAssignmentMetadataRecord(group_id, None))
            records.append(ConsumerGroupPartitionMetadataRecord(group_id, None))
            records.append(ConsumerGroupMetadataRecord(group_id, None))
        return records
    for member_id, member in after.members.items():
        old = before.members.get(member_id)
        sub = member_subscription(member)
        if old is None or member_subscription(old) != sub:
            records.append(ConsumerGroupMemberMetadataRecord(group_id, member_id, sub))
    if after.subscription_metadata != before.subscription_metadata:
        records.append(
            ConsumerGroupPartitionMetadataRecord(
                group_id, tuple(after.subscription_metadata.values())
            )
        )
    if after.group_epoch != before.group_epoch or not before.exists:
        records.append(ConsumerGroupMetadataRecord(group_id, after.group_epoch))
    for member_id, target in after.target_assignment.items():
        if _normalized(before.target_assignment.get(member_id, {})) != _normalized(target) or (
            member_id not in before.target_assignment
        ):
            records.append(
                ConsumerGroupTargetAssignmentMemberRecord(group_id, member_id, _normalized(target))
            )
    if after.assignment_epoch != before.assignment_epoch or not before.exists:
        records.append(
            ConsumerGroupTargetAssignmentMetadataRecord(group_id, after.assignment_epoch)
        )
    for member_id, member in after.members.items():
        old = before.members.get(member_id)
        current = current_assignment(member)
        if old is None or current_assignment(old) != current:
            records.append(ConsumerGroupCurrentMemberAssignmentRecord(group_id, member_id, current))
    return records


# ------------------------------------------------------------- records -> groups
@dataclass
class _GroupParts:
    epoch: int | None = None
    topics: tuple[TopicMetadata, ...] = ()
    assignment_epoch: int = -1
    subscriptions: dict[str, MemberSubscription] | None = None
    targets: dict[str, Assignment] | None = None
    currents: dict[str, CurrentAssignment] | None = None


class ConsumerGroupLoad:
    """Kafka's ``replay`` of a partition's consumer group records: ``replay`` each
    record (in log order, or each key's last record in the order of those), then
    ``groups()`` builds the groups that have a group epoch record."""

    def __init__(self) -> None:
        self._parts: dict[str, _GroupParts] = {}

    def replay(self, record: ConsumerGroupRecord) -> None:
        parts = self._parts.setdefault(record.group_id, _GroupParts())
        if isinstance(record, ConsumerGroupMetadataRecord):
            if record.epoch is None:
                del self._parts[record.group_id]
            else:
                parts.epoch = record.epoch
        elif isinstance(record, ConsumerGroupPartitionMetadataRecord):
            parts.topics = record.topics or ()
        elif isinstance(record, ConsumerGroupTargetAssignmentMetadataRecord):
            parts.assignment_epoch = (
                -1 if record.assignment_epoch is None else (record.assignment_epoch)
            )
        elif isinstance(record, ConsumerGroupMemberMetadataRecord):
            subs = parts.subscriptions = parts.subscriptions or {}
            _put(subs, record.member_id, record.value)
        elif isinstance(record, ConsumerGroupTargetAssignmentMemberRecord):
            targets = parts.targets = parts.targets or {}
            _put(targets, record.member_id, record.partitions)
        else:
            currents = parts.currents = parts.currents or {}
            _put(currents, record.member_id, record.value)

    def groups(self) -> dict[str, ConsumerGroup]:
        return {
            group_id: _build(group_id, parts)
            for group_id, parts in self._parts.items()
            if parts.epoch is not None
        }


def _put(table: dict[str, _V], key: str, value: _V | None) -> None:
    if value is None:
        table.pop(key, None)
    else:
        table[key] = value


def _build(group_id: str, parts: _GroupParts) -> ConsumerGroup:
    group = ConsumerGroup(group_id)
    group.group_epoch = parts.epoch or 0
    group.subscription_metadata = {t.name: t for t in parts.topics}
    group.set_target_assignment(max(parts.assignment_epoch, 0), dict(parts.targets or {}))
    currents = parts.currents or {}
    for member_id, sub in (parts.subscriptions or {}).items():
        current = currents.get(member_id)
        group.update_member(
            ConsumerGroupMember(
                member_id=member_id,
                member_epoch=current.member_epoch if current else 0,
                previous_member_epoch=current.previous_member_epoch if current else -1,
                state=current.state if current else MemberState.STABLE,
                instance_id=sub.instance_id,
                rack_id=sub.rack_id,
                rebalance_timeout_ms=sub.rebalance_timeout_ms,
                client_id=sub.client_id,
                client_host=sub.client_host,
                subscribed_topic_names=tuple(sorted(sub.subscribed_topic_names)),
                subscribed_topic_regex=sub.subscribed_topic_regex,
                server_assignor_name=sub.server_assignor,
                classic_member_metadata=sub.classic_member_metadata,
                assigned_partitions=dict(current.assigned_partitions) if current else {},
                partitions_pending_revocation=(
                    dict(current.partitions_pending_revocation) if current else {}
                ),
            )
        )
    group.maybe_update_group_state()
    return group


def replay_all(records: Iterable[ConsumerGroupRecord]) -> dict[str, ConsumerGroup]:
    """The groups ``records`` hold (tests, debugging)."""
    load = ConsumerGroupLoad()
    for record in records:
        load.replay(record)
    return load.groups()
