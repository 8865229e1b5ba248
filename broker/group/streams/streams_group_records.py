"""A streams group's records in ``__consumer_offsets`` (KIP-1071), Kafka 4.2's formats.

Six record types beside the consumer groups' (``broker/group/consumer/consumer_group_records.py``),
each key's int16 type says which (Kafka's ``CoordinatorRecordType``):

=====  =====================================  =========================================
type   record (key fields)                    value (version 0, flexible)
=====  =====================================  =========================================
17     StreamsGroupMetadata (group)           Epoch, MetadataHash (int64); tagged
                                              0: ValidatedTopologyEpoch (default -1),
                                              1: LastAssignmentConfigs [Key, Value]
19     StreamsGroupMemberMetadata             InstanceId, RackId, ClientId, ClientHost,
       (group, member)                        RebalanceTimeoutMs, TopologyEpoch,
                                              ProcessId, UserEndpoint {Host, Port
                                              uint16}, ClientTags [Key, Value]
20     StreamsGroupTargetAssignmentMetadata   AssignmentEpoch
21     StreamsGroupTargetAssignmentMember     ActiveTasks, StandbyTasks, WarmupTasks:
                                              [SubtopologyId, Partitions]
22     StreamsGroupCurrentMemberAssignment    MemberEpoch, PreviousMemberEpoch, State
                                              (int8), the three kinds of tasks and the
                                              three kinds pending revocation
23     StreamsGroupTopology (group)           Epoch, Subtopologies [SubtopologyId,
                                              SourceTopics, SourceTopicRegex,
                                              StateChangelogTopics, RepartitionSinkTopics,
                                              RepartitionSourceTopics, CopartitionGroups
                                              [SourceTopics, SourceTopicRegex,
                                              RepartitionSourceTopics: []int16]]
=====  =====================================  =========================================

Type 18 (StreamsGroupPartitionMetadata, written by Kafka 4.0-4.1's early access) is
skipped on a load, as Kafka 4.2 ignores it. Tasks are written by subtopology id and
partition, sorted (Kafka: hash-map order). A value of None is a tombstone.

``records_for_changes`` turns a change of a group (the view before, the group after)
into records in the order Kafka's heartbeat writes them; ``StreamsGroupLoad`` replays
them on a load.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from broker.coordinator.record_schema import Field, RecordType, Schema, Struct, read_int16
from broker.group.streams.streams_group import StreamsGroup
from broker.group.streams.streams_group_member import (
    MEMBER_STATE_VALUES,
    Endpoint,
    MemberState,
    StreamsGroupMember,
)
from broker.group.streams.streams_topology import (
    CopartitionGroup,
    StreamsTopology,
    Subtopology,
    TopicInfo,
)
from broker.group.streams.tasks_tuple import Tasks, TasksTuple, tasks

log = logging.getLogger("broker.group.streams")

KeyValue = tuple[bytes, bytes | None]

METADATA, PARTITION_METADATA, MEMBER_METADATA = 17, 18, 19
TARGET_ASSIGNMENT_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT = 20, 21, 22
TOPOLOGY = 23
STREAMS_GROUP_KEY_VERSIONS = frozenset(range(17, 24))
VALUE_VERSION = 0
_STATE_OF_VALUE = {v: s for s, v in MEMBER_STATE_VALUES.items()}
_N = "0+"


def _key(name: str, *fields: str) -> Schema:
    return Schema(name, "0", "none", tuple(Field(f, "string") for f in fields))


def _value(name: str, *fields: Field) -> Schema:
    return Schema(name, "0", "0+", fields)


KEY_VALUE = Struct("KeyValue", (Field("Key", "string"), Field("Value", "string")))
TASK_IDS = Struct("TaskIds", (Field("SubtopologyId", "string"), Field("Partitions", "[]int32")))
ENDPOINT = Struct("Endpoint", (Field("Host", "string"), Field("Port", "uint16")))
TOPIC_CONFIG = Struct("TopicConfig", (Field("key", "string"), Field("value", "string")))
TOPIC_INFO = Struct(
    "TopicInfo",
    (
        Field("Name", "string"),
        Field("Partitions", "int32"),
        Field("ReplicationFactor", "int16"),
        Field.of("TopicConfigs", TOPIC_CONFIG),
    ),
)
COPARTITION_GROUP = Struct(
    "CopartitionGroup",
    (
        Field("SourceTopics", "[]int16"),
        Field("SourceTopicRegex", "[]int16"),
        Field("RepartitionSourceTopics", "[]int16"),
    ),
)
SUBTOPOLOGY = Struct(
    "Subtopology",
    (
        Field("SubtopologyId", "string"),
        Field("SourceTopics", "[]string"),
        Field("SourceTopicRegex", "[]string"),
        Field.of("StateChangelogTopics", TOPIC_INFO),
        Field("RepartitionSinkTopics", "[]string"),
        Field.of("RepartitionSourceTopics", TOPIC_INFO),
        Field.of("CopartitionGroups", COPARTITION_GROUP),
    ),
)
TASK_KINDS = ("ActiveTasks", "StandbyTasks", "WarmupTasks")
PENDING_KINDS = tuple(f"{k}PendingRevocation" for k in TASK_KINDS)

RECORD_TYPES = {
    t.type_id: t
    for t in (
        RecordType(
            METADATA,
            _key("StreamsGroupMetadataKey", "GroupId"),
            _value(
                "StreamsGroupMetadataValue",
                Field("Epoch", "int32"),
                Field("MetadataHash", "int64"),
                Field("ValidatedTopologyEpoch", "int32", tag=0, default=-1),
                Field.of("LastAssignmentConfigs", KEY_VALUE, nullable_versions=_N, tag=1),
            ),
        ),
        RecordType(
            MEMBER_METADATA,
            _key("StreamsGroupMemberMetadataKey", "GroupId", "MemberId"),
            _value(
                "StreamsGroupMemberMetadataValue",
                Field("InstanceId", "string", nullable_versions=_N),
                Field("RackId", "string", nullable_versions=_N),
                Field("ClientId", "string"),
                Field("ClientHost", "string"),
                Field("RebalanceTimeoutMs", "int32", default=-1),
                Field("TopologyEpoch", "int32"),
                Field("ProcessId", "string"),
                Field("UserEndpoint", ENDPOINT, nullable_versions=_N),
                Field.of("ClientTags", KEY_VALUE),
            ),
        ),
        RecordType(
            TARGET_ASSIGNMENT_METADATA,
            _key("StreamsGroupTargetAssignmentMetadataKey", "GroupId"),
            _value("StreamsGroupTargetAssignmentMetadataValue", Field("AssignmentEpoch", "int32")),
        ),
        RecordType(
            TARGET_ASSIGNMENT_MEMBER,
            _key("StreamsGroupTargetAssignmentMemberKey", "GroupId", "MemberId"),
            _value(
                "StreamsGroupTargetAssignmentMemberValue",
                *(Field.of(k, TASK_IDS) for k in TASK_KINDS),
            ),
        ),
        RecordType(
            CURRENT_MEMBER_ASSIGNMENT,
            _key("StreamsGroupCurrentMemberAssignmentKey", "GroupId", "MemberId"),
            _value(
                "StreamsGroupCurrentMemberAssignmentValue",
                Field("MemberEpoch", "int32"),
                Field("PreviousMemberEpoch", "int32"),
                Field("State", "int8"),
                *(Field.of(k, TASK_IDS) for k in (*TASK_KINDS, *PENDING_KINDS)),
            ),
        ),
        RecordType(
            TOPOLOGY,
            _key("StreamsGroupTopologyKey", "GroupId"),
            _value(
                "StreamsGroupTopologyValue",
                Field("Epoch", "int32"),
                Field.of("Subtopologies", SUBTOPOLOGY),
            ),
        ),
    )
}


# --------------------------------------------------------------------- records
@dataclass(frozen=True)
class StreamsGroupRecord:
    """One record: its type, the group (and member) it is keyed by, and its value
    fields as Kafka's schema names them (None: a tombstone)."""

    type_id: int
    group_id: str
    member_id: str | None = None
    value: dict[str, Any] | None = field(default=None, compare=True)


