"""The broker's :class:`~broker.group.group_log.GroupLog`: ``__consumer_offsets`` partitions
through the replica manager.

Appends are Kafka's ``appendForGroup``: one record batch to the group's partition, with
``offsets.commit.required.acks`` (acks=all) and ``offsets.commit.timeout.ms`` through
``ReplicaManager.append_records``, so the append waits in the Produce purgatory until
the partition's in-sync replicas have it, and a commit is acknowledged only once it
survives the loss of its leader. The request the append serves (an OffsetCommit, the
leader's SyncGroup, a static member's JoinGroup) is handed along as the
``ParkedRequest``: the replica manager records that it waits in the Produce purgatory,
and the DelayedProduce how it left. Tombstones (no callback) are written on the leader
and waited for by no one, as Kafka's cleanup does.

A TxnOffsetCommit's records (``producer`` given) are one transactional batch of that
producer and epoch, written as the coordinator (``AppendOrigin.COORDINATOR``: the log
checks the epoch, not the sequence, as Kafka's), so they stay pending, and out of a
read_committed reader's view, until the transaction's marker.

Reads are the load of a partition this broker has just become the leader of: its log
from the start up to the end it had when the load began, ``offsets.load.buffer.size``
bytes a read, one list of entries per batch, read when the load gets there
(``coordinator_loader.read_log_batches``); transactional records and COMMIT/ABORT
markers are handed back as such (``TxnRecord``, ``TxnMarker``). A batch that does not
decode is skipped with a warning, as a record that does not is (``decode_record``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import OFFSETS_TOPIC
from broker.coordinator.coordinator_loader import read_log_batches
from broker.group.group_log import AppendCallback, KeyValue, LogEntry, TxnMarker, TxnRecord
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

log = logging.getLogger("broker.group")


class OffsetsTopicLog:
    """``GroupLog`` writing to and reading from this broker's ``__consumer_offsets``."""

    def __init__(
        self,
        replica_manager: ReplicaManager,
        clock: Clock,
        commit_timeout_ms: int,
        commit_required_acks: int,
        load_buffer_size: int = 5242880,
    ) -> None:
        self._replica_manager = replica_manager
        self._clock = clock
        self._commit_timeout_ms = commit_timeout_ms
        self._commit_required_acks = commit_required_acks
        self._load_buffer_size = load_buffer_size

    def append_to_log(
        self,
        partition: int,
        records: list[KeyValue],
        on_done: AppendCallback | None = None,
        parked_request: ParkedRequest | None = None,
        *,
        producer: tuple[int, int] | None = None,
    ) -> None:
        tp = (OFFSETS_TOPIC, partition)
        if producer is None:
            batch = build_record_batch(
                [(key, value, []) for key, value in records], timestamp_ms=self._clock.now_ms()
            )
        else:
            batch = build_record_batch(
                [(key, value, []) for key, value in records],
                timestamp_ms=self._clock.now_ms(),
                producer_id=producer[0],
                producer_epoch=producer[1],
                base_sequence=0,
                is_transactional=True,
            )
        if on_done is None:
            result = self._replica_manager.append_to_leader(tp, batch, required_acks=1)
            if result.error is not ErrorCode.none:
                log.warning(
                    "append to %s-%d failed: %s", OFFSETS_TOPIC, partition, result.error.name
                )
            return

        def respond(statuses: ProduceStatuses) -> None:
            on_done(statuses[tp].result.error)

        self._replica_manager.append_records(
            self._commit_timeout_ms,
            self._commit_required_acks,
            {tp: batch},
            respond,
            parked_request,
            origin=AppendOrigin.COORDINATOR,
        )

    def open_log(self, partition: int) -> Iterator[list[LogEntry]] | None:
        replica = self._replica_manager.online_partition((OFFSETS_TOPIC, partition))
        if replica is None:
            return None
        batches = read_log_batches(replica.log, self._load_buffer_size)
        return (_entries_of(partition, header, batch) for header, batch in batches)


def _entries_of(partition: int, header: RecordBatchHeader, batch: bytes) -> list[LogEntry]:
    try:
        if header.is_control:
            marker = parse_control_batch(batch)
            return [] if marker is None else [TxnMarker(header.producer_id, marker.is_commit)]
        records = iter_key_values(batch, header)
        if header.is_transactional:
            return [TxnRecord(header.producer_id, k, v) for k, v in records if k is not None]
        return [(k, v) for k, v in records if k is not None]
    except CorruptRecordError as exc:
        log.warning(
            "Skipping a batch of %s-%d at offset %d that does not decode: %s",
            OFFSETS_TOPIC,
            partition,
            header.base_offset,
            exc,
        )
        return []
