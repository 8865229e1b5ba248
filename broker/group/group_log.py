"""``__consumer_offsets`` records of the classic group coordinator: their schemas and codec.

The :class:`~broker.group.group_metadata_manager.GroupMetadataManager` never touches a
log itself. Whenever Kafka's would append to the offsets topic (an offset commit, a
group's new generation and assignment, a deletion), ours encodes key/value records and
hands them to an injected :class:`GroupLog`, naming the offsets-topic partition; when
this broker becomes the leader of a partition it reads the partition back through the
same interface and rebuilds the same groups and offsets. The broker's ``GroupLog`` is
the coordinator kit's :class:`~broker.coordinator.state_log.CoordinatorStateLog` over
``__consumer_offsets`` (:func:`offsets_topic_log`); :class:`InMemoryGroupLog` here
serves unit tests.

The schemas are Kafka's (``OffsetCommitKey``/``Value``, ``GroupMetadataKey``/``Value``
in ``group-coordinator/src/main/resources/common/message``), declared as data below and
compiled by ``broker/coordinator/record_schema.py``; a key starts with its record type
(0-1 an offset commit, 2 a group's metadata), a value with its version:

* an offset commit value is written as version 3 (``offset, leaderEpoch, metadata,
  commitTimestamp``), or version 1 (``offset, metadata, commitTimestamp,
  expireTimestamp``) when the commit carried an explicit expiry; versions 0-3 are read.
* a group metadata value is written as version 3 (``protocolType, generation,
  protocol, leader, currentStateTimestamp, members``); versions 0-3 are read.
* a value of ``None`` is a tombstone: the offset, or the whole group, was deleted.
* record types 3-8 are a KIP-848 consumer group's records, declared in
  ``consumer/consumer_group_records.py``; the loader and the manager route them there,
  ``decode_record`` skips them quietly.

Where we differ from Kafka: the flexible version 4 of both values (Kafka 4.1+) is
neither written nor read (a warning, the record skipped).

Records of a group go to partition ``partition_for(group_id)`` of ``__consumer_offsets``;
the later record for a key wins, which is also what log compaction keeps.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import OFFSETS_TOPIC
from broker.coordinator.record_schema import Field, RecordType, Schema, Struct, read_int16
from broker.coordinator.state_log import (
    AppendCallback,
    CoordinatorLog,
    CoordinatorStateLog,
    KeyValue,
    LogEntry,
    TxnMarker,
    TxnRecord,
    transactional_entries,
)
from broker.group.offsets import OffsetAndMetadata
from broker.server.purgatories import ParkedRequest, PurgatoryName, PurgatoryOutcome
from purgatory import Clock

if TYPE_CHECKING:
    from broker.replica.replica_manager import ReplicaManager

__all__ = ("AppendCallback", "KeyValue", "LogEntry", "TxnMarker", "TxnRecord")

log = logging.getLogger("broker.group")

GROUP_METADATA_TOPIC_NAME = "__consumer_offsets"

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_VALUE_VERSION = 3

GroupLog = CoordinatorLog[LogEntry]
"""Where the group metadata manager's records go, and where it reads them back.

