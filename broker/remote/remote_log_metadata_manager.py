"""RemoteLogMetadataManager: which segments of which partitions are remote, and in what state.

Kafka's default is ``TopicBasedRemoteLogMetadataManager``: every segment event is a record
of the internal topic ``__remote_log_metadata`` (``remote_log_metadata_topic.py``), and
each broker keeps the metadata of the partitions it hosts in a cache
(``RemoteLogMetadataCache``) that its consumer fills from the topic -- which is how a new
leader after a failover, or a broker after a restart, knows what was copied before.

This is one such cache over the topic. Each broker's remote log manager has its own (and
the cluster has one more for the control endpoint and the console, as an admin client
reading the topic would). Writes publish an event (``add_remote_log_segment_metadata``,
``update_remote_log_segment_metadata``) and call ``on_done`` with the append's error
once the in-sync replicas hold it (Kafka's RLM waits on the returned future); reads
first catch up with the topic: the events of the metadata partition that holds the
asked partition, from where this cache stopped up to the leader's high watermark, in
the topic's order (Kafka's consumer task polls; here the reading happens when asked).
A published event is therefore seen by every cache once it is acknowledged, by its
writer's too. An event that does not apply (an update of an unknown segment, a state
transition Kafka's ``RemoteLogSegmentState`` forbids, e.g. a late copy's FINISHED after
a new leader's DELETE_STARTED) is skipped with a warning, as Kafka's cache refuses it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

from kio.schema.errors import ErrorCode

from broker.remote.remote_log_metadata_records import decode_event, encode_event
from broker.remote.remote_log_metadata_topic import RemoteLogMetadataTopic
from broker.remote.remote_log_segment_metadata import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    TopicPartition,
)

log = logging.getLogger("broker.remote")

#: ``on_done(error)`` of a published event.
PublishCallback = Callable[[ErrorCode], None]


class RemoteLogMetadataManager:
    """Every remote segment's latest metadata by topic partition, read from the topic."""

    def __init__(self, topic: RemoteLogMetadataTopic) -> None:
        self.topic = topic
        # tp -> segment id -> the segment's latest metadata (insertion = copy order)
        self._segments: dict[TopicPartition, dict[str, RemoteLogSegmentMetadata]] = {}
        self._by_id: dict[tuple[str, int, str], RemoteLogSegmentMetadata] = {}
        self._positions: dict[int, int] = {}  # metadata partition -> next offset to read

    # -- the consumer's side ----------------------------------------------------------

    def _catch_up(self, tp: TopicPartition) -> None:
        partition = self.topic.partition_for(tp)
        values, self._positions[partition] = self.topic.read(
            partition, self._positions.get(partition, 0)
        )
        for value in values:
            self._apply(value)

    def _apply(self, value: bytes) -> None:
        try:
            metadata = decode_event(value, self._by_id)
        except (ValueError, KeyError, IndexError) as exc:
            log.warning("__remote_log_metadata: ignoring an event that does not apply: %s", exc)
            return
        if metadata is None:
            return
        sid = metadata.segment_id
        segments = self._segments.setdefault(sid.tp, {})
        if metadata.state is RemoteLogSegmentState.DELETE_SEGMENT_FINISHED:
            segments.pop(sid.id, None)
            self._by_id.pop((sid.topic, sid.partition, sid.id), None)
        else:
            segments[sid.id] = metadata
            self._by_id[(sid.topic, sid.partition, sid.id)] = metadata

    # -- Kafka's calls: writes --------------------------------------------------------

    def add_remote_log_segment_metadata(
        self, metadata: RemoteLogSegmentMetadata, on_done: PublishCallback
    ) -> None:
        """A copy starts (state COPY_SEGMENT_STARTED)."""
        if metadata.state is not RemoteLogSegmentState.COPY_SEGMENT_STARTED:
            raise ValueError("a new remote segment starts in COPY_SEGMENT_STARTED")
        self._publish(metadata, on_done)

    def update_remote_log_segment_metadata(
        self, metadata: RemoteLogSegmentMetadata, on_done: PublishCallback
    ) -> None:
        """A segment's next state (copy finished, delete started or finished)."""
        self._publish(metadata, on_done)

    def _publish(self, metadata: RemoteLogSegmentMetadata, on_done: PublishCallback) -> None:
        sid = metadata.segment_id
        info = self.topic.metadata.topics.get(sid.topic)
        if info is None:  # the topic was deleted meanwhile
            on_done(ErrorCode.unknown_topic_or_partition)
            return
        self.topic.append(
            self.topic.partition_for(sid.tp), encode_event(metadata, info.topic_id), on_done
        )

    # -- Kafka's calls: reads ---------------------------------------------------------

    def list_remote_log_segments(self, tp: TopicPartition) -> Iterator[RemoteLogSegmentMetadata]:
        """Every segment of ``tp`` in any state but deleted, by start offset."""
        self._catch_up(tp)
        yield from sorted(self._segments.get(tp, {}).values(), key=lambda m: m.start_offset)

    def segment(self, segment_id: RemoteLogSegmentId) -> RemoteLogSegmentMetadata | None:
        """A segment's latest metadata, None once deleted (or never seen)."""
        self._catch_up(segment_id.tp)
        return self._segments.get(segment_id.tp, {}).get(segment_id.id)

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
        return max((m.end_offset for m in self.copied_segments(tp)), default=-1)

    def remote_log_start_offset(self, tp: TopicPartition) -> int:
        """The first offset the tier holds, -1 when it holds nothing."""
        segments = self.copied_segments(tp)
        return segments[0].start_offset if segments else -1

    def remote_size_bytes(self, tp: TopicPartition) -> int:
        return sum(m.segment_size_in_bytes for m in self.copied_segments(tp))

    def partitions(self) -> list[TopicPartition]:
        """Every partition with segments in the tier (the whole topic read first)."""
        for partition in range(self.topic.num_partitions):
            values, self._positions[partition] = self.topic.read(
                partition, self._positions.get(partition, 0)
            )
            for value in values:
                self._apply(value)
        return sorted(tp for tp, segments in self._segments.items() if segments)

    def new_segment_id(self, tp: TopicPartition, token: str) -> RemoteLogSegmentId:
        """``token``: 32 hex digits (the record carries the segment id as a uuid)."""
        return RemoteLogSegmentId(tp[0], tp[1], token)
