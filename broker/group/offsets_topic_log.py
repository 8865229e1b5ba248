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

Reads are the load of a partition this broker has just become the leader of: its log
from the start, in chunks.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from broker.cluster_metadata import OFFSETS_TOPIC
from broker.group.group_log import AppendCallback, KeyValue
from broker.purgatories import ParkedRequest
from broker.replica.replica_manager import ReplicaManager
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
    ) -> None:
        tp = (OFFSETS_TOPIC, partition)
        batch = build_record_batch(
            [(key, value, []) for key, value in records], timestamp_ms=self._clock.now_ms()
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
        )

    def read_log(self, partition: int) -> list[KeyValue] | None:
        replica = self._replica_manager.online_partition((OFFSETS_TOPIC, partition))
        if replica is None:
            return None
        records: list[KeyValue] = []
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


def _records_of(chunk: bytes) -> list[KeyValue]:
    out: list[KeyValue] = []
    view = memoryview(chunk)
    for position, header in iter_batches(chunk, allow_partial_tail=True):
        batch = view[position : position + header.size]
        for record in iter_records(batch):
            if record.key is not None:
                out.append((bytes(record.key), record.value))
    return out