``append_to_log`` with ``on_done`` is Kafka's ``appendForGroup`` (acks
``offsets.commit.required.acks``); the manager maps the append's error to its API's and
changes its state only in the callback, which is why a commit is never visible before
it is replicated. Without ``on_done`` nobody waits (Kafka's cleanup tombstones). With
``producer`` the records are a TxnOffsetCommit's. ``open_log`` hands back plain
key/values, :class:`TxnRecord` and :class:`TxnMarker` entries, batch by batch.
"""


def offsets_topic_log(
    replica_manager: ReplicaManager,
    clock: Clock,
    commit_timeout_ms: int,
    commit_required_acks: int,
    load_buffer_size: int = 5242880,
) -> CoordinatorStateLog[LogEntry]:
    """The broker's ``GroupLog``: ``__consumer_offsets`` with
    ``offsets.commit.required.acks``, ``offsets.commit.timeout.ms`` and
    ``offsets.load.buffer.size``; transactional records and markers read as such."""
    return CoordinatorStateLog(
        OFFSETS_TOPIC,
        replica_manager,
        clock,
        required_acks=commit_required_acks,
        timeout_ms=commit_timeout_ms,
        load_buffer_size=load_buffer_size,
        read_entries=transactional_entries,
        logger=log,
    )


# --------------------------------------------------------------------- schemas
OFFSET_COMMIT_KEY = Schema(
    "OffsetCommitKey",
    "0",
    "none",
    (Field("group", "string"), Field("topic", "string"), Field("partition", "int32")),
)
OFFSET_COMMIT_VALUE = Schema(
    "OffsetCommitValue",
    "0-3",
    "none",
    (
        Field("offset", "int64"),
        Field("leaderEpoch", "int32", "3+", default=-1),
        Field("metadata", "string"),
        Field("commitTimestamp", "int64"),
        Field("expireTimestamp", "int64", "1", default=-1),
    ),
)
GROUP_METADATA_KEY = Schema("GroupMetadataKey", "0", "none", (Field("group", "string"),))
MEMBER_METADATA = Struct(
    "MemberMetadata",
    (
        Field("memberId", "string"),
        Field("groupInstanceId", "string", "3+", nullable_versions="3+"),
        Field("clientId", "string"),
        Field("clientHost", "string"),
        Field("rebalanceTimeout", "int32", "1+", default=-1),
        Field("sessionTimeout", "int32"),
        Field("subscription", "bytes"),
        Field("assignment", "bytes"),
    ),
)
GROUP_METADATA_VALUE = Schema(
    "GroupMetadataValue",
    "0-3",
    "none",
    (
        Field("protocolType", "string"),
        Field("generation", "int32"),
        Field("protocol", "string", nullable_versions="0+"),
        Field("leader", "string", nullable_versions="0+"),
        Field("currentStateTimestamp", "int64", "2+", default=-1),
        Field.of("members", MEMBER_METADATA),
    ),
)
# Record types 0 (Kafka's LegacyOffsetCommit) and 1 share a key; 1 is written.
LEGACY_OFFSET_COMMIT = RecordType(0, OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE)
OFFSET_COMMIT = RecordType(OFFSET_COMMIT_KEY_VERSION, OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE)
GROUP_METADATA = RecordType(GROUP_METADATA_KEY_VERSION, GROUP_METADATA_KEY, GROUP_METADATA_VALUE)


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


# ------------------------------------------------------------- record codec
def encode_record(record: Record) -> KeyValue:
    """Key and value bytes of a record (value None for a tombstone)."""
    if isinstance(record, OffsetCommitRecord):
        key = OFFSET_COMMIT.key_bytes(
            {"group": record.group_id, "topic": record.topic, "partition": record.partition}
        )
        return key, None if record.value is None else _encode_offset(record.value)
    key = GROUP_METADATA.key_bytes({"group": record.group_id})
    return key, None if record.value is None else _encode_group(record.value)


def _encode_offset(om: OffsetAndMetadata) -> bytes:
    values = {
        "offset": om.offset,
        "leaderEpoch": om.leader_epoch,
        "metadata": om.metadata,
        "commitTimestamp": om.commit_timestamp,
        "expireTimestamp": om.expire_timestamp,
    }
    version = OFFSET_COMMIT_VALUE_VERSION if om.expire_timestamp is None else 1
    return OFFSET_COMMIT.value_bytes(version, values)


def _encode_group(value: GroupMetadataValue) -> bytes:
    members = [
        {
            "memberId": m.member_id,
            "groupInstanceId": m.group_instance_id,
            "clientId": m.client_id,
            "clientHost": m.client_host,
            "rebalanceTimeout": m.rebalance_timeout_ms,
            "sessionTimeout": m.session_timeout_ms,
            "subscription": m.subscription,
            "assignment": m.assignment,
        }
        for m in value.members
    ]
    values = {
        "protocolType": value.protocol_type,
        "generation": value.generation,
        "protocol": value.protocol,
        "leader": value.leader,
        "currentStateTimestamp": value.current_state_timestamp,
        "members": members,
    }
    return GROUP_METADATA.value_bytes(GROUP_METADATA_VALUE_VERSION, values)


def decode_record(key: bytes, value: bytes | None) -> Record | None:
    """The record a key/value pair holds; None (with a warning) for an unknown schema."""
    try:
        key_version = read_int16(key, 0)
        if key_version in (0, 1):
            k = OFFSET_COMMIT.read_key(key)
            om = None if value is None else _decode_offset(value)
            return OffsetCommitRecord(k["group"], k["topic"], k["partition"], om)
        if key_version == 2:
            group_id = GROUP_METADATA.read_key(key)["group"]
            return GroupMetadataRecord(group_id, None if value is None else _decode_group(value))
        if 3 <= key_version <= 8:
            return None  # a consumer group's (consumer/consumer_group_records.py)
        if 17 <= key_version <= 23:
            return None  # a streams group's (streams/streams_group_records.py)
        log.warning(
            "Skipping %s record with unknown key version %d", GROUP_METADATA_TOPIC_NAME, key_version
        )
    except (struct.error, ValueError, UnicodeDecodeError) as exc:
        log.warning("Skipping malformed %s record: %s", GROUP_METADATA_TOPIC_NAME, exc)
    return None


def _value_of(record_type: RecordType, value: bytes, what: str) -> dict[str, Any]:
    version = read_int16(value, 0)
    if version not in record_type.value.versions:
        raise ValueError(f"unknown {what} value version {version}")
    values: dict[str, Any] = record_type.read_value(value)[1]  # a dict: no ``make``
    return values


def _decode_offset(value: bytes) -> OffsetAndMetadata:
    v = _value_of(OFFSET_COMMIT, value, "offset commit")
    expire_ts = v["expireTimestamp"]
    return OffsetAndMetadata(
        offset=v["offset"],
        leader_epoch=v["leaderEpoch"],
        metadata=v["metadata"],
        commit_timestamp=v["commitTimestamp"],
        expire_timestamp=None if expire_ts < 0 else expire_ts,
    )


def _decode_group(value: bytes) -> GroupMetadataValue:
    v = _value_of(GROUP_METADATA, value, "group metadata")
    members = [
        MemberRecord(
            m["memberId"],
            m["groupInstanceId"],
            m["clientId"],
            m["clientHost"],
            # before version 1 there was one timeout for both
            m["sessionTimeout"] if m["rebalanceTimeout"] < 0 else m["rebalanceTimeout"],
            m["sessionTimeout"],
            m["subscription"],
            m["assignment"],
        )
        for m in v["members"]
    ]
    return GroupMetadataValue(
        v["protocolType"],
        v["generation"],
        v["protocol"],
        v["leader"],
        v["currentStateTimestamp"],
        members,
    )


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
        timeout_ms: int | None = None,
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
