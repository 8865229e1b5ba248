"""Representative coordinator records, one or more per record type and version we write.

``tests/data/coordinator_records.json`` holds their key and value bytes as the code
before the coordinator kit (commit 3785eb7) wrote them; ``test_coordinator_records``
encodes the same records with today's code and decodes the stored bytes. ``READ_ONLY``
are bytes of versions we read but never write (Kafka's older or newer value versions),
built by hand from Kafka's schemas, with what they decode to.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any

from broker.group.consumer.consumer_group import TopicMetadata
from broker.group.consumer.consumer_group_member import ClassicMemberMetadata, MemberState
from broker.group.consumer.consumer_group_records import (
    ConsumerGroupCurrentMemberAssignmentRecord,
    ConsumerGroupMemberMetadataRecord,
    ConsumerGroupMetadataRecord,
    ConsumerGroupPartitionMetadataRecord,
    ConsumerGroupTargetAssignmentMemberRecord,
    ConsumerGroupTargetAssignmentMetadataRecord,
    CurrentAssignment,
    MemberSubscription,
    decode_consumer_group_record,
    encode_consumer_group_record,
)
from broker.group.group_log import (
    GroupMetadataRecord,
    GroupMetadataValue,
    MemberRecord,
    OffsetCommitRecord,
    decode_record,
    encode_record,
)
from broker.group.offsets import OffsetAndMetadata
from broker.share_coordinator.share_state_records import (
    PersisterStateBatch,
    ShareGroupOffset,
    SharePartitionKey,
    ShareUpdate,
    decode_key,
    decode_snapshot,
    decode_update,
    encode_key,
    encode_snapshot,
    encode_update,
)
from broker.txn.transaction_log import (
    TransactionLogValue,
    key_to_bytes,
    read_txn_record_key,
    read_txn_record_value,
    value_to_bytes,
)
from broker.txn.transaction_metadata import TxnTransitMetadata
from broker.txn.transaction_state import TransactionState

KeyValue = tuple[bytes, bytes | None]

T1 = uuid.UUID("5f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")
T2 = uuid.UUID("00000000-0000-0000-0000-000000000001")
T3 = uuid.UUID("ffffffff-eeee-dddd-cccc-bbbbbbbbbbbb")


# ------------------------------------------------------------- group records
def _member(i: int, instance: str | None) -> MemberRecord:
    return MemberRecord(
        f"member-{i}-{'x' * i}",
        instance,
        f"client-{i}",
        "/127.0.0.1",
        300000 + i,
        45000,
        b"\x00\x01sub" * i,
        b"" if i == 2 else b"\x00\x03assign\xff" * i,
    )


GROUP_RECORDS: dict[str, Any] = {
    "offset_commit_v3": OffsetCommitRecord(
        "group-a", "topic-1", 7, OffsetAndMetadata(1234567890123, 5, "meta", 1700000000000)
    ),
    "offset_commit_v3_unicode": OffsetCommitRecord(
        "gröup-ü", "tøpic", 0, OffsetAndMetadata(0, -1, "", 0)
    ),
    "offset_commit_v3_long_metadata": OffsetCommitRecord(
        "g", "t", 2147483647, OffsetAndMetadata(-1, 2147483647, "m" * 300, -5)
    ),
    "offset_commit_v1_expire": OffsetCommitRecord(
        "group-b", "topic-2", 3, OffsetAndMetadata(42, -1, "md", 1000, 2000)
    ),
    "offset_commit_tombstone": OffsetCommitRecord("group-a", "topic-1", 7, None),
    "group_metadata_v3_empty": GroupMetadataRecord(
        "group-empty", GroupMetadataValue("consumer", 4, None, None, 1700000000000, [])
    ),
    "group_metadata_v3_members": GroupMetadataRecord(
        "group-full",
        GroupMetadataValue(
            "consumer",
            12,
            "range",
            "member-1-x",
            1700000001234,
            [_member(1, None), _member(2, "static-2"), _member(3, "")],
        ),
    ),
    "group_metadata_v3_connect": GroupMetadataRecord(
        "connect-cluster", GroupMetadataValue("connect", 0, "sessioned", None, -1, [])
    ),
    "group_metadata_tombstone": GroupMetadataRecord("group-gone", None),
}

# ---------------------------------------------------- consumer group records
_ASSIGN = {T1: frozenset({0, 1, 2, 130}), T3: frozenset({5})}
_PENDING = {T2: frozenset({0})}

CONSUMER_GROUP_RECORDS: dict[str, Any] = {
    "cg_metadata": ConsumerGroupMetadataRecord("cg-1", 17),
    "cg_metadata_tombstone": ConsumerGroupMetadataRecord("cg-1", None),
    "cg_partition_metadata": ConsumerGroupPartitionMetadataRecord(
        "cg-1", (TopicMetadata(T3, "zeta", 3), TopicMetadata(T1, "alpha", 200))
    ),
    "cg_partition_metadata_empty": ConsumerGroupPartitionMetadataRecord("cg-1", ()),
    "cg_partition_metadata_tombstone": ConsumerGroupPartitionMetadataRecord("cg-1", None),
    "cg_member_metadata": ConsumerGroupMemberMetadataRecord(
        "cg-1",
        "member-uuid-1",
        MemberSubscription(
            "instance-1",
            "rack-a",
            "client-1",
            "/10.0.0.1",
            ("b-topic", "a-topic"),
            None,
            300000,
            "uniform",
        ),
    ),
    "cg_member_metadata_nulls": ConsumerGroupMemberMetadataRecord(
        "cg-1",
        "member-2",
        MemberSubscription(None, None, "c", "/h", (), "foo.*", 45000, None),
    ),
    "cg_member_metadata_classic": ConsumerGroupMemberMetadataRecord(
        "cg-1",
        "classic-member",
        MemberSubscription(
            None,
            None,
            "kafka-python",
            "/127.0.0.1",
            ("t",),
            None,
            60000,
            None,
            ClassicMemberMetadata(10000, (("range", b"\x00\x01meta"), ("roundrobin", b""))),
        ),
    ),
    "cg_member_metadata_tombstone": ConsumerGroupMemberMetadataRecord("cg-1", "member-2", None),
    "cg_target_assignment_metadata": ConsumerGroupTargetAssignmentMetadataRecord("cg-1", 16),
    "cg_target_assignment_metadata_tombstone": ConsumerGroupTargetAssignmentMetadataRecord(
        "cg-1", None
    ),
    "cg_target_assignment_member": ConsumerGroupTargetAssignmentMemberRecord(
        "cg-1", "member-uuid-1", _ASSIGN
    ),
    "cg_target_assignment_member_empty": ConsumerGroupTargetAssignmentMemberRecord(
        "cg-1", "member-2", {}
    ),
    "cg_target_assignment_member_tombstone": ConsumerGroupTargetAssignmentMemberRecord(
        "cg-1", "member-2", None
    ),
    "cg_current_assignment": ConsumerGroupCurrentMemberAssignmentRecord(
        "cg-1",
        "member-uuid-1",
        CurrentAssignment(17, 16, MemberState.UNREVOKED_PARTITIONS, _ASSIGN, _PENDING),
    ),
    "cg_current_assignment_stable": ConsumerGroupCurrentMemberAssignmentRecord(
        "cg-1", "member-2", CurrentAssignment(3, 2, MemberState.STABLE, {}, {})
    ),
    "cg_current_assignment_unknown": ConsumerGroupCurrentMemberAssignmentRecord(
        "cg-1", "member-3", CurrentAssignment(0, -1, MemberState.UNKNOWN, {T2: frozenset()}, {})
    ),
    "cg_current_assignment_tombstone": ConsumerGroupCurrentMemberAssignmentRecord(
        "cg-1", "member-2", None
    ),
}


# --------------------------------------------------------- transaction records
def _transit(state: TransactionState, partitions: frozenset[tuple[str, int]]) -> TxnTransitMetadata:
    return TxnTransitMetadata(
        producer_id=4000000000,
        last_producer_id=-1,
        producer_epoch=7,
        last_producer_epoch=-1,
        txn_timeout_ms=60000,
        txn_state=state,
        topic_partitions=partitions,
        txn_start_timestamp=1700000000000,
        txn_last_update_timestamp=1700000005000,
    )


TXN_RECORDS: dict[str, tuple[str, TxnTransitMetadata | None]] = {
    "txn_empty": ("txn-app", _transit(TransactionState.EMPTY, frozenset())),
    "txn_ongoing": (
        "txn-ä",
        _transit(
            TransactionState.ONGOING,
            frozenset({("b", 1), ("a", 3), ("a", 0), ("__consumer_offsets", 49)}),
        ),
    ),
    "txn_prepare_commit": ("t", _transit(TransactionState.PREPARE_COMMIT, frozenset({("x", 0)}))),
    "txn_complete_abort": ("t", _transit(TransactionState.COMPLETE_ABORT, frozenset())),
    "txn_dead": ("t", _transit(TransactionState.DEAD, frozenset())),
    "txn_fence": ("t", _transit(TransactionState.PREPARE_EPOCH_FENCE, frozenset({("x", 2)}))),
    "txn_tombstone": ("gone", None),
}

# --------------------------------------------------------------- share records
_KEY = SharePartitionKey("share-group", T1, 3)
_BATCHES = (
    PersisterStateBatch(0, 4, 2, 1),
    PersisterStateBatch(5, 6, 0, 2),
    PersisterStateBatch(7, 7, 4, 1),
    PersisterStateBatch(8, 2**40, 0, 32767),
)
SHARE_RECORDS: dict[str, tuple[SharePartitionKey, ShareGroupOffset | ShareUpdate | None, bool]] = {
    "share_snapshot": (_KEY, ShareGroupOffset(0, 1, 5, 0, _BATCHES), False),
    "share_snapshot_empty": (
        SharePartitionKey("g", T2, 0),
        ShareGroupOffset(65535, 0, -1, -1, ()),
        False,
    ),
    "share_update": (_KEY, ShareUpdate(3, -1, -1, _BATCHES[1:3]), True),
    "share_update_empty": (_KEY, ShareUpdate(0, 2, 10, ()), True),
    "share_snapshot_tombstone": (_KEY, None, False),
    "share_update_tombstone": (_KEY, None, True),
}


# ---------------------------------------------------------- encode / decode
def encode(name: str) -> KeyValue:
    """The key and value bytes of case ``name``, with the code under test."""
    if name in GROUP_RECORDS:
        return encode_record(GROUP_RECORDS[name])
    if name in CONSUMER_GROUP_RECORDS:
        return encode_consumer_group_record(CONSUMER_GROUP_RECORDS[name])
    if name in TXN_RECORDS:
        txn_id, transit = TXN_RECORDS[name]
        return key_to_bytes(txn_id), None if transit is None else value_to_bytes(transit)
    key, value, update = SHARE_RECORDS[name]
    if value is None:
        return encode_key(key, update=update), None
    if isinstance(value, ShareUpdate):
        return encode_key(key, update=True), encode_update(value)
    return encode_key(key, update=False), encode_snapshot(value)


def _txn_value(transit: TxnTransitMetadata) -> TransactionLogValue:
    return TransactionLogValue(
        transit.producer_id,
        transit.producer_epoch,
        transit.txn_timeout_ms,
        transit.txn_state,
        transit.topic_partitions,
        transit.txn_last_update_timestamp,
        transit.txn_start_timestamp,
    )


def expected_decoded(name: str) -> Any:
    """What decoding case ``name``'s bytes gives back."""
    if name in GROUP_RECORDS:
        return GROUP_RECORDS[name]
    if name in CONSUMER_GROUP_RECORDS:
        return _normalized(CONSUMER_GROUP_RECORDS[name])
    if name in TXN_RECORDS:
        txn_id, transit = TXN_RECORDS[name]
        return txn_id, None if transit is None else _txn_value(transit)
    key, value, update = SHARE_RECORDS[name]
    return (key, update), value


