"""Kafka's ``TransactionCoordinator``: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn,
EndTxn, DescribeTransactions and ListTransactions for the transactional ids whose
``__transaction_state`` partition this broker leads.

The split is Kafka's: this class decides (the rules of each request, as functions of a
:class:`~broker.txn.transaction_metadata.TransactionMetadata` and its state); the
:class:`~broker.txn.transaction_state_manager.TransactionStateManager` keeps the
transactions and writes them; the
:class:`~broker.txn.transaction_marker_channel_manager.TransactionMarkerChannelManager`
writes the markers. Each change is prepared (a pending state blocks any other one),
written to ``__transaction_state`` with acks=all — the request waits in the Produce
purgatory meanwhile (its ``ParkedRequest`` is handed to the append) — and made current
in the append's callback, which answers the request.

EndTxn is answered once PrepareCommit/PrepareAbort is written; the markers, and then
CompleteCommit/CompleteAbort, follow in the background. Until they are done the
transaction has a pending state, and its producer's next AddPartitionsToTxn or
InitProducerId is answered CONCURRENT_TRANSACTIONS (clients retry it).

Fencing: InitProducerId of a new instance while a transaction is Ongoing prepares
PrepareEpochFence (epoch + 1), turns it into PrepareAbort with that epoch (so the markers
fence the old instance on every partition), and answers CONCURRENT_TRANSACTIONS; the
client's retry then gets the epoch after it. The ``transaction-abort`` job (a
``PeriodicTask`` every ``transaction.abort.timed.out.transaction.cleanup.interval.ms``)
does the same to transactions open longer than their ``transaction.timeout.ms``.

EndTxn and the aborts the coordinator starts itself are in ``txn_end.py`` (``TxnEnd``, a
class of their own over the state manager, the marker channel and the clock, which this
one builds and delegates to); DescribeTransactions and ListTransactions in
``txn_admin.py``.

Calling convention, as the group coordinator's: the request methods take a callback
called exactly once (during the call when answered at once, later from the log's
replication or the markers), and the request itself as ``parked_request``.

Transactions v2 (KIP-890 part 2): a client that sends EndTxn v5+ (it does once the
cluster finalized ``transaction.version`` 2) gets an epoch bump at every end
(``txn_end.py``), and its partitions are added by the Produce v12+ / TxnOffsetCommit
v5+ that writes them (``client_transaction_version`` 2 here); the coordinator's own
aborts (timeouts, fences) run with the finalized version.

Where this differs from Kafka: no two-phase commit (KIP-939); no authorization; the
producer id allocator is the cluster's (``ClusterMetadata.next_producer_id``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import BrokerEndpoint, ClusterMetadata
from broker.config.broker_config import BrokerConfig
from broker.coordinator.coordinator_loader import LoadScheduler
from broker.replica.replica_manager import ReplicaManager
from broker.security.sasl_client import InterBrokerClient
from broker.server.purgatories import ParkedRequest
from broker.server.scheduler import PeriodicTask
from broker.txn.marker_sender import InterBrokerMarkerSender
from broker.txn.transaction_config import TransactionConfig
from broker.txn.transaction_loader import TransactionToComplete
from broker.txn.transaction_log import TRANSACTION_STATE_TOPIC_NAME, transaction_state_log
from broker.txn.transaction_marker_channel_manager import (
    MarkerSender,
    TransactionMarkerChannelManager,
)
from broker.txn.transaction_metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TV_0,
    TopicPartition,
    TransactionMetadata,
    TxnTransitMetadata,
    is_epoch_exhausted,
    new_transaction_metadata,
)
from broker.txn.transaction_state import IllegalTransactionStateTransition, TransactionState
from broker.txn.transaction_state_manager import (
    TransactionalIdAndProducerIdEpoch,
    TransactionStateManager,
)
from broker.txn.txn_admin import (
    TransactionDescription,
    TransactionListing,
    describe_transaction,
    list_transaction_states,
)
from broker.txn.txn_end import (
    EndTxnCallback,
    TxnEnd,
    errors_only,
    on_end_transaction_complete,
)
from purgatory import Clock, SystemTimer

log = logging.getLogger("broker.txn")

E = ErrorCode
S = TransactionState

ErrorCallback = Callable[[ErrorCode], None]


@dataclass(frozen=True, slots=True)
class InitProducerIdResult:
    producer_id: int
    producer_epoch: int
    error: ErrorCode


InitProducerIdCallback = Callable[[InitProducerIdResult], None]


def _init_error(error: ErrorCode) -> InitProducerIdResult:
    return InitProducerIdResult(NO_PRODUCER_ID, NO_PRODUCER_EPOCH, error)


class TransactionCoordinator:
    """See the module docstring. A broker component (``start``/``stop``)."""

    def __init__(
        self,
        broker_id: int,
        clock: Clock,
        scheduler_timer: SystemTimer,
        producer_id_generator: Callable[[], int],
        txn_manager: TransactionStateManager,
        marker_channel_manager: TransactionMarkerChannelManager,
        marker_sender: MarkerSender | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.clock = clock
        self._generate_producer_id = producer_id_generator
        self.txn_manager = txn_manager
        self.marker_channel_manager = marker_channel_manager
        self._marker_sender = marker_sender
        self.is_active = False
        self._txn_end = TxnEnd(clock, txn_manager, marker_channel_manager, producer_id_generator)
        self._abort_task = PeriodicTask(
            scheduler_timer,
            f"transaction-abort-{broker_id}",
            txn_manager.config.abort_timed_out_transactions_interval_ms,
            self.abort_timed_out_transactions,
        )

    # ============================================================== lifecycle
    async def start(self) -> None:
        """Kafka's ``startup``: the abort job, the state manager (which loads the led
        partitions), the marker channel."""
        log.info("[TransactionCoordinator id=%d] Starting up.", self.broker_id)
        self.startup()
        start = getattr(self._marker_sender, "start", None)
        if start is not None:
            start()
        log.info("[TransactionCoordinator id=%d] Startup complete.", self.broker_id)

    def startup(self, enable_transactional_id_expiration: bool = True) -> None:
        """The synchronous part of ``start`` (unit tests call it directly)."""
        self._abort_task.start()
        if self._marker_sender is not None:
            self.marker_channel_manager.start(self._marker_sender)
        self.txn_manager.startup(self, enable_transactional_id_expiration)
        self.is_active = True

    async def stop(self) -> None:
        log.info("[TransactionCoordinator id=%d] Shutting down.", self.broker_id)
        self.is_active = False
        self._abort_task.stop()
        stop = getattr(self._marker_sender, "stop", None)
        if stop is not None:
            await stop()
        self.txn_manager.shutdown()
        self.marker_channel_manager.shutdown()
        log.info("[TransactionCoordinator id=%d] Shutdown complete.", self.broker_id)

    # ----------------------------------------------- TxnElectionListener (manager)
    def on_election(self, partition: int, coordinator_epoch: int) -> None:
        log.debug(
            "Elected as the txn coordinator for partition %d at epoch %d",
            partition,
            coordinator_epoch,
        )
        self.marker_channel_manager.remove_markers_for_txn_topic_partition(partition)
        self.txn_manager.load_transactions_for_txn_topic_partition(
            partition, coordinator_epoch, self._send_loaded_markers
        )

    def on_resignation(self, partition: int) -> None:
        log.debug("Resigned as the txn coordinator for partition %d", partition)
        self.txn_manager.remove_transactions_for_txn_topic_partition(partition)
        self.marker_channel_manager.remove_markers_for_txn_topic_partition(partition)

    def _send_loaded_markers(self, txn: TransactionToComplete) -> None:
        self.marker_channel_manager.add_txn_markers_to_send(
            txn.coordinator_epoch, txn.commit, txn.txn_metadata, txn.transit
        )

    # ============================================================= placement
    def partition_for(self, transactional_id: str) -> int:
        return self.txn_manager.partition_for(transactional_id)

    def coordinator_endpoint(
        self, transactional_id: str
    ) -> tuple[ErrorCode, BrokerEndpoint | None]:
        return self.txn_manager.coordinator_endpoint(transactional_id)

    # ======================================================== InitProducerId
    def handle_init_producer_id(
        self,
        transactional_id: str,
        transaction_timeout_ms: int,
        expected_producer_id_and_epoch: tuple[int, int] | None,
        response_callback: InitProducerIdCallback,
        parked_request: ParkedRequest | None = None,
    ) -> None:
        """InitProducerId with a transactional id: a new epoch (or producer id) for it.
        ``expected_producer_id_and_epoch`` is what a v3+ client sends to bump its own
        epoch after an error (None for a new instance)."""
        if not transactional_id:
            response_callback(_init_error(E.invalid_request))
            return
        if not self.txn_manager.validate_transaction_timeout_ms(transaction_timeout_ms):
            response_callback(_init_error(E.invalid_transaction_timeout))
            return
        error, found = self.txn_manager.get_transaction_state(transactional_id)
        if error is E.none and found is None:
            created = new_transaction_metadata(
                transactional_id,
                self._generate_producer_id(),
                transaction_timeout_ms,
                self.clock.now_ms(),
            )
            error, found = self.txn_manager.put_transaction_state_if_not_exists(created)
        if error is not E.none or found is None:
            response_callback(_init_error(error if error is not E.none else E.not_coordinator))
            return
        coordinator_epoch = found.coordinator_epoch
        result = self._prepare_init_producer_id_transit(
            transactional_id,
            transaction_timeout_ms,
            found.transaction_metadata,
            expected_producer_id_and_epoch,
        )
        if isinstance(result, ErrorCode):
            response_callback(_init_error(result))
            return
        new_metadata = result
        if new_metadata.txn_state is S.PREPARE_EPOCH_FENCE:
            # Abort the open transaction first; the client retries on CONCURRENT_TRANSACTIONS.
            def send_retriable_error_callback(error: ErrorCode) -> None:
                response_callback(
                    _init_error(error if error is not E.none else E.concurrent_transactions)
                )

            # Not from a client: the abort runs with the cluster's transaction version.
            self._txn_end.end_transaction(
                transactional_id,
                new_metadata.producer_id,
                new_metadata.producer_epoch,
                False,
                False,
                errors_only(send_retriable_error_callback),
                parked_request,
                self.txn_manager.transaction_version_level(),
            )
            return

        def send_pid_response_callback(error: ErrorCode) -> None:
            if error is E.none:
                log.info(
                    "Initialized transactionalId %s with producerId %d and producer epoch %d "
                    "on partition %s-%d",
                    transactional_id,
                    new_metadata.producer_id,
                    new_metadata.producer_epoch,
                    TRANSACTION_STATE_TOPIC_NAME,
                    self.partition_for(transactional_id),
                )
                response_callback(
                    InitProducerIdResult(
                        new_metadata.producer_id, new_metadata.producer_epoch, E.none
                    )
                )
            else:
                log.info(
                    "Returning %s error code to client for %s's InitProducerId request",
                    error.name,
                    transactional_id,
                )
                response_callback(_init_error(error))

        self.txn_manager.append_transaction_to_log(
            transactional_id,
            coordinator_epoch,
            new_metadata,
            send_pid_response_callback,
            parked_request=parked_request,
        )

    def _prepare_init_producer_id_transit(
        self,
        transactional_id: str,
        transaction_timeout_ms: int,
        metadata: TransactionMetadata,
        expected: tuple[int, int] | None,
    ) -> TxnTransitMetadata | ErrorCode:
        def is_valid_producer_id(producer_id: int, epoch: int) -> bool:
            # A fresh metadata, the current producer id, or a retry of a rotation that
            # exhausted the previous producer id's epochs.
            return (
                metadata.producer_epoch == NO_PRODUCER_EPOCH
                or producer_id == metadata.producer_id
                or (producer_id == metadata.last_producer_id and is_epoch_exhausted(epoch))
            )

        if metadata.pending_transition_in_progress:
            return E.concurrent_transactions
        if expected is not None and not is_valid_producer_id(*expected):
            return E.producer_fenced
        state = metadata.state
        if state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):
            return E.concurrent_transactions
        if state in (S.COMPLETE_ABORT, S.COMPLETE_COMMIT, S.EMPTY):
            now = self.clock.now_ms()
            if metadata.is_producer_epoch_exhausted and (
                expected is None or expected[1] == metadata.producer_epoch
            ):
                return metadata.prepare_producer_id_rotation(
                    self._generate_producer_id(), transaction_timeout_ms, now, expected is not None
                )
            transit = metadata.prepare_increment_producer_epoch(
                transaction_timeout_ms, expected[1] if expected is not None else None, now
            )
            return E.producer_fenced if transit is None else transit
        if state is S.ONGOING:
            # Never returned to the client: the transaction is aborted with it, the client
            # retries, and its retry bumps the epoch once more (or rotates the producer id).
            return metadata.prepare_fence_producer_epoch()
        message = (
            f"Found transactionalId {transactional_id} with state {state}. This is illegal as "
            "we should never have transitioned to this state."
        )
        log.critical(message)
        raise IllegalTransactionStateTransition(message)

    # ==================================================== AddPartitionsToTxn
    def handle_add_partitions_to_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        response_callback: ErrorCallback,
        parked_request: ParkedRequest | None = None,
        client_transaction_version: int = TV_0,
    ) -> None:
        """AddPartitionsToTxn (and AddOffsetsToTxn, with the group's offsets partition).
        ``client_transaction_version`` is 2 for a partition a Produce v12+ or a
        TxnOffsetCommit v5+ adds (the partition's leader asks, as Kafka's
        ``AddPartitionsToTxnManager`` with ``verifyOnly`` false) and for
        AddPartitionsToTxn v4+; the transaction runs with it until its end."""
        if not transactional_id:
            response_callback(E.invalid_request)
            return
        wanted = frozenset(partitions)
        error, found = self.txn_manager.get_transaction_state(transactional_id)
        if error is E.none and found is None:
            error = E.invalid_producer_id_mapping
        if error is not E.none or found is None:
            response_callback(error)
            return
        metadata = found.transaction_metadata
        if metadata.producer_id != producer_id:
            response_callback(E.invalid_producer_id_mapping)
        elif metadata.producer_epoch != producer_epoch:
            response_callback(E.producer_fenced)
        elif metadata.pending_transition_in_progress or metadata.state in (
            S.PREPARE_COMMIT,
            S.PREPARE_ABORT,
        ):
            response_callback(E.concurrent_transactions)
        elif metadata.state is S.ONGOING and wanted <= metadata.topic_partitions:
            response_callback(E.none)  # already in the transaction
        else:
            self.txn_manager.append_transaction_to_log(
                transactional_id,
                found.coordinator_epoch,
                metadata.prepare_add_partitions(
                    wanted, self.clock.now_ms(), client_transaction_version
                ),
                response_callback,
                parked_request=parked_request,
            )

    def handle_verify_partitions_in_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn v4+ with ``verify_only``: which partitions the ongoing
        transaction has (NONE) and which it has not (TRANSACTION_ABORTABLE, Kafka 4)."""
        wanted = list(partitions)
        if not transactional_id:
            return dict.fromkeys(wanted, E.invalid_request)
        error, found = self.txn_manager.get_transaction_state(transactional_id)
        if error is E.none and found is None:
            error = E.invalid_producer_id_mapping
        if error is not E.none or found is None:
            return dict.fromkeys(wanted, error)
        metadata = found.transaction_metadata
        if metadata.producer_id != producer_id:
            return dict.fromkeys(wanted, E.invalid_producer_id_mapping)
        if metadata.producer_epoch != producer_epoch:
            return dict.fromkeys(wanted, E.producer_fenced)
        if metadata.pending_transition_in_progress or metadata.state in (
            S.PREPARE_COMMIT,
            S.PREPARE_ABORT,
        ):
            return dict.fromkeys(wanted, E.concurrent_transactions)
        return {
            tp: E.none if tp in metadata.topic_partitions else E.transaction_abortable
            for tp in wanted
        }

    # ================================================================ EndTxn
    def handle_end_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        response_callback: EndTxnCallback,
        parked_request: ParkedRequest | None = None,
        client_transaction_version: int = TV_0,
    ) -> None:
        """EndTxn: answered once PrepareCommit/PrepareAbort is written (``txn_end.py``);
        ``client_transaction_version`` 2 (EndTxn v5+) bumps the epoch and answers it."""
        self._txn_end.end_transaction(
            transactional_id,
            producer_id,
            producer_epoch,
            commit,
            True,
            response_callback,
            parked_request,
            client_transaction_version,
        )

    def abort_timed_out_transactions(
        self,
        on_complete: Callable[
            [TransactionalIdAndProducerIdEpoch], ErrorCallback
        ] = on_end_transaction_complete,
    ) -> int:
        """Kafka's ``transaction-abort`` job (``txn_end.py``); how many aborts started."""
        return self._txn_end.abort_timed_out_transactions(on_complete)

    @property
    def timed_out_aborts(self) -> int:
        """Transactions aborted because they outlived their timeout (for metrics, tests)."""
        return self._txn_end.timed_out_aborts

    # ===================================================== Describe / List
    def handle_describe_transactions(self, transactional_id: str) -> TransactionDescription:
        if not self.is_active:
            return TransactionDescription(transactional_id, E.coordinator_not_available)
        return describe_transaction(self.txn_manager, transactional_id)

    def handle_list_transactions(
        self,
        producer_ids: Iterable[int] = (),
        state_names: Iterable[str] = (),
        duration_filter_ms: int = -1,
        transactional_id_pattern: str | None = None,
    ) -> tuple[ErrorCode, list[TransactionListing], list[str]]:
        if not self.is_active:
            return E.coordinator_not_available, [], []
        if self.txn_manager.loading_partitions:
            return E.coordinator_load_in_progress, [], []
        listed, unknown = list_transaction_states(
            self.txn_manager,
            producer_ids,
            state_names,
            duration_filter_ms,
            transactional_id_pattern,
        )
        return E.none, listed, unknown


