"""The values of a share partition's in-flight state (KIP-932): Kafka's ``RecordState``,
``AcknowledgeType``, ``AcquiredRecords``, acknowledgement batches, the settings a share
partition runs with, an in-flight record and its acquisition lock. ``share_partition.py``
is the state machine over them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Protocol

from purgatory import TimerTask


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


class LockOwner(Protocol):
    """The share partition an acquisition lock releases its offsets on at expiry."""

    def _on_lock_expired(self, lock: AcquisitionLockTimerTask) -> None: ...


class AcquisitionLockTimerTask(TimerTask):
    """The acquisition lock of a run of offsets acquired together: ``held`` counts the
    offsets still ACQUIRED under it; at 0 it is cancelled, at its expiry it releases
    them."""

    __slots__ = ("expired", "first_offset", "held", "last_offset", "member_id", "share_partition")

    def __init__(
        self,
        share_partition: LockOwner,
        member_id: str,
        first_offset: int,
        last_offset: int,
        delay_ms: int,
    ) -> None:
        super().__init__(delay_ms)
        self.share_partition = share_partition
        self.member_id = member_id
        self.first_offset = first_offset
        self.last_offset = last_offset
        self.held = 0
        self.expired = False

    def run(self) -> None:
        self.expired = True
        self.share_partition._on_lock_expired(self)


class InFlightRecord:
    """One in-flight offset of a share partition: its state, delivery count, the member
    that holds it and its acquisition lock."""

    __slots__ = ("delivery_count", "lock", "member_id", "rollback", "state")

    def __init__(
        self,
        state: RecordState = RecordState.AVAILABLE,
        delivery_count: int = 0,
        member_id: str | None = None,
    ) -> None:
        self.state = state
        self.delivery_count = delivery_count
        self.member_id = member_id
        self.lock: AcquisitionLockTimerTask | None = None
        # the member that held it, while an acknowledgement's state write is out
        self.rollback: str | None = None