def encode_streams_group_record(record: StreamsGroupRecord) -> KeyValue:
    record_type = RECORD_TYPES[record.type_id]
    key: dict[str, Any] = {"GroupId": record.group_id}
    if record.member_id is not None:
        key["MemberId"] = record.member_id
    value = None if record.value is None else record_type.value_bytes(VALUE_VERSION, record.value)
    return record_type.key_bytes(key), value


def decode_streams_group_record(key: bytes, value: bytes | None) -> StreamsGroupRecord | None:
    """The record of a key of type 17-23; None for type 18 (ignored, as Kafka 4.2)."""
    type_id = read_int16(key, 0)
    if type_id == PARTITION_METADATA:
        return None
    record_type = RECORD_TYPES.get(type_id)
    if record_type is None:
        raise ValueError(f"not a streams group key type: {type_id}")
    k = record_type.read_key(key)
    v = None
    if value is not None:
        version = read_int16(value, 0)
        if version != VALUE_VERSION:
            raise ValueError(f"unknown value version {version} for key type {type_id}")
        v = record_type.read_value(value)[1]
        if type_id == METADATA and v.get("ValidatedTopologyEpoch") == -1:
            v["ValidatedTopologyEpoch"] = None  # the tagged field's default: as written
    return StreamsGroupRecord(type_id, k["GroupId"], k.get("MemberId"), v)


