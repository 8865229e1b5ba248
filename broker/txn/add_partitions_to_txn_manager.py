"""Kafka's ``AddPartitionsToTxnManager``: a partition leader asks the transaction
coordinator to add (or verify) the partitions a transactional write is about to touch.

With transactions v2 (KIP-890 part 2) a producer no longer sends AddPartitionsToTxn: its
Produce v12+ (or TxnOffsetCommit v5+) reaches the partition leader, which asks the
transactional id's coordinator with an AddPartitionsToTxn v5 of its own (``VerifyOnly``
false: add them) and appends only once the coordinator has them in the transaction. The
version of the client's request says what is asked and how errors are answered (Kafka's
``TransactionSupportedOperation``): ADD_PARTITION for Produce v12+ / TxnOffsetCommit v5+,
GENERIC_ERROR_SUPPORTED for Produce v11 / TxnOffsetCommit v4 (TRANSACTION_ABORTABLE is
answered as is), DEFAULT_ERROR below (TRANSACTION_ABORTABLE becomes INVALID_TXN_STATE).

As Kafka's: one request in flight per coordinator broker, the transactions queued
meanwhile go in the next one (one entry per transactional id: a newer epoch replaces an
older one, which is answered INVALID_PRODUCER_EPOCH; the same epoch answers the older
NETWORK_EXCEPTION, a retry; an older one is refused INVALID_PRODUCER_EPOCH); an unknown
coordinator is COORDINATOR_NOT_AVAILABLE, a lost connection NETWORK_EXCEPTION for every
partition, a top-level CLUSTER_AUTHORIZATION_FAILED INVALID_TXN_STATE (a client must not
see it), a partition's PRODUCER_FENCED INVALID_PRODUCER_EPOCH. The callback gets the
partitions that were *not* added or verified, with their error; the caller
(``broker/handlers/produce.py``) turns the coordinator's retriable errors into
NOT_ENOUGH_REPLICAS as Kafka's ``ReplicaManager`` does.

The request goes over TCP even to this broker itself (as Kafka, and as the marker
channel does), on a ``LeaderEndpoint`` per coordinator broker.

Where we differ from Kafka: only the ADD_PARTITION operation is asked for; the
verification of Produce v11 and below (``transaction.partition.verification.enable``)
is not done (see ``producer_state.py``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import BrokerEndpoint, ClusterMetadata
from broker.security.sasl_client import InterBrokerClient
from broker.txn.inter_broker_send_thread import InterBrokerSendThread
from protocol.builders import request_builder

log = logging.getLogger("broker.txn")

E = ErrorCode
TopicPartition = tuple[str, int]
#: The partitions not added or verified, each with its error (empty: all added).
AppendCallback = Callable[[dict[TopicPartition, ErrorCode]], None]
CoordinatorLookup = Callable[[str], tuple[ErrorCode, BrokerEndpoint | None]]

ADD_PARTITIONS_TO_TXN = 24
ADD_PARTITIONS_TO_TXN_VERSION = 5


class TransactionSupportedOperation(Enum):
    """What a client's request version allows (Kafka's enum of the same name)."""

    DEFAULT_ERROR = "defaultError"
    GENERIC_ERROR_SUPPORTED = "genericErrorSupported"
    ADD_PARTITION = "addPartition"

    @property
    def supports_epoch_bump(self) -> bool:
        return self is TransactionSupportedOperation.ADD_PARTITION


def produce_request_version_to_operation(version: int) -> TransactionSupportedOperation:
    if version > 11:
        return TransactionSupportedOperation.ADD_PARTITION
    if version > 10:
        return TransactionSupportedOperation.GENERIC_ERROR_SUPPORTED
    return TransactionSupportedOperation.DEFAULT_ERROR


def txn_offset_commit_request_version_to_operation(version: int) -> TransactionSupportedOperation:
    if version > 4:
        return TransactionSupportedOperation.ADD_PARTITION
    if version > 3:
        return TransactionSupportedOperation.GENERIC_ERROR_SUPPORTED
    return TransactionSupportedOperation.DEFAULT_ERROR


@dataclass(slots=True)
class _TxnData:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: frozenset[TopicPartition]
    callback: AppendCallback
    operation: TransactionSupportedOperation


class AddPartitionsToTxnManager:
    """See the module docstring. A broker component (``start``/``stop``)."""

    def __init__(
        self,
        broker_id: int,
        metadata: ClusterMetadata,
        coordinator_of: CoordinatorLookup,
        security: InterBrokerClient | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.metadata = metadata
        self.security = security
        self._coordinator_of = coordinator_of
        self._pending: dict[int, dict[str, _TxnData]] = {}
        self._threads: dict[int, _SendThread] = {}
        self._running = False
        #: Partitions the coordinators did not add or verify (Kafka's
        #: VerificationFailureRate, as a count).
        self.verification_failures = 0

    async def start(self) -> None:
        self._running = True

    async def stop(self) -> None:
        self._running = False
        threads, self._threads = self._threads, {}
        for thread in threads.values():
            await thread.stop()
        for queue in self._pending.values():
            for data in queue.values():
                data.callback(dict.fromkeys(data.partitions, E.network_exception))
        self._pending.clear()

    def add_or_verify_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: frozenset[TopicPartition],
        callback: AppendCallback,
        operation: TransactionSupportedOperation,
    ) -> None:
        """Ask the coordinator of ``transactional_id`` to add ``partitions``; ``callback``
        gets the ones it did not, with their errors, once it answers."""
        _error, node = self._coordinator_of(transactional_id)
        if node is None or not self._running:
            callback(dict.fromkeys(partitions, E.coordinator_not_available))
            return
        data = _TxnData(
            transactional_id, producer_id, producer_epoch, partitions, callback, operation
        )
        queue = self._pending.setdefault(node.broker_id, {})
        existing = queue.get(transactional_id)
        if existing is not None:
            if existing.producer_epoch > producer_epoch:
                # The incoming request is fenced: it does not replace the queued one.
                callback(dict.fromkeys(partitions, E.invalid_producer_epoch))
                return
            superseded = (
                E.network_exception
                if existing.producer_epoch == producer_epoch
                else E.invalid_producer_epoch
            )
            existing.callback(dict.fromkeys(existing.partitions, superseded))
        queue[transactional_id] = data
        thread = self._threads.get(node.broker_id)
        if thread is None:
            thread = self._threads[node.broker_id] = _SendThread(self, node.broker_id)
        thread.wake()

    def drain(self, broker_id: int) -> list[_TxnData]:
        return list(self._pending.pop(broker_id, {}).values())

    def on_response(self, batch: list[_TxnData], response: Any | None) -> None:
        """The coordinator's answer to ``batch`` (None: the connection failed)."""
        if response is None:
            for data in batch:
                self._complete(data, dict.fromkeys(data.partitions, E.network_exception))
            return
        if response.error_code is not E.none:
            log.error("AddPartitionsToTxnRequest returned with error %s.", response.error_code.name)
            error = response.error_code
            if error is E.cluster_authorization_failed:
                error = E.invalid_txn_state
            for data in batch:
                self._complete(data, dict.fromkeys(data.partitions, error))
            return
        by_id = {data.transactional_id: data for data in batch}
        for result in response.results_by_transaction:
            found = by_id.pop(result.transactional_id, None)
            if found is None:
                continue
            data = found
            unverified: dict[TopicPartition, ErrorCode] = {}
            for topic in result.topic_results:
                for p in topic.results_by_partition:
                    error = p.partition_error_code
                    if error is E.none:
                        continue
                    if error is E.producer_fenced:
                        error = E.invalid_producer_epoch
                    elif (
                        error is E.transaction_abortable
                        and data.operation is TransactionSupportedOperation.DEFAULT_ERROR
                    ):
                        error = E.invalid_txn_state
                    unverified[(topic.name, int(p.partition_index))] = error
            self._complete(data, unverified)
        for left in by_id.values():  # not answered: as a lost answer
            self._complete(left, dict.fromkeys(left.partitions, E.network_exception))

    def _complete(self, data: _TxnData, unverified: dict[TopicPartition, ErrorCode]) -> None:
        self.verification_failures += len(unverified)
        try:
            data.callback(unverified)
        except Exception:
            log.exception("Completing the verification of %s", data.transactional_id)


