"""Kafka's RemoteStorageManager: the plugin that keeps segment bytes in the remote tier.

The four calls keep Kafka's names and meaning: ``copy_log_segment_data`` (a rolled
segment with its offset and time indexes, leader-epoch checkpoint and producer
snapshot), ``fetch_log_segment`` (the segment's bytes from a position),
``fetch_index`` (one of its indexes), ``delete_log_segment_data``. Kafka calls them on
thread pools and they block; here they are plain calls that return at once, and the
time they take is the storage model's (``storage_model.py``), which runs them on the
broker's timer when the modelled time is up.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from broker.remote.remote_log_segment_metadata import RemoteLogSegmentMetadata


class RemoteStorageException(Exception):
    """Kafka's RemoteStorageException: the remote tier failed an operation."""


class RemoteResourceNotFoundException(RemoteStorageException):
    """Kafka's RemoteResourceNotFoundException: no such segment or index."""


class IndexType(StrEnum):
    """Kafka's RemoteStorageManager.IndexType (the ones minikafka keeps)."""

    OFFSET = "index"
    TIMESTAMP = "timeindex"
    PRODUCER_SNAPSHOT = "snapshot"
    LEADER_EPOCH = "leader_epoch_checkpoint"
    TRANSACTION = "txnindex"


@dataclass(frozen=True, slots=True)
class LogSegmentData:
    """What a copy hands over (Kafka's LogSegmentData): the segment and its companions."""

    log_segment: bytes
    offset_index: bytes
    time_index: bytes
    leader_epoch_index: bytes
    producer_snapshot: bytes
    transaction_index: bytes = b""

    @property
    def size(self) -> int:
        return (
            len(self.log_segment)
            + len(self.offset_index)
            + len(self.time_index)
            + len(self.leader_epoch_index)
            + len(self.producer_snapshot)
            + len(self.transaction_index)
        )


class RemoteStorageManager(Protocol):
    """Kafka's interface (org.apache.kafka.server.log.remote.storage)."""

    def copy_log_segment_data(
        self, metadata: RemoteLogSegmentMetadata, data: LogSegmentData
    ) -> None: ...

    def fetch_log_segment(
        self, metadata: RemoteLogSegmentMetadata, start_position: int, end_position: int = -1
    ) -> bytes: ...

    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> bytes: ...

    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None: ...