def _normalized(record: Any) -> Any:
    """A consumer group record as it reads back: topic names sorted, empty topics of an
    assignment dropped."""
    if isinstance(record, ConsumerGroupMemberMetadataRecord) and record.value is not None:
        v = record.value
        return ConsumerGroupMemberMetadataRecord(
            record.group_id,
            record.member_id,
            MemberSubscription(
                v.instance_id,
                v.rack_id,
                v.client_id,
                v.client_host,
                tuple(sorted(v.subscribed_topic_names)),
                v.subscribed_topic_regex,
                v.rebalance_timeout_ms,
                v.server_assignor,
                v.classic_member_metadata,
            ),
        )
    if isinstance(record, ConsumerGroupPartitionMetadataRecord) and record.topics is not None:
        return ConsumerGroupPartitionMetadataRecord(
            record.group_id, tuple(sorted(record.topics, key=lambda t: t.name))
        )
    if isinstance(record, ConsumerGroupCurrentMemberAssignmentRecord) and record.value:
        v = record.value
        drop = lambda a: {t: p for t, p in a.items() if p}  # noqa: E731
        return ConsumerGroupCurrentMemberAssignmentRecord(
            record.group_id,
            record.member_id,
            CurrentAssignment(
                v.member_epoch,
                v.previous_member_epoch,
                v.state,
                drop(v.assigned_partitions),
                drop(v.partitions_pending_revocation),
            ),
        )
    return record


