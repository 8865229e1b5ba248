"""Kafka's ``TransactionMarkerChannelManager``: COMMIT/ABORT markers to partition leaders.

Once a transaction's PrepareCommit or PrepareAbort is in ``__transaction_state``, the
coordinator hands it here (``add_txn_markers_to_send``) with its completion prepared
(pending CompleteCommit/CompleteAbort). The manager groups the transaction's partitions
by their leader, queues one marker per leader, and a sender (``MarkerSender``: the
asyncio shell in ``marker_sender.py``, one TCP connection per destination broker)
drains each broker's queue into one WriteTxnMarkers request. Each answer comes back
through ``on_response``:

* NONE for a partition: the transaction no longer waits on it (``remove_partition``);
* NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS(_AFTER_APPEND),
  REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR, COORDINATOR_LOAD_IN_PROGRESS: the partition is
  queued again for its leader *now* (the metadata may have moved it), after the
  sender's backoff;
* PRODUCER_FENCED, INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED: a newer
  coordinator or epoch owns the transaction; this one stops sending its markers;
* UNSUPPORTED_FOR_MESSAGE_FORMAT: the partition cannot hold markers; skipped;
* a dropped connection: every marker of the request is queued again.

When the last partition is acknowledged the completion is written
(``append_transaction_to_log``), retried after ``RETRY_BACKOFF_MS`` on the scheduler
timer while the append answers COORDINATOR_NOT_AVAILABLE. Before acting on an answer
the manager checks that this broker still coordinates the transaction at the same
coordinator epoch, as Kafka does; a resigned partition's markers are dropped
(``remove_markers_for_txn_topic_partition``) and its new coordinator completes them
from the log.

Partitions whose leader is unknown (none elected, broker down) wait in
``markers_queue_for_unknown_broker`` and are tried again at every metadata change;
partitions of a topic deleted meanwhile are dropped from the transaction.

Everything here is synchronous and clock-injected (unit tests drive it with a fake
sender on ``ManualClock``); only the sender does IO.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import ClusterMetadata, TopicInfo
from broker.txn.transaction_config import TransactionConfig
from broker.txn.transaction_metadata import TopicPartition, TransactionMetadata, TxnTransitMetadata
from broker.txn.transaction_state_manager import TransactionStateManager
from purgatory import SystemTimer, TimerTask

log = logging.getLogger("broker.txn")

E = ErrorCode

RETRIABLE_MARKER_ERRORS = frozenset(
    {
        E.unknown_topic_or_partition,
        E.not_leader_or_follower,
        E.not_enough_replicas,
        E.not_enough_replicas_after_append,
        E.request_timed_out,
        E.kafka_storage_error,
        E.coordinator_load_in_progress,
    }
)
FENCING_MARKER_ERRORS = frozenset(
    {E.invalid_producer_epoch, E.producer_fenced, E.transaction_coordinator_fenced}
)


class MarkerSender(Protocol):
    """The IO side: told that broker ``broker_id`` has markers queued (it then calls
    ``drain`` and, with the answer, ``on_response``)."""

    def wake(self, broker_id: int) -> None: ...


@dataclass(slots=True)
class PendingCompleteTxn:
    """A transaction whose markers are being written, and its prepared completion."""

    transactional_id: str
    coordinator_epoch: int
    txn_metadata: TransactionMetadata
    new_metadata: TxnTransitMetadata


@dataclass(slots=True)
class TxnMarkerEntry:
    """One marker for one destination broker (Kafka's ``TxnIdAndMarkerEntry``)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    partitions: set[TopicPartition] = field(default_factory=set)
    #: The transaction's client transaction version (WriteTxnMarkers v2, KIP-1228).
    transaction_version: int = 0


# What one WriteTxnMarkers answer says: per producer id, per partition.
MarkerErrors = dict[int, dict[TopicPartition, ErrorCode]]


class _RetryCompletion(TimerTask):
    def __init__(self, manager: TransactionMarkerChannelManager, txn: PendingCompleteTxn) -> None:
        super().__init__(manager.config.retry_backoff_ms)
        self._manager = manager
        self._txn = txn

    def run(self) -> None:
        self._manager.retry_completion(self)

    @property
    def txn(self) -> PendingCompleteTxn:
        return self._txn


class TransactionMarkerChannelManager:
    """See the module docstring."""

    def __init__(
        self,
        broker_id: int,
        config: TransactionConfig,
        metadata: ClusterMetadata,
        state_manager: TransactionStateManager,
        scheduler_timer: SystemTimer,
    ) -> None:
        self.broker_id = broker_id
        self.config = config
        self._metadata = metadata
        self._state_manager = state_manager
        self._timer = scheduler_timer
        self._sender: MarkerSender | None = None
        self._queues: dict[int, list[TxnMarkerEntry]] = {}
        self.markers_queue_for_unknown_broker: list[TxnMarkerEntry] = []
        self.transactions_with_pending_markers: dict[str, PendingCompleteTxn] = {}
        self._retries: set[_RetryCompletion] = set()
        self.markers_sent = 0

    # ============================================================== lifecycle
    def start(self, sender: MarkerSender) -> None:
        self._sender = sender
        self._metadata.subscribe(self._on_metadata_change)

    def shutdown(self) -> None:
        self._metadata.unsubscribe(self._on_metadata_change)
        self._sender = None
        for retry in self._retries:
            retry.cancel()
        self._retries.clear()
        self._queues.clear()
        self.markers_queue_for_unknown_broker.clear()
        self.transactions_with_pending_markers.clear()

    def _on_metadata_change(self, _name: str, _topic: TopicInfo | None) -> None:
        """A leader may be known now: try the markers that had none again."""
        waiting, self.markers_queue_for_unknown_broker = self.markers_queue_for_unknown_broker, []
        for entry in waiting:
            if self._still_coordinated(entry) is not None:
                self._add_markers_to_broker_queue(entry, entry.partitions)

    # ================================================================ sending
    def add_txn_markers_to_send(
        self,
        coordinator_epoch: int,
        commit: bool,
        txn_metadata: TransactionMetadata,
        new_metadata: TxnTransitMetadata,
    ) -> None:
        """Write ``commit``/abort markers to every partition of the transaction, then
        ``new_metadata`` (its completion) to the log."""
        transactional_id = txn_metadata.transactional_id
        pending = PendingCompleteTxn(
            transactional_id, coordinator_epoch, txn_metadata, new_metadata
        )
        self.transactions_with_pending_markers[transactional_id] = pending
        entry = TxnMarkerEntry(
            transactional_id,
            txn_metadata.producer_id,
            txn_metadata.producer_epoch,
            commit,
            coordinator_epoch,
            transaction_version=txn_metadata.client_transaction_version,
        )
        self._add_markers_to_broker_queue(entry, set(txn_metadata.topic_partitions))
        self._maybe_write_txn_completion(transactional_id)

    def _add_markers_to_broker_queue(
        self, template: TxnMarkerEntry, partitions: Iterable[TopicPartition]
    ) -> None:
        by_broker: dict[int, set[TopicPartition]] = {}
        unknown: set[TopicPartition] = set()
        # Sorted: a set of (topic, partition) iterates in an order of the process' hash seed,
        # and the order here is the order the destinations' queues are filled and woken.
        for tp in sorted(partitions):
            state = self._metadata.partition_state(*tp)
            if state is None:
                # The topic is gone: nothing to mark (its data went with it).
                log.info(
                    "Partition %s-%d of transaction %s no longer exists; skipping its marker",
                    tp[0],
                    tp[1],
                    template.transactional_id,
                )
                pending = self.transactions_with_pending_markers.get(template.transactional_id)
                if pending is not None:
                    pending.txn_metadata.remove_partition(tp)
                continue
            endpoint = self._metadata.brokers.get(state.leader)
            if state.leader < 0 or endpoint is None or not endpoint.alive:
                unknown.add(tp)
            else:
                by_broker.setdefault(state.leader, set()).add(tp)
        if unknown:
            self.markers_queue_for_unknown_broker.append(self._copy(template, unknown))
        for broker_id, tps in by_broker.items():
            self._queues.setdefault(broker_id, []).append(self._copy(template, tps))
            if self._sender is not None:
                self._sender.wake(broker_id)
        if not by_broker and not unknown:
            self._maybe_write_txn_completion(template.transactional_id)

    @staticmethod
    def _copy(template: TxnMarkerEntry, partitions: set[TopicPartition]) -> TxnMarkerEntry:
        return TxnMarkerEntry(
            template.transactional_id,
            template.producer_id,
            template.producer_epoch,
            template.commit,
            template.coordinator_epoch,
            set(partitions),
            template.transaction_version,
        )

    def queued_brokers(self) -> list[int]:
        return [b for b, q in self._queues.items() if q]

    def drain(self, broker_id: int) -> list[TxnMarkerEntry]:
        """Every marker queued for ``broker_id``, one per producer (partitions merged):
        the markers of one WriteTxnMarkers request."""
        queued = self._queues.pop(broker_id, [])
        merged: dict[tuple[int, int, bool, int], TxnMarkerEntry] = {}
        for entry in queued:
            key = (entry.producer_id, entry.producer_epoch, entry.commit, entry.coordinator_epoch)
            existing = merged.get(key)
            if existing is None:
                merged[key] = entry
            else:
                existing.partitions |= entry.partitions
        self.markers_sent += len(merged)
        return list(merged.values())

    # =============================================================== answers
    def on_response(
        self, broker_id: int, entries: list[TxnMarkerEntry], errors: MarkerErrors | None
    ) -> bool:
        """The answer to the markers sent to ``broker_id`` (None: the connection dropped
        or timed out). Returns True when some partition is queued again (the sender
        backs off before its next request)."""
        retried = False
        for entry in entries:
            metadata = self._still_coordinated(entry)
            if metadata is None:
                continue
            if errors is None:
                log.debug(
                    "Connection to broker %d lost while writing markers of %s; retrying",
                    broker_id,
                    entry.transactional_id,
                )
                self._add_markers_to_broker_queue(entry, entry.partitions)
                retried = True
                continue
            answered = errors.get(entry.producer_id)
            if answered is None:
                raise RuntimeError(
                    f"WriteTxnMarkers response from broker {broker_id} has no result for "
                    f"producer {entry.producer_id}"
                )
            retry: set[TopicPartition] = set()
            abort_sending = False
            for tp in entry.partitions:
                error = answered.get(tp, E.unknown_server_error)
                if error is E.none:
                    metadata.remove_partition(tp)
                elif error in RETRIABLE_MARKER_ERRORS:
                    retry.add(tp)
                elif error in FENCING_MARKER_ERRORS:
                    log.info(
                        "Sending %s's transaction marker for partition %s-%d has permanently "
                        "failed with error %s with the current coordinator epoch %d; cancel "
                        "sending any more transaction markers %s to the brokers",
                        entry.transactional_id,
                        tp[0],
                        tp[1],
                        error.name,
                        entry.coordinator_epoch,
                        "COMMIT" if entry.commit else "ABORT",
                    )
                    abort_sending = True
                elif error is E.unsupported_for_message_format:
                    log.warning(
                        "Sending %s's transaction marker for partition %s-%d has permanently "
                        "failed with error %s; the marker is skipped",
                        entry.transactional_id,
                        tp[0],
                        tp[1],
                        error.name,
                    )
                    metadata.remove_partition(tp)
                else:
                    log.error(
                        "Unexpected error %s while sending txn marker for %s to %s-%d",
                        error.name,
                        entry.transactional_id,
                        tp[0],
                        tp[1],
                    )
                    retry.add(tp)
            if abort_sending:
                self._remove_markers_for_txn_id(entry.transactional_id)
                continue
            if retry:
                self._add_markers_to_broker_queue(entry, retry)
                retried = True
            else:
                self._maybe_write_txn_completion(entry.transactional_id)
        return retried

    def _still_coordinated(self, entry: TxnMarkerEntry) -> TransactionMetadata | None:
        """The transaction's metadata while this broker still coordinates it at the
        entry's coordinator epoch; else its markers are dropped and None returned."""
        error, found = self._state_manager.get_transaction_state(entry.transactional_id)
        if error is not E.none or found is None:
            log.info(
                "I am no longer the coordinator for %s (%s); cancel sending transaction "
                "markers to the brokers",
                entry.transactional_id,
                error.name,
            )
            self._remove_markers_for_txn_id(entry.transactional_id)
            return None
        if found.coordinator_epoch != entry.coordinator_epoch:
            log.info(
                "Transaction coordinator epoch for %s has changed from %d to %d; cancel "
                "sending transaction markers to the brokers",
                entry.transactional_id,
                entry.coordinator_epoch,
                found.coordinator_epoch,
            )
            self._remove_markers_for_txn_id(entry.transactional_id)
            return None
        return found.transaction_metadata

    # ============================================================= completion
    def _maybe_write_txn_completion(self, transactional_id: str) -> None:
        pending = self.transactions_with_pending_markers.get(transactional_id)
        if pending is None or pending.txn_metadata.topic_partitions:
            return
        del self.transactions_with_pending_markers[transactional_id]
        self._write_txn_completion(pending)

    def _write_txn_completion(self, pending: PendingCompleteTxn) -> None:
        transactional_id = pending.transactional_id
        error, found = self._state_manager.get_transaction_state(transactional_id)
        if error is E.not_coordinator:
            log.info(
                "No longer the coordinator for %s with coordinator epoch %d; cancel appending "
                "%s to transaction log",
                transactional_id,
                pending.coordinator_epoch,
                pending.new_metadata.txn_state,
            )
        elif error is E.coordinator_load_in_progress:
            log.info(
                "Loading the transaction partition that contains %s; cancel appending %s to "
                "transaction log since the loading process will continue the remaining work",
                transactional_id,
                pending.new_metadata.txn_state,
            )
        elif error is not E.none or found is None:
            log.error(
                "Unexpected %s when fetching the state of %s after its markers",
                error.name,
                transactional_id,
            )
        elif found.coordinator_epoch != pending.coordinator_epoch:
            log.info(
                "The cached metadata of %s has changed after completed sending the markers "
                "with coordinator epoch %d; abort transiting the metadata to %s",
                transactional_id,
                pending.coordinator_epoch,
                pending.new_metadata.txn_state,
            )
        else:
            self.try_append_to_log(pending)

    def try_append_to_log(self, pending: PendingCompleteTxn) -> None:
        """Write the completion; COORDINATOR_NOT_AVAILABLE retries after a backoff."""

        def on_done(error: ErrorCode) -> None:
            if error is E.none:
                log.debug(
                    "Completed transaction for %s with coordinator epoch %d, final state "
                    "after commit: %s",
                    pending.transactional_id,
                    pending.coordinator_epoch,
                    pending.txn_metadata.state,
                )
            elif error is E.coordinator_not_available:
                log.info(
                    "Not available to append %s of %s: retry appending",
                    pending.new_metadata.txn_state,
                    pending.transactional_id,
                )
                retry = _RetryCompletion(self, pending)
                self._retries.add(retry)
                self._timer.add(retry)
            elif error in (E.not_coordinator, E.coordinator_load_in_progress):
                log.info(
                    "No longer the coordinator for transactionalId: %s while trying to append "
                    "to transaction log (%s), skip writing to transaction log",
                    pending.transactional_id,
                    error.name,
                )
            else:
                log.error(
                    "Unexpected error %s while appending to transaction log for %s",
                    error.name,
                    pending.transactional_id,
                )

        self._state_manager.append_transaction_to_log(
            pending.transactional_id,
            pending.coordinator_epoch,
            pending.new_metadata,
            on_done,
            retry_on_error=lambda error: error is E.coordinator_not_available,
        )

    def retry_completion(self, retry: _RetryCompletion) -> None:
        self._retries.discard(retry)
        self.try_append_to_log(retry.txn)

    # ============================================================= resignation
    def _remove_markers_for_txn_id(self, transactional_id: str) -> None:
        self.transactions_with_pending_markers.pop(transactional_id, None)
        for broker_id, queue in list(self._queues.items()):
            self._queues[broker_id] = [e for e in queue if e.transactional_id != transactional_id]
        self.markers_queue_for_unknown_broker = [
            e
            for e in self.markers_queue_for_unknown_broker
            if e.transactional_id != transactional_id
        ]

    def remove_markers_for_txn_topic_partition(self, partition: int) -> None:
        """This broker stopped leading ``partition`` of ``__transaction_state``."""
        owned = self._state_manager.partition_for
        for transactional_id in [
            t for t in self.transactions_with_pending_markers if owned(t) == partition
        ]:
            self._remove_markers_for_txn_id(transactional_id)
        for broker_id, queue in list(self._queues.items()):
            self._queues[broker_id] = [e for e in queue if owned(e.transactional_id) != partition]
        self.markers_queue_for_unknown_broker = [
            e
            for e in self.markers_queue_for_unknown_broker
            if owned(e.transactional_id) != partition
        ]
