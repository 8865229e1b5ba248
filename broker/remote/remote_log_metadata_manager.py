"""RemoteLogMetadataManager: which segments of which partitions are remote, and in what state.

Kafka's default (``TopicBasedRemoteLogMetadataManager``) writes every segment event to
the internal topic ``__remote_log_metadata`` (50 partitions by default,
``remote.log.metadata.topic.num.partitions``; a user partition's events go to one of
them by hash) and each broker consumes the partitions of the user partitions it hosts,
which is how a new leader learns what its predecessor copied. minikafka's brokers share
one process, so they share one manager: the events keep Kafka's partitioning and order,
each appended (one JSON line per event) to ``__remote_log_metadata-<n>/events.jsonl``
under the data directory and replayed when the cluster starts (in memory without a data
directory). Where we differ: the events are not records of an internal topic (not
fetchable, not replicated -- the data directory is the cluster's, as the other
cluster-wide stores), and a reader sees an event as soon as it is written.

A torn last line (a kill -9 mid-write) is ignored on replay: the event it held was never
acknowledged to the copier, which redoes the copy.
"""

from __future__ import annotations

import json
import logging
import zlib
from collections.abc import Iterator
from pathlib import Path

from broker.remote.remote_log_segment_metadata import (
    VALID_TRANSITIONS,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    TopicPartition,
)

log = logging.getLogger("broker.remote")

REMOTE_LOG_METADATA_TOPIC = "__remote_log_metadata"
#: Kafka's remote.log.metadata.topic.num.partitions default.
METADATA_TOPIC_PARTITIONS = 50
_EVENTS_FILE = "events.jsonl"


def metadata_partition(tp: TopicPartition, partitions: int = METADATA_TOPIC_PARTITIONS) -> int:
    """The ``__remote_log_metadata`` partition that holds ``tp``'s events (stable hash)."""
    return zlib.crc32(f"{tp[0]}-{tp[1]}".encode()) % partitions


class RemoteLogMetadataManager:
    """Every remote segment's latest metadata, by topic partition, durable as events."""

    def __init__(self, data_dir: Path | None) -> None:
        self.directory = data_dir
        # tp -> segment id -> the segment's latest metadata (insertion = copy order)
        self._segments: dict[TopicPartition, dict[str, RemoteLogSegmentMetadata]] = {}
        if data_dir is not None:
            self._replay()

    # -- durability -----------------------------------------------------------------

    def _events_path(self, tp: TopicPartition) -> Path | None:
        if self.directory is None:
            return None
        name = f"{REMOTE_LOG_METADATA_TOPIC}-{metadata_partition(tp)}"
        return self.directory / name / _EVENTS_FILE

    def _append(self, metadata: RemoteLogSegmentMetadata) -> None:
        path = self._events_path(metadata.segment_id.tp)
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps(metadata.to_json(), separators=(",", ":")) + "\n"
        # Written to the OS before the call returns (a kill -9 loses nothing), not fsynced:
        # as the logs (Kafka's topic-based manager produces with acks=all, no fsync); an
        # fsync per event cost the event loop ~4x the produce throughput of a tiered topic.
        with path.open("a") as f:
            f.write(line)

    def _replay(self) -> None:
        assert self.directory is not None
        if not self.directory.exists():
            return
        for events in sorted(self.directory.glob(f"{REMOTE_LOG_METADATA_TOPIC}-*/{_EVENTS_FILE}")):
            for line in events.read_text().splitlines():
                try:
                    metadata = RemoteLogSegmentMetadata.from_json(json.loads(line))
                except (ValueError, KeyError):
                    log.warning("%s: ignoring a torn event", events)
                    continue
                self._put(metadata)

    def _put(self, metadata: RemoteLogSegmentMetadata) -> None:
        sid = metadata.segment_id
        segments = self._segments.setdefault(sid.tp, {})
        if metadata.state is RemoteLogSegmentState.DELETE_SEGMENT_FINISHED:
            segments.pop(sid.id, None)
        else:
            segments[sid.id] = metadata

    # -- Kafka's calls --------------------------------------------------------------------

    def add_remote_log_segment_metadata(self, metadata: RemoteLogSegmentMetadata) -> None:
        """A copy starts (state COPY_SEGMENT_STARTED)."""
        if metadata.state is not RemoteLogSegmentState.COPY_SEGMENT_STARTED:
            raise ValueError("a new remote segment starts in COPY_SEGMENT_STARTED")
        self._append(metadata)
        self._put(metadata)

    def update_remote_log_segment_metadata(self, metadata: RemoteLogSegmentMetadata) -> None:
        """A segment's next state (copy finished, delete started or finished)."""
        current = self._segments.get(metadata.segment_id.tp, {}).get(metadata.segment_id.id)
        if current is None:
            raise KeyError(f"no remote segment {metadata.segment_id}")
        if metadata.state not in VALID_TRANSITIONS[current.state]:
            raise ValueError(f"{current.state.name} -> {metadata.state.name}")
        self._append(metadata)
        self._put(metadata)

    def list_remote_log_segments(self, tp: TopicPartition) -> Iterator[RemoteLogSegmentMetadata]:
        """Every segment of ``tp`` in any state but deleted, by start offset."""
        yield from sorted(self._segments.get(tp, {}).values(), key=lambda m: m.start_offset)

    def copied_segments(self, tp: TopicPartition) -> list[RemoteLogSegmentMetadata]:
        """The readable segments (COPY_SEGMENT_FINISHED), by start offset."""
        return [
            m
            for m in self.list_remote_log_segments(tp)
            if m.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED
        ]

    def remote_log_segment_metadata(
        self, tp: TopicPartition, offset: int
    ) -> RemoteLogSegmentMetadata | None:
        """The readable segment holding ``offset`` (Kafka's remoteLogSegmentMetadata)."""
        for m in self.copied_segments(tp):
            if m.start_offset <= offset <= m.end_offset:
                return m
        return None

    def highest_offset_for_epoch(self, tp: TopicPartition) -> int:
        """The end offset of the highest copied segment, -1 when none (Kafka's
        highestOffsetForEpoch over every epoch)."""
        segments = self.copied_segments(tp)
        return max((m.end_offset for m in segments), default=-1)

    def remote_log_start_offset(self, tp: TopicPartition) -> int:
        """The first offset the tier holds, -1 when it holds nothing."""
        segments = self.copied_segments(tp)
        return segments[0].start_offset if segments else -1

    def remote_size_bytes(self, tp: TopicPartition) -> int:
        return sum(m.segment_size_in_bytes for m in self.copied_segments(tp))

    def partitions(self) -> list[TopicPartition]:
        return sorted(tp for tp, segments in self._segments.items() if segments)

    def remove_partition(self, tp: TopicPartition) -> list[RemoteLogSegmentMetadata]:
        """A deleted topic's partition: its segments (for the caller to delete)."""
        return list(self._segments.pop(tp, {}).values())

    def new_segment_id(self, tp: TopicPartition, token: str) -> RemoteLogSegmentId:
        return RemoteLogSegmentId(tp[0], tp[1], token)