def add_partitions_request(batch: list[_TxnData]) -> Any:
    """One AddPartitionsToTxn v5 with every transaction of ``batch``."""
    b = request_builder(ADD_PARTITIONS_TO_TXN, ADD_PARTITIONS_TO_TXN_VERSION)
    transactions = []
    for data in batch:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(data.partitions):
            by_topic.setdefault(topic, []).append(partition)
        transactions.append(
            b.AddPartitionsToTxnTransaction(
                transactional_id=data.transactional_id,
                producer_id=data.producer_id,
                producer_epoch=data.producer_epoch,
                verify_only=not data.operation.supports_epoch_bump,
                topics=tuple(
                    b.AddPartitionsToTxnTopic(name=name, partitions=tuple(parts))
                    for name, parts in by_topic.items()
                ),
            )
        )
    return b.AddPartitionsToTxnRequest(transactions=tuple(transactions))


class _SendThread(InterBrokerSendThread):
    """One coordinator broker's connection and the task that sends to it, one request
    at a time (Kafka's ``inflightNodes``)."""

    def __init__(self, manager: AddPartitionsToTxnManager, broker_id: int) -> None:
        self._manager = manager
        super().__init__(
            broker_id,
            manager.metadata,
            manager.security,
            f"add-partitions-to-txn-{manager.broker_id}",
            f"AddPartitionsToTxnSenderThread-{manager.broker_id}-{broker_id}",
        )

    async def _run(self) -> None:
        manager = self._manager
        while True:
            await self._wake.wait()
            self._wake.clear()
            batch = manager.drain(self.broker_id)
            if not batch:
                continue
            response: Any | None
            try:
                response = await self._connection().request(
                    ADD_PARTITIONS_TO_TXN,
                    ADD_PARTITIONS_TO_TXN_VERSION,
                    add_partitions_request(batch),
                )
            except asyncio.CancelledError:
                for data in batch:
                    data.callback(dict.fromkeys(data.partitions, E.network_exception))
                raise
            except Exception as exc:
                log.warning(
                    "AddPartitionsToTxnRequest failed for node %d with a network exception: %s",
                    self.broker_id,
                    exc,
                )
                self._close()
                response = None
            manager.on_response(batch, response)
