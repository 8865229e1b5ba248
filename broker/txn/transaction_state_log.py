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
from the start, in chunks of ``transaction.state.log.load.buffer.size``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.purgatories import ParkedRequest
from broker.replica.append_origin import AppendOrigin
from broker.replica.replica_manager import ReplicaManager
from broker.txn.transaction_log import TRANSACTION_STATE_TOPIC_NAME, AppendCallback, KeyValue
from protocol.record_batch import build_record_batch, iter_batches, iter_records
from purgatory import Clock

if TYPE_CHECKING:
    from broker.replica.delayed_produce import ProduceStatuses

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

    def read_log(self, partition: int) -> list[KeyValue] | None:
        replica = self._replica_manager.online_partition((TRANSACTION_STATE_TOPIC_NAME, partition))
        if replica is None:
            return None
        records: list[KeyValue] = []
        offset = replica.log_start_offset
        end = replica.log_end_offset
        while offset < end:
            chunk = replica.log.read(offset, self._load_buffer_size, max_offset=end)
            if not chunk:
                break
            view = memoryview(chunk)
            for position, header in iter_batches(chunk, allow_partial_tail=True):
                offset = header.last_offset + 1
                for record in iter_records(view[position : position + header.size]):
                    if record.key is not None:
                        value = None if record.value is None else bytes(record.value)
                        records.append((bytes(record.key), value))
        return records