def is_streams_group_key(key: bytes) -> bool:
    return len(key) >= 2 and read_int16(key, 0) in STREAMS_GROUP_KEY_VERSIONS


def decode_or_skip(key: bytes, value: bytes | None) -> StreamsGroupRecord | None:
    try:
        return decode_streams_group_record(key, value)
    except (struct.error, ValueError, UnicodeDecodeError) as exc:
        log.warning("Skipping malformed streams group record: %s", exc)
        return None


# ------------------------------------------------------------- values <-> model
def _task_ids(kind: Tasks) -> list[dict[str, Any]]:
    return [{"SubtopologyId": s, "Partitions": sorted(ps)} for s, ps in sorted(kind.items())]


def _tasks_of(items: list[dict[str, Any]]) -> dict[str, frozenset[int]]:
    return tasks({i["SubtopologyId"]: i["Partitions"] for i in items})


def _tuple_values(names: tuple[str, ...], t: TasksTuple) -> dict[str, Any]:
    return dict(
        zip(names, (_task_ids(t.active), _task_ids(t.standby), _task_ids(t.warmup)), strict=True)
    )


def _tuple_of(names: tuple[str, ...], v: dict[str, Any]) -> TasksTuple:
    return TasksTuple(*(_tasks_of(v[n]) for n in names))


def metadata_value(group: StreamsGroup) -> dict[str, Any]:
    configs = group.last_assignment_configs
    return {
        "Epoch": group.group_epoch,
        "MetadataHash": group.metadata_hash,
        # tagged, default -1: written only when it differs (as Kafka's)
        "ValidatedTopologyEpoch": (
            None if group.validated_topology_epoch == -1 else group.validated_topology_epoch
        ),
        "LastAssignmentConfigs": [{"Key": k, "Value": v} for k, v in sorted(configs.items())],
    }


def member_metadata_value(m: StreamsGroupMember) -> dict[str, Any]:
    endpoint = m.user_endpoint
    return {
        "InstanceId": m.instance_id,
        "RackId": m.rack_id,
        "ClientId": m.client_id,
        "ClientHost": m.client_host,
        "RebalanceTimeoutMs": m.rebalance_timeout_ms,
        "TopologyEpoch": m.topology_epoch,
        "ProcessId": m.process_id,
        "UserEndpoint": None
        if endpoint is None
        else {"Host": endpoint.host, "Port": endpoint.port},
        "ClientTags": [{"Key": k, "Value": v} for k, v in m.client_tags],
    }


def current_assignment_value(m: StreamsGroupMember) -> dict[str, Any]:
    return {
        "MemberEpoch": m.member_epoch,
        "PreviousMemberEpoch": m.previous_member_epoch,
        "State": MEMBER_STATE_VALUES[m.state],
        **_tuple_values(TASK_KINDS, m.assigned_tasks),
        **_tuple_values(PENDING_KINDS, m.tasks_pending_revocation),
    }


def _topic_info_value(t: TopicInfo) -> dict[str, Any]:
    return {
        "Name": t.name,
        "Partitions": t.partitions,
        "ReplicationFactor": t.replication_factor,
        "TopicConfigs": [{"key": k, "value": v} for k, v in t.topic_configs],
    }