def build_transaction_coordinator(
    broker_id: int,
    config: BrokerConfig,
    clock: Clock,
    metadata: ClusterMetadata,
    replica_manager: ReplicaManager,
    scheduler_timer: SystemTimer,
    load_scheduler: LoadScheduler | None = None,
    inter_broker: InterBrokerClient | None = None,
    transaction_version: Callable[[], int] = lambda: 0,
) -> TransactionCoordinator:
    """Kafka's ``TransactionCoordinator.apply``: the coordinator with its state manager
    (over ``__transaction_state`` through the replica manager, loading its partitions on
    ``load_scheduler``), its marker channel and the channel's TCP sender, all on the
    broker's scheduler timer."""
    txn_config = TransactionConfig.from_broker_config(config)
    txn_manager = TransactionStateManager(
        broker_id,
        txn_config,
        clock,
        metadata,
        transaction_state_log(replica_manager, clock, txn_config),
        scheduler_timer,
        load_scheduler,
        transaction_version,
    )
    channel = TransactionMarkerChannelManager(
        broker_id, txn_config, metadata, txn_manager, scheduler_timer
    )
    return TransactionCoordinator(
        broker_id,
        clock,
        scheduler_timer,
        metadata.next_producer_id,
        txn_manager,
        channel,
        InterBrokerMarkerSender(broker_id, metadata, channel, inter_broker),
    )
