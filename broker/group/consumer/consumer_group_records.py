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

The schemas are Kafka's JSON ones, declared as data below and compiled by
``broker/coordinator/record_schema.py``. Keys are not flexible: int16 record type, then
int16-length strings. Values are flexible (``flexibleVersions: 0+``): int16 version 0,
compact strings and arrays, 16-byte UUIDs, and a tagged-field section after every
struct (tags we do not know are skipped; the member's tag 0 is ClassicMemberMetadata —
SessionTimeoutMs, SupportedProtocols [Name, Metadata] — which Kafka writes only for a
classic member in a consumer group). A value of ``None`` is a tombstone.

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
from typing import Any, TypeVar

from broker.coordinator.record_schema import Field, RecordType, Schema, Struct, read_int16
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


# --------------------------------------------------------------------- schemas
def _key(name: str, *fields: str) -> Schema:
    return Schema(name, "0", "none", tuple(Field(f, "string") for f in fields))


def _value(name: str, *fields: Field) -> Schema:
    return Schema(name, "0", "0+", fields)


TOPIC_PARTITIONS = Struct(
    "TopicPartitions", (Field("TopicId", "uuid"), Field("Partitions", "[]int32"))
)
PARTITION_METADATA = Struct(
    "PartitionMetadata", (Field("Partition", "int32"), Field("Racks", "[]string"))
)
TOPIC_METADATA = Struct(
    "TopicMetadata",
    (
        Field("TopicId", "uuid"),
        Field("TopicName", "string"),
        Field("NumPartitions", "int32"),
        Field.of("PartitionMetadata", PARTITION_METADATA),
    ),
)
CLASSIC_PROTOCOL = Struct("ClassicProtocol", (Field("Name", "string"), Field("Metadata", "bytes")))
CLASSIC_MEMBER_METADATA = Struct(
    "ClassicMemberMetadata",
    (Field("SessionTimeoutMs", "int32"), Field.of("SupportedProtocols", CLASSIC_PROTOCOL)),
)
_N = "0+"  # nullable in every version
GROUP_METADATA = RecordType(
    CONSUMER_GROUP_METADATA_KEY_VERSION,
    _key("ConsumerGroupMetadataKey", "GroupId"),
    _value("ConsumerGroupMetadataValue", Field("Epoch", "int32")),
)
PARTITION_METADATA_RECORD = RecordType(
    CONSUMER_GROUP_PARTITION_METADATA_KEY_VERSION,
    _key("ConsumerGroupPartitionMetadataKey", "GroupId"),
    _value("ConsumerGroupPartitionMetadataValue", Field.of("Topics", TOPIC_METADATA)),
)
MEMBER_METADATA = RecordType(
    CONSUMER_GROUP_MEMBER_METADATA_KEY_VERSION,
    _key("ConsumerGroupMemberMetadataKey", "GroupId", "MemberId"),
    _value(
        "ConsumerGroupMemberMetadataValue",
        Field("InstanceId", "string", nullable_versions=_N),
        Field("RackId", "string", nullable_versions=_N),
        Field("ClientId", "string"),
        Field("ClientHost", "string"),
        Field("SubscribedTopicNames", "[]string"),
        Field("SubscribedTopicRegex", "string", nullable_versions=_N),
        Field("RebalanceTimeoutMs", "int32", default=-1),
        Field("ServerAssignor", "string", nullable_versions=_N),
        Field("ClassicMemberMetadata", CLASSIC_MEMBER_METADATA, nullable_versions=_N, tag=0),
    ),
)
TARGET_ASSIGNMENT_METADATA = RecordType(
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY_VERSION,
    _key("ConsumerGroupTargetAssignmentMetadataKey", "GroupId"),
    _value("ConsumerGroupTargetAssignmentMetadataValue", Field("AssignmentEpoch", "int32")),
)
TARGET_ASSIGNMENT_MEMBER = RecordType(
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY_VERSION,
    _key("ConsumerGroupTargetAssignmentMemberKey", "GroupId", "MemberId"),
    _value(
        "ConsumerGroupTargetAssignmentMemberValue", Field.of("TopicPartitions", TOPIC_PARTITIONS)
    ),
)
CURRENT_MEMBER_ASSIGNMENT = RecordType(
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY_VERSION,
    _key("ConsumerGroupCurrentMemberAssignmentKey", "GroupId", "MemberId"),
    _value(
        "ConsumerGroupCurrentMemberAssignmentValue",
        Field("MemberEpoch", "int32"),
        Field("PreviousMemberEpoch", "int32"),
        Field("State", "int8"),
        Field.of("AssignedPartitions", TOPIC_PARTITIONS),
        Field.of("PartitionsPendingRevocation", TOPIC_PARTITIONS),
    ),
)
RECORD_TYPES = {
    t.type_id: t
    for t in (
        GROUP_METADATA,
        PARTITION_METADATA_RECORD,
        MEMBER_METADATA,
        TARGET_ASSIGNMENT_METADATA,
        TARGET_ASSIGNMENT_MEMBER,
        CURRENT_MEMBER_ASSIGNMENT,
    )
}