def decode(name: str, key: bytes, value: bytes | None) -> Any:
    """Decode ``key``/``value`` as case ``name``'s kind, with the code under test."""
    if name.startswith(("offset_", "group_")):
        return decode_record(key, value)
    if name.startswith("cg_"):
        return decode_consumer_group_record(key, value)
    if name.startswith("txn_"):
        return read_txn_record_key(key), None if value is None else read_txn_record_value(value)
    if name.startswith("share_"):
        decoded_key = decode_key(key)
        if value is None:
            return decoded_key, None
        return decoded_key, (decode_update if decoded_key[1] else decode_snapshot)(value)
    raise KeyError(name)


ALL_CASES = [*GROUP_RECORDS, *CONSUMER_GROUP_RECORDS, *TXN_RECORDS, *SHARE_RECORDS]


# ----------------------------------------------- versions read, never written
def _s(v: str | None) -> bytes:
    if v is None:
        return struct.pack(">h", -1)
    raw = v.encode()
    return struct.pack(">h", len(raw)) + raw


def _cs(v: str) -> bytes:
    raw = v.encode()
    return bytes([len(raw) + 1]) + raw


def _offset_key(version: int) -> bytes:
    return struct.pack(">h", version) + _s("g") + _s("t") + struct.pack(">i", 1)


