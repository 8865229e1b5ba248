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
from the start, in chunks; transactional records and COMMIT/ABORT markers are handed
back as such (``TxnRecord``, ``TxnMarker``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from broker.cluster_metadata import OFFSETS_TOPIC
from broker.group.group_log import AppendCallback, KeyValue, LogEntry, TxnMarker, TxnRecord
from broker.purgatories import ParkedRequest
from broker.replica.append_origin import AppendOrigin
from broker.replica.replica_manager import ReplicaManager
from protocol.control_batch import parse_control_batch
from protocol.record_batch import build_record_batch, iter_batches, iter_records
from purgatory import Clock

if TYPE_CHECKING:
    from broker.replica.delayed_produce import ProduceStatuses

log = logging.getLogger("broker.group")

_LOAD_CHUNK_BYTES = 4 * 1024 * 1024


class OffsetsTopicLog:
    """``GroupLog`` writing to and reading from this broker's ``__consumer_offsets``."""

    def __init__(
        self,
        replica_manager: ReplicaManager,
        clock: Clock,
        commit_timeout_ms: int,
        commit_required_acks: int,
    ) -> None:
        self._replica_manager = replica_manager
        self._clock = clock
        self._commit_timeout_ms = commit_timeout_ms
        self._commit_required_acks = commit_required_acks

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

    def read_log(self, partition: int) -> list[LogEntry] | None:
        replica = self._replica_manager.online_partition((OFFSETS_TOPIC, partition))
        if replica is None:
            return None
        records: list[LogEntry] = []
        offset = replica.log_start_offset
        end = replica.log_end_offset
        while offset < end:
            chunk = replica.log.read(offset, _LOAD_CHUNK_BYTES, max_offset=end)
            if not chunk:
                break
            for _position, header in iter_batches(chunk, allow_partial_tail=True):
                offset = header.last_offset + 1
            records.extend(_records_of(chunk))
        return records


def _records_of(chunk: bytes) -> list[LogEntry]:
    out: list[LogEntry] = []
    view = memoryview(chunk)
    for position, header in iter_batches(chunk, allow_partial_tail=True):
        batch = view[position : position + header.size]
        for record in iter_records(batch):
            if record.key is None:
                continue
            key = bytes(record.key)
            if header.is_control:
                marker = parse_control_batch(batch)
                if marker is not None:
                    out.append(TxnMarker(header.producer_id, marker.is_commit))
                break  # one control record per batch
            elif header.is_transactional:
                out.append(TxnRecord(header.producer_id, key, record.value))
            else:
                kv: KeyValue = (key, record.value)
                out.append(kv)
    return out
