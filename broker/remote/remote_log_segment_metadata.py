"""RemoteLogSegmentMetadata and its states: what the metadata manager records per segment.

Kafka's ``RemoteLogSegmentState`` moves COPY_SEGMENT_STARTED -> COPY_SEGMENT_FINISHED ->
DELETE_SEGMENT_STARTED -> DELETE_SEGMENT_FINISHED (and STARTED -> DELETE_SEGMENT_STARTED
for a copy a crash left half done). Only a COPY_SEGMENT_FINISHED segment is readable, and
only its end offset tells the leader that the local copy may go.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import IntEnum
from typing import Any

TopicPartition = tuple[str, int]


class RemoteLogSegmentState(IntEnum):
    """Kafka's states, with Kafka's ids (the metadata record's ``state`` byte)."""

    COPY_SEGMENT_STARTED = 0
    COPY_SEGMENT_FINISHED = 1
    DELETE_SEGMENT_STARTED = 2
    DELETE_SEGMENT_FINISHED = 3


#: The transitions Kafka's RemoteLogSegmentState.isValidTransition allows.
VALID_TRANSITIONS: dict[RemoteLogSegmentState, frozenset[RemoteLogSegmentState]] = {
    RemoteLogSegmentState.COPY_SEGMENT_STARTED: frozenset(
        {RemoteLogSegmentState.COPY_SEGMENT_FINISHED, RemoteLogSegmentState.DELETE_SEGMENT_STARTED}
    ),
    RemoteLogSegmentState.COPY_SEGMENT_FINISHED: frozenset(
        {RemoteLogSegmentState.DELETE_SEGMENT_STARTED}
    ),
    RemoteLogSegmentState.DELETE_SEGMENT_STARTED: frozenset(
        {RemoteLogSegmentState.DELETE_SEGMENT_FINISHED}
    ),
    RemoteLogSegmentState.DELETE_SEGMENT_FINISHED: frozenset(),
}


@dataclass(frozen=True, slots=True)
class RemoteLogSegmentId:
    """A topic partition and a random id (Kafka's: TopicIdPartition + Uuid)."""

    topic: str
    partition: int
    id: str

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)


@dataclass(frozen=True, slots=True)
class RemoteLogSegmentMetadata:
    """One remote segment: its offsets, epochs, size and state."""

    segment_id: RemoteLogSegmentId
    start_offset: int
    end_offset: int  # inclusive, as Kafka's
    max_timestamp_ms: int
    broker_id: int  # the leader that copied it
    event_timestamp_ms: int
    segment_size_in_bytes: int
    # leader epoch -> its first offset in this segment (Kafka's segmentLeaderEpochs)
    segment_leader_epochs: dict[int, int] = field(default_factory=dict)
    state: RemoteLogSegmentState = RemoteLogSegmentState.COPY_SEGMENT_STARTED

    def with_state(
        self, state: RemoteLogSegmentState, broker_id: int, event_timestamp_ms: int
    ) -> RemoteLogSegmentMetadata:
        """Kafka's createWithUpdates: the next state of the same segment."""
        if state not in VALID_TRANSITIONS[self.state]:
            raise ValueError(
                f"invalid remote segment state transition {self.state.name} -> {state.name}"
            )
        return replace(
            self, state=state, broker_id=broker_id, event_timestamp_ms=event_timestamp_ms
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.segment_id.topic,
            "partition": self.segment_id.partition,
            "id": self.segment_id.id,
            "start_offset": self.start_offset,
            "end_offset": self.end_offset,
            "max_timestamp_ms": self.max_timestamp_ms,
            "broker_id": self.broker_id,
            "event_timestamp_ms": self.event_timestamp_ms,
            "segment_size_in_bytes": self.segment_size_in_bytes,
            "segment_leader_epochs": {str(k): v for k, v in self.segment_leader_epochs.items()},
            "state": int(self.state),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RemoteLogSegmentMetadata:
        return cls(
            segment_id=RemoteLogSegmentId(data["topic"], int(data["partition"]), data["id"]),
            start_offset=int(data["start_offset"]),
            end_offset=int(data["end_offset"]),
            max_timestamp_ms=int(data["max_timestamp_ms"]),
            broker_id=int(data["broker_id"]),
            event_timestamp_ms=int(data["event_timestamp_ms"]),
            segment_size_in_bytes=int(data["segment_size_in_bytes"]),
            segment_leader_epochs={
                int(k): int(v) for k, v in data["segment_leader_epochs"].items()
            },
            state=RemoteLogSegmentState(int(data["state"])),
        )