def _group_value(version: int) -> bytes:
    out = struct.pack(">h", version) + _s("consumer") + struct.pack(">i", 2) + _s("range")
    out += _s("m1")
    if version >= 2:
        out += struct.pack(">q", 99)
    out += struct.pack(">i", 1) + _s("m1")
    if version >= 3:
        out += _s("inst")
    out += _s("cid") + _s("/h")
    if version >= 1:
        out += struct.pack(">i", 30000)
    out += struct.pack(">i", 10000) + struct.pack(">i", 2) + b"ab" + struct.pack(">i", 0)
    return out


def _group_expected(version: int) -> GroupMetadataRecord:
    member = MemberRecord(
        "m1",
        "inst" if version >= 3 else None,
        "cid",
        "/h",
        30000 if version >= 1 else 10000,
        10000,
        b"ab",
        b"",
    )
    return GroupMetadataRecord(
        "g", GroupMetadataValue("consumer", 2, "range", "m1", 99 if version >= 2 else -1, [member])
    )


def _txn_value_v1() -> bytes:
    """TransactionLogValue v1 (flexible), with an unknown tagged field Kafka 4 may add."""
    partitions = b"\x02" + _cs("a") + b"\x03" + struct.pack(">ii", 0, 4) + b"\x00"
    return (
        struct.pack(">hqhib", 1, 9, 2, 30000, 1)
        + partitions
        + struct.pack(">qq", 5, 4)
        + b"\x01\x05\x02xy"  # one tagged field: tag 5, 2 bytes
    )


READ_ONLY: dict[str, tuple[KeyValue, Callable[[], Any]]] = {
    "offset_key_v0_value_v0": (
        (_offset_key(0), struct.pack(">hq", 0, 10) + _s("md") + struct.pack(">q", 77)),
        lambda: OffsetCommitRecord("g", "t", 1, OffsetAndMetadata(10, -1, "md", 77, None)),
    ),
    "offset_value_v1_no_expiry": (
        (_offset_key(1), struct.pack(">hq", 1, 10) + _s("") + struct.pack(">qq", 77, -1)),
        lambda: OffsetCommitRecord("g", "t", 1, OffsetAndMetadata(10, -1, "", 77, None)),
    ),
    "offset_value_v2": (
        (_offset_key(1), struct.pack(">hq", 2, 11) + _s("x") + struct.pack(">q", 78)),
        lambda: OffsetCommitRecord("g", "t", 1, OffsetAndMetadata(11, -1, "x", 78, None)),
    ),
    **{
        f"group_value_v{v}": (
            (struct.pack(">h", 2) + _s("g"), _group_value(v)),
            (lambda v=v: _group_expected(v)),  # type: ignore[misc]
        )
        for v in (0, 1, 2)
    },
    "txn_value_v1": (
        (struct.pack(">h", 0) + _s("tx"), _txn_value_v1()),
        lambda: (
            "tx",
            TransactionLogValue(
                9, 2, 30000, TransactionState.ONGOING, frozenset({("a", 0), ("a", 4)}), 5, 4
            ),
        ),
    ),
}