def topology_value(topology: StreamsTopology) -> dict[str, Any]:
    return {
        "Epoch": topology.topology_epoch,
        "Subtopologies": [
            {
                "SubtopologyId": s.subtopology_id,
                "SourceTopics": list(s.source_topics),
                "SourceTopicRegex": list(s.source_topic_regex),
                "StateChangelogTopics": [_topic_info_value(t) for t in s.state_changelog_topics],
                "RepartitionSinkTopics": list(s.repartition_sink_topics),
                "RepartitionSourceTopics": [
                    _topic_info_value(t) for t in s.repartition_source_topics
                ],
                "CopartitionGroups": [
                    {
                        "SourceTopics": list(g.source_topics),
                        "SourceTopicRegex": list(g.source_topic_regex),
                        "RepartitionSourceTopics": list(g.repartition_source_topics),
                    }
                    for g in s.copartition_groups
                ],
            }
            for s in sorted(topology.subtopologies.values(), key=lambda s: s.subtopology_id)
        ],
    }


def _topic_info(v: dict[str, Any]) -> TopicInfo:
    configs = tuple((c["key"], c["value"]) for c in v["TopicConfigs"])
    return TopicInfo(v["Name"], v["Partitions"], v["ReplicationFactor"], configs)


def topology_of(v: dict[str, Any]) -> StreamsTopology:
    return StreamsTopology.of(
        v["Epoch"],
        [
            Subtopology(
                s["SubtopologyId"],
                tuple(s["SourceTopics"]),
                tuple(s["SourceTopicRegex"]),
                tuple(_topic_info(t) for t in s["StateChangelogTopics"]),
                tuple(s["RepartitionSinkTopics"]),
                tuple(_topic_info(t) for t in s["RepartitionSourceTopics"]),
                tuple(
                    CopartitionGroup(
                        tuple(g["SourceTopics"]),
                        tuple(g["SourceTopicRegex"]),
                        tuple(g["RepartitionSourceTopics"]),
                    )
                    for g in s["CopartitionGroups"]
                ),
            )
            for s in v["Subtopologies"]
        ],
    )


def target_value(t: TasksTuple) -> dict[str, Any]:
    return _tuple_values(TASK_KINDS, t)


# ------------------------------------------------------------ changes -> records
@dataclass(frozen=True)
class StreamsGroupView:
    """What of a group its records hold, at one moment."""

    exists: bool
    metadata: dict[str, Any] | None = None
    topology: StreamsTopology | None = None
    assignment_epoch: int = 0
    members: dict[str, StreamsGroupMember] = field(default_factory=dict)
    target_assignment: dict[str, TasksTuple] = field(default_factory=dict)

    @classmethod
    def of(cls, group: StreamsGroup | None) -> StreamsGroupView:
        if group is None:
            return cls(exists=False)
        return cls(
            True,
            metadata_value(group),
            group.topology,
            group.assignment_epoch,
            dict(group.members),
            dict(group.target_assignment),
        )


def _member_metadata(m: StreamsGroupMember) -> dict[str, Any]:
    return member_metadata_value(m)


def records_for_changes(
    group_id: str, before: StreamsGroupView, after: StreamsGroupView
) -> list[StreamsGroupRecord]:
    """The records that take the log from ``before`` to ``after``, in Kafka's order:
    the members that left (current assignment, target assignment, member tombstones),
    the members' metadata, the topology, the group metadata, the target assignment
    (members, then its epoch), the current assignments; for a deleted group its own
    tombstones (target assignment epoch, topology, metadata)."""
    R = StreamsGroupRecord
    records = []
    for member_id in before.members:
        if member_id not in after.members:
            records += [
                R(CURRENT_MEMBER_ASSIGNMENT, group_id, member_id),
                R(TARGET_ASSIGNMENT_MEMBER, group_id, member_id),
                R(MEMBER_METADATA, group_id, member_id),
            ]
    if not after.exists:
        if before.exists:
            records += [
                R(TARGET_ASSIGNMENT_METADATA, group_id),
                R(TOPOLOGY, group_id),
                R(METADATA, group_id),
            ]
        return records
    for member_id, member in after.members.items():
        old = before.members.get(member_id)
        value = member_metadata_value(member)
        if old is None or member_metadata_value(old) != value:
            records.append(R(MEMBER_METADATA, group_id, member_id, value))
    if after.topology is not None and after.topology != before.topology:
        records.append(R(TOPOLOGY, group_id, None, topology_value(after.topology)))
    if after.metadata != before.metadata:
        records.append(R(METADATA, group_id, None, after.metadata))
    for member_id, target in after.target_assignment.items():
        if (
            member_id not in before.target_assignment
            or before.target_assignment[member_id] != target
        ):
            records.append(R(TARGET_ASSIGNMENT_MEMBER, group_id, member_id, target_value(target)))
    if after.assignment_epoch != before.assignment_epoch or not before.exists:
        records.append(
            R(
                TARGET_ASSIGNMENT_METADATA,
                group_id,
                None,
                {"AssignmentEpoch": after.assignment_epoch},
            )
        )
    for member_id, member in after.members.items():
        old = before.members.get(member_id)
        value = current_assignment_value(member)
        if old is None or current_assignment_value(old) != value:
            records.append(R(CURRENT_MEMBER_ASSIGNMENT, group_id, member_id, value))
    return records


