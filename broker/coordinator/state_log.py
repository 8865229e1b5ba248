"""A coordinator's internal topic through the replica manager (Kafka's
``CoordinatorPartitionWriter`` and ``CoordinatorLoaderImpl``, over one topic).

``__consumer_offsets``, ``__transaction_state`` and ``__share_group_state`` are each a
:class:`CoordinatorStateLog`: the group, transaction and share coordinators never touch
a log themselves, they hand key/value records to ``append_to_log`` naming the topic's
partition, and read the partition back with ``open_log`` when this broker becomes its
leader. What differs between the three is data, given to the constructor: the topic,
the acks and the timeout of an append, the load buffer, and what a batch reads back as
(``read_entries``).

Appends are Kafka's ``appendForGroup`` / ``appendTransactionToLog`` / the share
coordinator's write: one record batch to the partition through
``ReplicaManager.append_records``, written as the coordinator
(``AppendOrigin.COORDINATOR``: the log checks a producer's epoch, not its sequence),
with ``required_acks`` (acks=all, or ``offsets.commit.required.acks``) within
``timeout_ms`` (``offsets.commit.timeout.ms``, ``share.coordinator.write.timeout.ms``,
or the transaction's own timeout given with the append). So the append waits in the
Produce purgatory until the partition's in-sync replicas have it, and a write is
acknowledged only once it survives the loss of its leader. ``on_done`` is called once
with the append's own error (NONE, NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT,
NOT_LEADER_OR_FOLLOWER, ...), possibly before ``append_to_log`` returns. The request
an append serves is handed along as the ``ParkedRequest``: the replica manager records
that it waits in the Produce purgatory, and the DelayedProduce how it left. Without
``on_done`` nobody waits: the batch is written on the leader (acks=1), a failure only
logged, as Kafka writes its cleanup tombstones. With ``producer`` (id, epoch) the
records are one transactional batch of that producer (a TxnOffsetCommit's), pending
until its transaction's marker.

Reads are the load of a partition: its log from the start up to the end it had when
the load began, ``load_buffer_size`` bytes a read (``coordinator_loader.
read_log_batches``), one list of entries per batch, read when the load gets there;
None when this broker has no online replica of the partition. A batch that does not
decode is skipped with a warning. :func:`plain_records` reads a batch as its
key/values (control batches are skipped); :func:`transactional_entries`, for the
offsets topic, hands transactional records and COMMIT/ABORT markers back as
:class:`TxnRecord` and :class:`TxnMarker`.

Where we differ from Kafka: one writer and loader per topic rather than Kafka's
generic runtime with its event queue and per-partition state machines; the
coordinators keep their own in-memory state and replay (``group/``, ``txn/``,
``share_coordinator/``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from kio.schema.errors import ErrorCode

from broker.coordinator.coordinator_loader import read_log_batches
from broker.log.cleaner_batch import iter_key_values
from broker.replica.append_origin import AppendOrigin
from broker.replica.replica_manager import ReplicaManager
from broker.server.purgatories import ParkedRequest
from protocol.control_batch import parse_control_batch
from protocol.record_batch import CorruptRecordError, RecordBatchHeader
from protocol.record_builder import build_record_batch
from purgatory import Clock

if TYPE_CHECKING:
    from broker.replica.delayed_produce import ProduceStatuses

KeyValue = tuple[bytes, bytes | None]
AppendCallback = Callable[[ErrorCode], None]


@dataclass(frozen=True, slots=True)
class TxnRecord:
    """A record written by a transaction (a TxnOffsetCommit): pending until its marker."""

    producer_id: int
    key: bytes
    value: bytes | None


@dataclass(frozen=True, slots=True)
class TxnMarker:
    """A transaction's COMMIT or ABORT marker."""

    producer_id: int
    commit: bool


LogEntry = KeyValue | TxnRecord | TxnMarker
E = TypeVar("E")


class CoordinatorLog(Protocol[E]):
    """Where a coordinator's records go, and where it reads them back (the broker's is a
    :class:`CoordinatorStateLog`; unit tests hand in one in memory)."""

    def append_to_log(
        self,
        partition: int,
        records: list[KeyValue],
        on_done: AppendCallback | None = None,
        parked_request: ParkedRequest | None = None,
        *,
        timeout_ms: int | None = None,
        producer: tuple[int, int] | None = None,
    ) -> None: ...

    def open_log(self, partition: int) -> Iterator[list[E]] | None: ...


def plain_records(header: RecordBatchHeader, batch: bytes) -> list[KeyValue]:
    """A batch's key/values; nothing for a control batch."""
    if header.is_control:
        return []
    return [(k, v) for k, v in iter_key_values(batch, header) if k is not None]


def transactional_entries(header: RecordBatchHeader, batch: bytes) -> list[LogEntry]:
    """A batch's entries: a transaction's records and markers as such."""
    if header.is_control:
        marker = parse_control_batch(batch)
        return [] if marker is None else [TxnMarker(header.producer_id, marker.is_commit)]
    records = iter_key_values(batch, header)
    if header.is_transactional:
        return [TxnRecord(header.producer_id, k, v) for k, v in records if k is not None]
    return [(k, v) for k, v in records if k is not None]


class CoordinatorStateLog(Generic[E]):
    """A coordinator's appends to and loads from this broker's replicas of ``topic``."""

    def __init__(
        self,
        topic: str,
        replica_manager: ReplicaManager,
        clock: Clock,
        *,
        required_acks: int,
        timeout_ms: int,
        load_buffer_size: int,
        read_entries: Callable[[RecordBatchHeader, bytes], list[E]],
        logger: logging.Logger,
    ) -> None:
        self.topic = topic
        self._replica_manager = replica_manager
        self._clock = clock
        self._required_acks = required_acks
        self._timeout_ms = timeout_ms
        self._load_buffer_size = load_buffer_size
        self._read_entries = read_entries
        self._log = logger

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
        tp = (self.topic, partition)
        entries: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]] = [
            (key, value, []) for key, value in records
        ]
        if producer is None:
            batch = build_record_batch(entries, timestamp_ms=self._clock.now_ms())
        else:
            batch = build_record_batch(
                entries,
                timestamp_ms=self._clock.now_ms(),
                producer_id=producer[0],
                producer_epoch=producer[1],
                base_sequence=0,
                is_transactional=True,
            )
        if on_done is None:
            result = self._replica_manager.append_to_leader(tp, batch, required_acks=1)
            if result.error is not ErrorCode.none:
                self._log.warning(
                    "append to %s-%d failed: %s", self.topic, partition, result.error.name
                )
            return
        done = on_done

        def respond(statuses: ProduceStatuses) -> None:
            done(statuses[tp].result.error)

        self._replica_manager.append_records(
            self._timeout_ms if timeout_ms is None else timeout_ms,
            self._required_acks,
            {tp: batch},
            respond,
            parked_request,
            origin=AppendOrigin.COORDINATOR,
        )

    def open_log(self, partition: int) -> Iterator[list[E]] | None:
        replica = self._replica_manager.online_partition((self.topic, partition))
        if replica is None:
            return None
        batches = read_log_batches(replica.log, self._load_buffer_size)
        return (self._entries_of(partition, header, batch) for header, batch in batches)

    def _entries_of(self, partition: int, header: RecordBatchHeader, batch: bytes) -> list[E]:
        try:
            return self._read_entries(header, batch)
        except CorruptRecordError as exc:
            self._log.warning(
                "Skipping a batch of %s-%d at offset %d that does not decode: %s",
                self.topic,
                partition,
                header.base_offset,
                exc,
            )
            return []