# ------------------------------------------------------------------ encoding
def _topic_partitions(assignment: Assignment) -> list[dict[str, Any]]:
    """An assignment, by topic id (as a string) and partition, sorted."""
    return [
        {"TopicId": t, "Partitions": sorted(ps)}
        for t, ps in sorted(assignment.items(), key=lambda e: str(e[0]))
    ]


def _read_topic_partitions(items: list[dict[str, Any]]) -> dict[uuid.UUID, frozenset[int]]:
    """An assignment read back; a topic with no partitions is left out."""
    return {i["TopicId"]: frozenset(i["Partitions"]) for i in items if i["Partitions"]}


def _subscription_values(m: MemberSubscription) -> dict[str, Any]:
    classic = m.classic_member_metadata
    return {
        "InstanceId": m.instance_id,
        "RackId": m.rack_id,
        "ClientId": m.client_id,
        "ClientHost": m.client_host,
        "SubscribedTopicNames": sorted(m.subscribed_topic_names),
        "SubscribedTopicRegex": m.subscribed_topic_regex,
        "RebalanceTimeoutMs": m.rebalance_timeout_ms,
        "ServerAssignor": m.server_assignor,
        "ClassicMemberMetadata": None
        if classic is None
        else {
            "SessionTimeoutMs": classic.session_timeout_ms,
            "SupportedProtocols": [
                {"Name": name, "Metadata": metadata}
                for name, metadata in classic.supported_protocols
            ],
        },
    }


def _record_values(
    record: ConsumerGroupRecord,
) -> tuple[RecordType, dict[str, Any], dict[str, Any] | None]:
    """(record type, key fields, value fields or None for a tombstone)."""
    value: dict[str, Any] | None
    if isinstance(record, ConsumerGroupMetadataRecord):
        value = None if record.epoch is None else {"Epoch": record.epoch}
        return GROUP_METADATA, {"GroupId": record.group_id}, value
    if isinstance(record, ConsumerGroupPartitionMetadataRecord):
        topics = None
        if record.topics is not None:
            topics = {
                "Topics": [
                    # PartitionMetadata: deprecated, stored empty
                    {
                        "TopicId": t.topic_id,
                        "TopicName": t.name,
                        "NumPartitions": t.num_partitions,
                        "PartitionMetadata": [],
                    }
                    for t in sorted(record.topics, key=lambda t: t.name)
                ]
            }
        return PARTITION_METADATA_RECORD, {"GroupId": record.group_id}, topics
    if isinstance(record, ConsumerGroupTargetAssignmentMetadataRecord):
        epoch = record.assignment_epoch
        value = None if epoch is None else {"AssignmentEpoch": epoch}
        return TARGET_ASSIGNMENT_METADATA, {"GroupId": record.group_id}, value
    key = {"GroupId": record.group_id, "MemberId": record.member_id}
    if isinstance(record, ConsumerGroupMemberMetadataRecord):
        m = record.value
        return MEMBER_METADATA, key, None if m is None else _subscription_values(m)
    if isinstance(record, ConsumerGroupTargetAssignmentMemberRecord):
        ps = record.partitions
        value = None if ps is None else {"TopicPartitions": _topic_partitions(ps)}
        return TARGET_ASSIGNMENT_MEMBER, key, value
    a = record.value
    if a is None:
        return CURRENT_MEMBER_ASSIGNMENT, key, None
    return (
        CURRENT_MEMBER_ASSIGNMENT,
        key,
        {
            "MemberEpoch": a.member_epoch,
            "PreviousMemberEpoch": a.previous_member_epoch,
            "State": MEMBER_STATE_VALUES[a.state],
            "AssignedPartitions": _topic_partitions(a.assigned_partitions),
            "PartitionsPendingRevocation": _topic_partitions(a.partitions_pending_revocation),
        },
    )