# ------------------------------------------------------------- records -> groups
@dataclass
class _Parts:
    metadata: dict[str, Any] | None = None
    topology: StreamsTopology | None = None
    assignment_epoch: int = 0
    members: dict[str, dict[str, Any]] = field(default_factory=dict)
    targets: dict[str, TasksTuple] = field(default_factory=dict)
    currents: dict[str, dict[str, Any]] = field(default_factory=dict)


class StreamsGroupLoad:
    """Kafka's replay of a partition's streams group records: ``replay`` each (in log
    order), then ``groups()`` builds those with a metadata record."""

    def __init__(self) -> None:
        self._parts: dict[str, _Parts] = {}

    def replay(self, record: StreamsGroupRecord) -> None:
        parts = self._parts.setdefault(record.group_id, _Parts())
        v, t = record.value, record.type_id
        if t == METADATA:
            if v is None:
                del self._parts[record.group_id]
            else:
                parts.metadata = v
        elif t == TOPOLOGY:
            parts.topology = None if v is None else topology_of(v)
        elif t == TARGET_ASSIGNMENT_METADATA:
            parts.assignment_epoch = 0 if v is None else v["AssignmentEpoch"]
        else:
            member_id = record.member_id or ""
            if t == TARGET_ASSIGNMENT_MEMBER:
                _put(parts.targets, member_id, None if v is None else _tuple_of(TASK_KINDS, v))
            else:
                _put(parts.members if t == MEMBER_METADATA else parts.currents, member_id, v)

    def groups(self) -> dict[str, StreamsGroup]:
        return {g: _build(g, p) for g, p in self._parts.items() if p.metadata is not None}


def _put(table: dict[str, Any], key: str, value: Any) -> None:
    if value is None:
        table.pop(key, None)
    else:
        table[key] = value


def _member(member_id: str, m: dict[str, Any], c: dict[str, Any] | None) -> StreamsGroupMember:
    endpoint = m["UserEndpoint"]
    return StreamsGroupMember(
        member_id=member_id,
        member_epoch=c["MemberEpoch"] if c else 0,
        previous_member_epoch=c["PreviousMemberEpoch"] if c else -1,
        state=_STATE_OF_VALUE.get(c["State"], MemberState.UNKNOWN) if c else MemberState.STABLE,
        instance_id=m["InstanceId"],
        rack_id=m["RackId"],
        rebalance_timeout_ms=m["RebalanceTimeoutMs"],
        client_id=m["ClientId"],
        client_host=m["ClientHost"],
        topology_epoch=m["TopologyEpoch"],
        process_id=m["ProcessId"],
        user_endpoint=None if endpoint is None else Endpoint(endpoint["Host"], endpoint["Port"]),
        client_tags=tuple((kv["Key"], kv["Value"]) for kv in m["ClientTags"]),
        assigned_tasks=_tuple_of(TASK_KINDS, c) if c else TasksTuple(),
        tasks_pending_revocation=_tuple_of(PENDING_KINDS, c) if c else TasksTuple(),
    )


def _build(group_id: str, parts: _Parts) -> StreamsGroup:
    group = StreamsGroup(group_id)
    meta = parts.metadata or {}
    group.group_epoch = meta.get("Epoch", 0)
    group.metadata_hash = meta.get("MetadataHash", 0)
    validated = meta.get("ValidatedTopologyEpoch")
    group.validated_topology_epoch = -1 if validated is None else validated
    group.last_assignment_configs = {
        kv["Key"]: kv["Value"] for kv in meta.get("LastAssignmentConfigs") or []
    }
    group.topology = parts.topology
    group.set_target_assignment(parts.assignment_epoch, parts.targets)
    for member_id, metadata in parts.members.items():
        group.update_member(_member(member_id, metadata, parts.currents.get(member_id)))
    return group


def replay_all(records: Iterable[StreamsGroupRecord]) -> dict[str, StreamsGroup]:
    load = StreamsGroupLoad()
    for record in records:
        load.replay(record)
    return load.groups()
