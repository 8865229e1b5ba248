"""The values of a share partition's in-flight state (KIP-932): Kafka's ``RecordState``,
``AcknowledgeType``, ``AcquiredRecords``, acknowledgement batches and the settings a
share partition runs with. ``share_partition.py`` is the state machine over them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class RecordState(IntEnum):
    """Kafka's RecordState, with its ids (ARCHIVING: Kafka 4.4's, KIP-1191)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVING = 3
    ARCHIVED = 4


# The kinds of fetched batch ``SharePartition.acquire`` is handed.
DATA = 0
CONTROL = 1  # a transaction marker
ABORTED = 2  # an aborted transaction's records, read by a read_committed share group


class AcknowledgeType(IntEnum):
    """The acknowledge types of ShareFetch/ShareAcknowledge (0 GAP; 4 RENEW from v2)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


@dataclass(frozen=True, slots=True)
class AcquiredRecords:
    """Kafka's AcquiredRecords: a run of offsets acquired with one delivery count."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class AcknowledgementBatch:
    """One acknowledgement batch of a request: an offset range and its type(s) — one
    type for the whole range, or one per offset."""

    first_offset: int
    last_offset: int
    acknowledge_types: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class SharePartitionConfig:
    record_lock_duration_ms: int = 30000  # group.share.record.lock.duration.ms
    delivery_count_limit: int = 5  # group.share.delivery.count.limit
    max_record_locks: int = 2000  # group.share.partition.max.record.locks
