"""The broker's :class:`~broker.txn.transaction_log.TransactionLog`: ``__transaction_state``
partitions through the replica manager.

Appends are Kafka's ``appendTransactionToLog``: one record batch to the id's partition,
acks=all (``TransactionLog.EnforcedRequiredAcks``), written as the coordinator
(``AppendOrigin.COORDINATOR``) through ``ReplicaManager.append_records``, so the append
waits in the Produce purgatory until the partition's in-sync replicas have it (at most
the transaction's timeout, as in Kafka). The request the append serves (InitProducerId,
AddPartitionsToTxn, AddOffsetsToTxn, EndTxn) is handed along as the ``ParkedRequest``:
the replica manager records that it waits in the Produce purgatory, and the
DelayedProduce how it left. Appends no client waits for (completions after the markers,
tombstones) have none.

Reads are the load of a partition this broker has just become the leader of: its log
from the start up to the end it had when the load began, in chunks of
``transaction.state.log.load.buffer.size``, one list of key/values per batch, read when
the load gets there (``coordinator_loader.read_log_batches``). A batch that does not
decode is skipped with a warning, as a record that does not is (``decode_all``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING

from broker.coordinator.coordinator_loader import read_log_batches
from broker.log.cleaner_batch import iter_key_values
from broker.replica.append_origin import AppendOrigin
from broker.replica.replica_manager import ReplicaManager
from broker.server.purgatories import ParkedRequest
from broker.txn.transaction_log import TRANSACTION_STATE_TOPIC_NAME, AppendCallback, KeyValue
from protocol.record_batch import CorruptRecordError, RecordBatchHeader
from protocol.record_builder import build_record_batch
from purgatory import Clock

if TYPE_CHECKING:
    from broker.replica.delayed_produce import ProduceStatuses

log = logging.getLogger("broker.txn")

REQUIRED_ACKS = -1


class TransactionStateTopicLog:
    """``TransactionLog`` writing to and reading from this broker's ``__transaction_state``."""

    def __init__(
        self, replica_manager: ReplicaManager, clock: Clock, load_buffer_size: int
    ) -> None:
        self._replica_manager = replica_manager
        self._clock = clock
        self._load_buffer_size = max(load_buffer_size, 1024)

    def append_to_log(
        self,
        partition: int,
        records: list[KeyValue],
        timeout_ms: int,
        on_done: AppendCallback,
        parked_request: ParkedRequest | None = None,
    ) -> None:
        tp = (TRANSACTION_STATE_TOPIC_NAME, partition)
        batch = build_record_batch(
            [(key, value, []) for key, value in records], timestamp_ms=self._clock.now_ms()
        )

        def respond(statuses: ProduceStatuses) -> None:
            on_done(statuses[tp].result.error)

        self._replica_manager.append_records(
            timeout_ms,
            REQUIRED_ACKS,
            {tp: batch},
            respond,
            parked_request,
            origin=AppendOrigin.COORDINATOR,
        )

    def open_log(self, partition: int) -> Iterator[list[KeyValue]] | None:
        replica = self._replica_manager.online_partition((TRANSACTION_STATE_TOPIC_NAME, partition))
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
            TRANSACTION_STATE_TOPIC_NAME,
            partition,
            header.base_offset,
            exc,
        )
        return []
