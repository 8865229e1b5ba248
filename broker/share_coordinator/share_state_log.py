"""``__share_group_state`` through the replica manager: the share coordinator's log.

Appends are acks=all through ``ReplicaManager.append_records`` as the coordinator
(``AppendOrigin.COORDINATOR``), within ``share.coordinator.write.timeout.ms``: a write
is answered once the partition's in-sync replicas have it, so it survives the loss of
its leader. Reads are a load: the partition from its log start to the end it had when
the load began, ``share.coordinator.load.buffer.size`` bytes a read; a batch that does
not decode is skipped with a warning.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Protocol

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import SHARE_GROUP_STATE_TOPIC
from broker.coordinator.coordinator_loader import read_log_batches
from broker.log.cleaner_batch import iter_key_values
from broker.replica.append_origin import AppendOrigin
from broker.replica.replica_manager import ReplicaManager
from protocol.record_batch import CorruptRecordError, RecordBatchHeader
from protocol.record_builder import build_record_batch
from purgatory import Clock

if TYPE_CHECKING:
    from broker.replica.delayed_produce import ProduceStatuses

log = logging.getLogger("broker.share_coordinator")

KeyValue = tuple[bytes, bytes | None]


class ShareStateLog(Protocol):
    """What the share coordinator needs of its log (tests hand in one in memory)."""

    def append(
        self, partition: int, records: list[KeyValue], on_done: Callable[[ErrorCode], None]
    ) -> None: ...

    def open_log(self, partition: int) -> Iterator[list[KeyValue]] | None: ...


class ShareStateTopicLog:
    """The share coordinator's appends to and loads from ``__share_group_state``."""

    def __init__(
        self,
        replica_manager: ReplicaManager,
        clock: Clock,
        write_timeout_ms: int,
        load_buffer_size: int,
    ) -> None:
        self._replica_manager = replica_manager
        self._clock = clock
        self._write_timeout_ms = write_timeout_ms
        self._load_buffer_size = max(load_buffer_size, 1024)

    def append(
        self, partition: int, records: list[KeyValue], on_done: Callable[[ErrorCode], None]
    ) -> None:
        tp = (SHARE_GROUP_STATE_TOPIC, partition)
        batch = build_record_batch(
            [(key, value, []) for key, value in records], timestamp_ms=self._clock.now_ms()
        )

        def respond(statuses: ProduceStatuses) -> None:
            on_done(statuses[tp].result.error)

        self._replica_manager.append_records(
            self._write_timeout_ms, -1, {tp: batch}, respond, None, origin=AppendOrigin.COORDINATOR
        )

    def open_log(self, partition: int) -> Iterator[list[KeyValue]] | None:
        replica = self._replica_manager.online_partition((SHARE_GROUP_STATE_TOPIC, partition))
        if replica is None:
            return None
        batches = read_log_batches(replica.log, self._load_buffer_size)
        return (_records_of(partition, header, batch) for header, batch in batches)


def _records_of(partition: int, header: RecordBatchHeader, batch: bytes) -> list[KeyValue]:
    if header.is_control:
        return []
    try:
        return [(k, v) for k, v in iter_key_values(batch, header) if k is not None]
    except CorruptRecordError as exc:
        log.warning(
            "Skipping a batch of %s-%d at offset %d that does not decode: %s",
            SHARE_GROUP_STATE_TOPIC,
            partition,
            header.base_offset,
            exc,
        )
        return []
