"""The records of ``__remote_log_metadata``, in Kafka's format (its ``RemoteLogMetadataSerde``).

Kafka's topic-based remote log metadata manager writes one record per segment event, no
key, the value an ``ApiMessageAndVersion`` as ``BytesApiMessageSerde`` frames it: the
message's api key and version as unsigned varints, then the message (flexible). The two
minikafka writes, declared as data from Kafka's JSON schemas (version 0):

- ``RemoteLogSegmentMetadataRecord`` (api key 0): a segment's first event, its copy
  started -- the segment id (topic name, topic id, partition; the segment's uuid), start
  and end offsets, the copier's broker id, max timestamp, event time, the leader epochs
  in the segment, its size, custom metadata (null), the state, and the tagged
  ``TxnIndexEmpty`` (a bool on the wire: one byte, declared here as int8);
- ``RemoteLogSegmentMetadataUpdateRecord`` (api key 1): a later state of the segment
  (copy finished, delete started, delete finished) with the broker and event time.

Where we differ: ``RemotePartitionDeleteMetadataRecord`` (api key 2) and the snapshot
records are not written (deleting a tiered topic does not delete its remote segments
here), and a record whose api key is not one of the two is skipped by the reader.
"""

from __future__ import annotations

import uuid
from typing import Any

from broker.coordinator.record_schema import Field, Schema, Struct
from broker.remote.remote_log_segment_metadata import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
)

SEGMENT_METADATA_API_KEY = 0
SEGMENT_UPDATE_API_KEY = 1
VERSION = 0

_TOPIC_ID_PARTITION = Struct(
    "TopicIdPartitionEntry",
    (Field("Name", "string"), Field("Id", "uuid"), Field("Partition", "int32")),
)
_SEGMENT_ID = Struct(
    "RemoteLogSegmentIdEntry",
    (Field("TopicIdPartition", _TOPIC_ID_PARTITION), Field("Id", "uuid")),
)
_EPOCH = Struct(
    "SegmentLeaderEpochEntry", (Field("LeaderEpoch", "int32"), Field("Offset", "int64"))
)

SEGMENT_METADATA = Schema(
    "RemoteLogSegmentMetadataRecord",
    "0",
    "0+",
    (
        Field("RemoteLogSegmentId", _SEGMENT_ID),
        Field("StartOffset", "int64"),
        Field("EndOffset", "int64"),
        Field("BrokerId", "int32"),
        Field("MaxTimestampMs", "int64"),
        Field("EventTimestampMs", "int64"),
        Field.of("SegmentLeaderEpochs", _EPOCH),
        Field("SegmentSizeInBytes", "int32"),
        Field("CustomMetadata", "bytes", nullable_versions="0+"),
        Field("RemoteLogSegmentState", "int8"),
        Field("TxnIndexEmpty", "int8", tag=0),
    ),
)
SEGMENT_UPDATE = Schema(
    "RemoteLogSegmentMetadataUpdateRecord",
    "0",
    "0+",
    (
        Field("RemoteLogSegmentId", _SEGMENT_ID),
        Field("BrokerId", "int32"),
        Field("EventTimestampMs", "int64"),
        Field("CustomMetadata", "bytes", nullable_versions="0+"),
        Field("RemoteLogSegmentState", "int8"),
    ),
)


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _segment_id(sid: RemoteLogSegmentId, topic_id: uuid.UUID) -> dict[str, Any]:
    return {
        "TopicIdPartition": {"Name": sid.topic, "Id": topic_id, "Partition": sid.partition},
        "Id": uuid.UUID(hex=sid.id),
    }


def encode_event(
    metadata: RemoteLogSegmentMetadata, topic_id: uuid.UUID, txn_index_empty: bool = True
) -> bytes:
    """A segment event as the record value Kafka writes: its first event (COPY_SEGMENT_
    STARTED) in full, every later one as an update."""
    sid = _segment_id(metadata.segment_id, topic_id)
    if metadata.state is RemoteLogSegmentState.COPY_SEGMENT_STARTED:
        values = {
            "RemoteLogSegmentId": sid,
            "StartOffset": metadata.start_offset,
            "EndOffset": metadata.end_offset,
            "BrokerId": metadata.broker_id,
            "MaxTimestampMs": metadata.max_timestamp_ms,
            "EventTimestampMs": metadata.event_timestamp_ms,
            "SegmentLeaderEpochs": [
                {"LeaderEpoch": epoch, "Offset": offset}
                for epoch, offset in sorted(metadata.segment_leader_epochs.items())
            ],
            "SegmentSizeInBytes": metadata.segment_size_in_bytes,
            "CustomMetadata": None,
            "RemoteLogSegmentState": int(metadata.state),
            "TxnIndexEmpty": int(txn_index_empty),
        }
        head = _varint(SEGMENT_METADATA_API_KEY) + _varint(VERSION)
        return head + SEGMENT_METADATA.codec(VERSION).to_bytes(values)
    update = {
        "RemoteLogSegmentId": sid,
        "BrokerId": metadata.broker_id,
        "EventTimestampMs": metadata.event_timestamp_ms,
        "CustomMetadata": None,
        "RemoteLogSegmentState": int(metadata.state),
    }
    head = _varint(SEGMENT_UPDATE_API_KEY) + _varint(VERSION)
    return head + SEGMENT_UPDATE.codec(VERSION).to_bytes(update)


def decode_event(
    value: bytes, current: dict[tuple[str, int, str], RemoteLogSegmentMetadata]
) -> RemoteLogSegmentMetadata | None:
    """The segment's metadata after the event in ``value`` (an update applies to the
    segment's ``current`` metadata, keyed by (topic, partition, segment id)); None for a
    record of another kind or an update of a segment never seen."""
    api_key, pos = _read_varint(value, 0)
    version, pos = _read_varint(value, pos)
    if api_key == SEGMENT_METADATA_API_KEY:
        fields = SEGMENT_METADATA.codec(version).decode(value, pos)[0]
        return RemoteLogSegmentMetadata(
            segment_id=_read_segment_id(fields["RemoteLogSegmentId"]),
            start_offset=fields["StartOffset"],
            end_offset=fields["EndOffset"],
            max_timestamp_ms=fields["MaxTimestampMs"],
            broker_id=fields["BrokerId"],
            event_timestamp_ms=fields["EventTimestampMs"],
            segment_size_in_bytes=fields["SegmentSizeInBytes"],
            segment_leader_epochs={
                e["LeaderEpoch"]: e["Offset"] for e in fields["SegmentLeaderEpochs"]
            },
            state=RemoteLogSegmentState(fields["RemoteLogSegmentState"]),
        )
    if api_key == SEGMENT_UPDATE_API_KEY:
        fields = SEGMENT_UPDATE.codec(version).decode(value, pos)[0]
        sid = _read_segment_id(fields["RemoteLogSegmentId"])
        known = current.get((sid.topic, sid.partition, sid.id))
        if known is None:
            return None
        return known.with_state(
            RemoteLogSegmentState(fields["RemoteLogSegmentState"]),
            fields["BrokerId"],
            fields["EventTimestampMs"],
        )
    return None


def _read_segment_id(fields: dict[str, Any]) -> RemoteLogSegmentId:
    tp = fields["TopicIdPartition"]
    return RemoteLogSegmentId(str(tp["Name"]), int(tp["Partition"]), fields["Id"].hex)