def encode_consumer_group_record(record: ConsumerGroupRecord) -> KeyValue:
    """Key and value bytes (value None for a tombstone), Kafka's versions."""
    record_type, key, value = _record_values(record)
    return record_type.key_bytes(key), (
        None if value is None else record_type.value_bytes(VALUE_VERSION, value)
    )


# ------------------------------------------------------------------ decoding
def decode_consumer_group_record(key: bytes, value: bytes | None) -> ConsumerGroupRecord:
    """The record of a key with version 3-8; raises ValueError / struct.error when it
    does not parse (the caller skips it with a warning, as any record)."""
    version = read_int16(key, 0)
    record_type = RECORD_TYPES.get(version)
    if record_type is None:
        raise ValueError(f"not a consumer group key version: {version}")
    k = record_type.read_key(key)
    v: dict[str, Any] | None = None
    if value is not None:
        value_version = read_int16(value, 0)
        if value_version != VALUE_VERSION:
            raise ValueError(f"unknown value version {value_version} for key version {version}")
        v = record_type.read_value(value)[1]
    return _record_of(version, k["GroupId"], k.get("MemberId", ""), v)


def _record_of(
    version: int, group_id: str, member_id: str, v: dict[str, Any] | None
) -> ConsumerGroupRecord:
    if version == CONSUMER_GROUP_METADATA_KEY_VERSION:
        return ConsumerGroupMetadataRecord(group_id, None if v is None else v["Epoch"])
    if version == CONSUMER_GROUP_PARTITION_METADATA_KEY_VERSION:
        topics = None
        if v is not None:
            topics = tuple(
                TopicMetadata(t["TopicId"], t["TopicName"], t["NumPartitions"]) for t in v["Topics"]
            )
        return ConsumerGroupPartitionMetadataRecord(group_id, topics)
    if version == CONSUMER_GROUP_MEMBER_METADATA_KEY_VERSION:
        return ConsumerGroupMemberMetadataRecord(
            group_id, member_id, None if v is None else _subscription(v)
        )
    if version == CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY_VERSION:
        return ConsumerGroupTargetAssignmentMetadataRecord(
            group_id, None if v is None else v["AssignmentEpoch"]
        )
    if version == CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY_VERSION:
        return ConsumerGroupTargetAssignmentMemberRecord(
            group_id, member_id, None if v is None else _read_topic_partitions(v["TopicPartitions"])
        )
    current = None
    if v is not None:
        current = CurrentAssignment(
            member_epoch=v["MemberEpoch"],
            previous_member_epoch=v["PreviousMemberEpoch"],
            state=_STATE_OF_VALUE.get(v["State"], MemberState.UNKNOWN),
            assigned_partitions=_read_topic_partitions(v["AssignedPartitions"]),
            partitions_pending_revocation=_read_topic_partitions(v["PartitionsPendingRevocation"]),
        )
    return ConsumerGroupCurrentMemberAssignmentRecord(group_id, member_id, current)


def _subscription(v: dict[str, Any]) -> MemberSubscription:
    classic = v["ClassicMemberMetadata"]
    return MemberSubscription(
        instance_id=v["InstanceId"],
        rack_id=v["RackId"],
        client_id=v["ClientId"],
        client_host=v["ClientHost"],
        subscribed_topic_names=tuple(v["SubscribedTopicNames"]),
        subscribed_topic_regex=v["SubscribedTopicRegex"],
        rebalance_timeout_ms=v["RebalanceTimeoutMs"],
        server_assignor=v["ServerAssignor"],
        classic_member_metadata=None
        if classic is None
        else ClassicMemberMetadata(
            classic["SessionTimeoutMs"],
            tuple((p["Name"], p["Metadata"]) for p in classic["SupportedProtocols"]),
        ),
    )


def is_consumer_group_key(key: bytes) -> bool:
    """Whether ``key`` is one of a consumer group's records (key version 3-8)."""
    return len(key) >= 2 and read_int16(key, 0) in CONSUMER_GROUP_KEY_VERSIONS


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
