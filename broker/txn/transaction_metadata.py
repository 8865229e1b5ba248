"""One transactional id's state: Kafka's ``TransactionMetadata`` and ``TxnTransitMetadata``.

Every change of a transaction goes in two steps, as in Kafka. ``prepare_*`` checks the
move against the state table, records it as the *pending state* (which blocks any other
move meanwhile: requests then get CONCURRENT_TRANSACTIONS) and returns the target as a
frozen :class:`TxnTransitMetadata`; the coordinator writes that target to
``__transaction_state`` and, only once the in-sync replicas have it, calls
``complete_transition_to``, which checks it once more and makes it the state. A failed
write clears the pending state and leaves the transaction as it was.

Transactions v2 (KIP-890 part 2) are a client's choice, carried as the *client
transaction version* of each transition (0, or 2 for an EndTxn v5+ / a partition added by
a Produce v12+): with 2, ``prepare_abort_or_commit`` bumps the epoch (the last one is kept
to recognise a retry), may name the next producer id when the epochs run out
(``next_producer_id``, taken in ``prepare_complete``), and an abort may start from Empty
or a Complete state (no partition added: the start time is the update time).

Pure bookkeeping on one event-loop thread: no clock (timestamps are passed in), no IO,
no purgatory, so each rule is tested directly. Kafka's per-metadata lock has no
equivalent: nothing here awaits.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from broker.txn.transaction_state import (
    IllegalTransactionStateTransition,
    TransactionState,
    is_valid_transition,
)

log = logging.getLogger("broker.txn")

S = TransactionState
TopicPartition = tuple[str, int]

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
SHORT_MAX = 32767
#: ``TransactionVersion``: TV_2 is the first that bumps the epoch per transaction.
TV_0 = 0
TV_2 = 2


def supports_epoch_bump(client_transaction_version: int) -> bool:
    return client_transaction_version >= TV_2


def is_epoch_exhausted(producer_epoch: int) -> bool:
    """Kafka keeps ``Short.MaxValue`` free so that a fence can always bump the epoch."""
    return producer_epoch >= SHORT_MAX - 1


@dataclass(frozen=True, slots=True)
class TxnTransitMetadata:
    """The target of a prepared move: what is written to the log, then made current."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    txn_state: TransactionState
    topic_partitions: frozenset[TopicPartition]
    txn_start_timestamp: int
    txn_last_update_timestamp: int
    #: The producer id the epochs move to when they run out (TV2; -1: none).
    next_producer_id: int = NO_PRODUCER_ID
    #: The transaction version the client runs this transaction with (0 or 2).
    client_transaction_version: int = TV_0


@dataclass(slots=True, eq=False)
class TransactionMetadata:
    """A transactional id's producer id and epoch, and its current transaction.

    ``txn_start_timestamp`` is when the first partition was added (-1 without an open
    transaction); ``txn_last_update_timestamp`` moves with every completed change and is
    what transactional id expiration counts from.
    """

    transactional_id: str
    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    topic_partitions: set[TopicPartition] = field(default_factory=set)
    txn_start_timestamp: int = -1
    txn_last_update_timestamp: int = -1
    # The state a prepared move goes to, until the log has it (Kafka's pendingState).
    pending_state: TransactionState | None = None
    # TV2: the producer id an exhausted epoch rotates to at the next completion.
    next_producer_id: int = NO_PRODUCER_ID
    # The transaction version the client runs its transactions with (TV_0 or TV_2).
    client_transaction_version: int = TV_0
    # A fence whose write failed: the epoch was bumped but never returned to anyone, so
    # the next fence reuses it (Kafka's hasFailedEpochFence).
    has_failed_epoch_fence: bool = False

    # -------------------------------------------------------------------- queries
    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    @property
    def has_pending_transaction(self) -> bool:
        return self.state in (S.ONGOING, S.PREPARE_ABORT, S.PREPARE_COMMIT)

    def add_partitions(self, partitions: set[TopicPartition] | frozenset[TopicPartition]) -> None:
        self.topic_partitions |= partitions

    def remove_partition(self, tp: TopicPartition) -> None:
        """A marker for ``tp`` is written: it no longer waits on it."""
        if self.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            raise IllegalTransactionStateTransition(
                f"Transaction metadata's current state is {self.state}, and its pending state "
                f"is {self.pending_state} while trying to remove partitions whose txn marker "
                "has been sent, this is not expected"
            )
        self.topic_partitions.discard(tp)

    # -------------------------------------------------------------- preparations
    def prepare_no_transit(self) -> TxnTransitMetadata:
        """The current state as a transit, without a pending state (for tests)."""
        return self._transit(
            self.state,
            self.producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            frozenset(self.topic_partitions),
            self.txn_start_timestamp,
            self.txn_last_update_timestamp,
        )

    def prepare_fence_producer_epoch(self) -> TxnTransitMetadata:
        """Ongoing -> PrepareEpochFence with the epoch bumped: a new instance of the
        producer, or the transaction timeout, fences the one running the transaction."""
        if self.producer_epoch == SHORT_MAX:
            raise IllegalTransactionStateTransition(
                "Cannot fence producer with epoch equal to Short.MaxValue since this would overflow"
            )
        bumped = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        return self._prepare_transition_to(
            S.PREPARE_EPOCH_FENCE,
            self.producer_id,
            bumped,
            NO_PRODUCER_EPOCH,
            self.txn_timeout_ms,
            frozenset(self.topic_partitions),
            self.txn_start_timestamp,
            self.txn_last_update_timestamp,
        )

    def prepare_increment_producer_epoch(
        self, new_txn_timeout_ms: int, expected_producer_epoch: int | None, update_timestamp: int
    ) -> TxnTransitMetadata | None:
        """InitProducerId on an idle transactional id: -> Empty with the next epoch.

        ``expected_producer_epoch`` is what a v3+ client sends to bump its own epoch
        after an error. None means PRODUCER_FENCED (the caller answers it)."""
        if self.is_producer_epoch_exhausted:
            raise IllegalTransactionStateTransition(
                f"Cannot allocate any more producer epochs for producerId {self.producer_id}"
            )
        bumped = self.producer_epoch + 1
        if expected_producer_epoch is None:
            # A new instance: bump, and forget the previous epoch (a new producer has -1,
            # and gets 0).
            next_epoch, last_epoch = bumped, NO_PRODUCER_EPOCH
        elif (
            self.producer_epoch == NO_PRODUCER_EPOCH
            or expected_producer_epoch == self.producer_epoch
        ):
            next_epoch, last_epoch = bumped, self.producer_epoch
        elif expected_producer_epoch == self.last_producer_epoch:
            # A retry of a bump that succeeded: answer the current epoch again.
            next_epoch, last_epoch = self.producer_epoch, self.last_producer_epoch
        else:
            log.info(
                "Expected producer epoch %d does not match current producer epoch %d or "
                "previous producer epoch %d",
                expected_producer_epoch,
                self.producer_epoch,
                self.last_producer_epoch,
            )
            return None
        return self._prepare_transition_to(
            S.EMPTY,
            self.producer_id,
            next_epoch,
            last_epoch,
            new_txn_timeout_ms,
            frozenset(),
            -1,
            update_timestamp,
        )

    def prepare_producer_id_rotation(
        self,
        new_producer_id: int,
        new_txn_timeout_ms: int,
        update_timestamp: int,
        record_last_epoch: bool,
    ) -> TxnTransitMetadata:
        """The epochs of this producer id are exhausted: a new producer id, epoch 0."""
        if self.has_pending_transaction:
            raise IllegalTransactionStateTransition(
                "Cannot rotate producer ids while a transaction is still pending"
            )
        return self._prepare_transition_to(
            S.EMPTY,
            new_producer_id,
            0,
            self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
            new_txn_timeout_ms,
            frozenset(),
            -1,
            update_timestamp,
        )

    def prepare_add_partitions(
        self,
        added: set[TopicPartition] | frozenset[TopicPartition],
        update_timestamp: int,
        client_transaction_version: int = TV_0,
    ) -> TxnTransitMetadata:
        """-> Ongoing with ``added``; the first partition starts the transaction's clock.
        The transaction takes the client's transaction version (Kafka's
        ``prepareAddPartitions``)."""
        start = (
            update_timestamp
            if self.state in (S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT)
            else self.txn_start_timestamp
        )
        return self._prepare_transition_to(
            S.ONGOING,
            self.producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            frozenset(self.topic_partitions | set(added)),
            start,
            update_timestamp,
            client_transaction_version=client_transaction_version,
        )

    def prepare_abort_or_commit(
        self,
        new_state: TransactionState,
        update_timestamp: int,
        client_transaction_version: int = TV_0,
        next_producer_id: int = NO_PRODUCER_ID,
        no_partition_added: bool = False,
    ) -> TxnTransitMetadata:
        """EndTxn: -> PrepareCommit / PrepareAbort, partitions kept for the markers.

        With TV2 the epoch goes up by one (the markers carry it, fencing the batches of
        the transaction's epoch) and the current one becomes the last; at
        ``Short.MaxValue`` an abort goes through unbumped (Kafka logs it as a bug). An
        abort with no partition added starts its transaction now."""
        epoch, last_epoch = self.producer_epoch, self.last_producer_epoch
        if supports_epoch_bump(client_transaction_version):
            if self.producer_epoch == SHORT_MAX and new_state is S.PREPARE_ABORT:
                log.error(
                    "Aborting producer %s %d with epoch equal to Short.MaxValue, this must "
                    "not happen unless there is a bug",
                    self.transactional_id,
                    self.producer_id,
                )
            else:
                epoch = self.producer_epoch + 1
            last_epoch = self.producer_epoch
        return self._prepare_transition_to(
            new_state,
            self.producer_id,
            epoch,
            last_epoch,
            self.txn_timeout_ms,
            frozenset(self.topic_partitions),
            update_timestamp if no_partition_added else self.txn_start_timestamp,
            update_timestamp,
            next_producer_id=next_producer_id,
            client_transaction_version=client_transaction_version,
        )

    def prepare_complete(self, update_timestamp: int) -> TxnTransitMetadata:
        """Every marker is written: PrepareCommit/Abort -> CompleteCommit/Abort."""
        new_state = S.COMPLETE_COMMIT if self.state is S.PREPARE_COMMIT else S.COMPLETE_ABORT
        # The prepare was written, so a fence it carried is no longer a failed one.
        self.has_failed_epoch_fence = False
        producer_id, epoch = self.producer_id, self.producer_epoch
        if (
            supports_epoch_bump(self.client_transaction_version)
            and self.next_producer_id != NO_PRODUCER_ID
        ):
            # TV2, the epochs ran out: the next producer id, at epoch 0 (the last epoch
            # stays the one the client saw).
            producer_id, epoch = self.next_producer_id, 0
        return self._prepare_transition_to(
            new_state,
            producer_id,
            epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            frozenset(),
            self.txn_start_timestamp,
            update_timestamp,
        )

    def prepare_dead(self) -> TxnTransitMetadata:
        """transactional.id.expiration.ms: the id is about to be removed (tombstone)."""
        return self._prepare_transition_to(
            S.DEAD,
            self.producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            frozenset(),
            self.txn_start_timestamp,
            self.txn_last_update_timestamp,
        )

    def _transit(
        self,
        new_state: TransactionState,
        new_producer_id: int,
        new_epoch: int,
        new_last_epoch: int,
        new_timeout_ms: int,
        new_partitions: frozenset[TopicPartition],
        new_start: int,
        update_timestamp: int,
        *,
        next_producer_id: int = NO_PRODUCER_ID,
        client_transaction_version: int | None = None,
    ) -> TxnTransitMetadata:
        return TxnTransitMetadata(
            producer_id=new_producer_id,
            last_producer_id=self.producer_id,
            producer_epoch=new_epoch,
            last_producer_epoch=new_last_epoch,
            txn_timeout_ms=new_timeout_ms,
            txn_state=new_state,
            topic_partitions=new_partitions,
            txn_start_timestamp=new_start,
            txn_last_update_timestamp=update_timestamp,
            next_producer_id=next_producer_id,
            client_transaction_version=(
                self.client_transaction_version
                if client_transaction_version is None
                else client_transaction_version
            ),
        )

    def _prepare_transition_to(
        self,
        new_state: TransactionState,
        new_producer_id: int,
        new_epoch: int,
        new_last_epoch: int,
        new_timeout_ms: int,
        new_partitions: frozenset[TopicPartition],
        new_start: int,
        update_timestamp: int,
        *,
        next_producer_id: int = NO_PRODUCER_ID,
        client_transaction_version: int | None = None,
    ) -> TxnTransitMetadata:
        if self.pending_state is not None:
            raise IllegalTransactionStateTransition(
                f"Preparing transaction state transition to {new_state} while it already a "
                f"pending state {self.pending_state}"
            )
        if new_producer_id < 0:
            raise IllegalTransactionStateTransition(f"Illegal new producer id {new_producer_id}")
        if new_state is not S.DEAD and new_epoch < 0:
            raise IllegalTransactionStateTransition(f"Illegal new producer epoch {new_epoch}")
        if not is_valid_transition(self.state, new_state):
            raise IllegalTransactionStateTransition(
                f"Preparing transaction state transition to {new_state} failed since the "
                f"target state {new_state} is not a valid previous state of the current "
                f"state {self.state}"
            )
        transit = self._transit(
            new_state,
            new_producer_id,
            new_epoch,
            new_last_epoch,
            new_timeout_ms,
            new_partitions,
            new_start,
            update_timestamp,
            next_producer_id=next_producer_id,
            client_transaction_version=client_transaction_version,
        )
        log.debug(
            "TransactionalId %s prepare transition from %s to %s",
            self.transactional_id,
            self.state,
            transit,
        )
        self.pending_state = new_state
        return transit

    # ---------------------------------------------------------------- completion
    def complete_transition_to(self, transit: TxnTransitMetadata) -> None:
        """The log has ``transit``: make it current (Kafka's ``completeTransitionTo``).

        Checks the transit is the pending move and consistent with the current state
        (same producer and epoch, or a legal bump; no partition lost while Ongoing)."""
        to_state = self.pending_state
        if to_state is None:
            raise IllegalTransactionStateTransition(
                f"TransactionalId {self.transactional_id} completing transaction state "
                "transition while it does not have a pending state"
            )
        if to_state is not transit.txn_state:
            self._fail(transit)
        if to_state is S.EMPTY:  # InitProducerId
            if (
                (self.producer_epoch != transit.producer_epoch and not self._valid_bump(transit))
                or transit.topic_partitions
                or transit.txn_start_timestamp != -1
            ):
                self._fail(transit)
            self.txn_timeout_ms = transit.txn_timeout_ms
            self.producer_epoch = transit.producer_epoch
            self.last_producer_epoch = transit.last_producer_epoch
            self.producer_id = transit.producer_id
            self.last_producer_id = transit.last_producer_id
        elif to_state is S.ONGOING:  # AddPartitions / AddOffsets
            if (
                not self._same_producer(transit)
                or not self.topic_partitions <= transit.topic_partitions
                or self.txn_timeout_ms != transit.txn_timeout_ms
            ):
                self._fail(transit)
            self.txn_start_timestamp = transit.txn_start_timestamp
            self.add_partitions(transit.topic_partitions)
        elif to_state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):  # EndTxn
            # TV2 allows an abort from Empty/Complete*, whose start time is new.
            empty_abort = (
                to_state is S.PREPARE_ABORT
                and supports_epoch_bump(transit.client_transaction_version)
                and self.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
            )
            if (
                not self._valid_producer_epoch(transit)
                or self.topic_partitions != transit.topic_partitions
                or self.txn_timeout_ms != transit.txn_timeout_ms
                or (self.txn_start_timestamp != transit.txn_start_timestamp and not empty_abort)
            ):
                self._fail(transit)
            self.producer_epoch = transit.producer_epoch
            self.last_producer_epoch = transit.last_producer_epoch
            self.next_producer_id = transit.next_producer_id
            self.txn_start_timestamp = transit.txn_start_timestamp
        elif to_state in (S.COMPLETE_ABORT, S.COMPLETE_COMMIT):  # markers written
            if (
                not self._valid_producer_epoch(transit)
                or self.txn_timeout_ms != transit.txn_timeout_ms
                or transit.txn_start_timestamp == -1
            ):
                self._fail(transit)
            self.txn_start_timestamp = transit.txn_start_timestamp
            self.topic_partitions.clear()
            if self.producer_id != transit.producer_id:  # TV2: the epochs ran out
                self.last_producer_id = transit.last_producer_id
                self.producer_id = transit.producer_id
                self.producer_epoch = transit.producer_epoch
            self.next_producer_id = NO_PRODUCER_ID
        elif to_state is S.PREPARE_EPOCH_FENCE:
            # A fence becomes PrepareAbort before anything is written: never completed.
            self._fail(transit)
        else:  # Dead: the id is removed from the cache, never made current
            raise IllegalTransactionStateTransition(
                f"TransactionalId {self.transactional_id} is trying to complete a transition "
                f"to {to_state}. This means that the transactionalId was being expired, and "
                "the only acceptable completion of this operation is to remove the "
                f"transaction metadata from the cache, not to persist the {to_state} in the log."
            )
        log.debug(
            "TransactionalId %s complete transition from %s to %s",
            self.transactional_id,
            self.state,
            transit,
        )
        self.txn_last_update_timestamp = transit.txn_last_update_timestamp
        self.client_transaction_version = transit.client_transaction_version
        self.pending_state = None
        self.state = to_state

    def _same_producer(self, transit: TxnTransitMetadata) -> bool:
        return (
            transit.producer_epoch == self.producer_epoch
            and transit.producer_id == self.producer_id
        )

    def _valid_producer_epoch(self, transit: TxnTransitMetadata) -> bool:
        """Kafka's ``validProducerEpoch``: with TV2 a prepare bumps the epoch (its last
        epoch is the current one), and a completion may move to the next producer id at
        epoch 0; otherwise the producer id and epoch stay."""
        if supports_epoch_bump(transit.client_transaction_version):
            if (
                transit.txn_state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
                and transit.producer_epoch == 0
                and transit.producer_id != self.producer_id
            ):
                return (
                    transit.last_producer_epoch == self.last_producer_epoch
                    and transit.last_producer_id == self.producer_id
                )
            if transit.txn_state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                return (
                    transit.last_producer_epoch == self.producer_epoch
                    and transit.producer_id == self.producer_id
                )
        return self._same_producer(transit)

    def _valid_bump(self, transit: TxnTransitMetadata) -> bool:
        return transit.producer_epoch == self.producer_epoch + 1 or (
            transit.producer_epoch == 0 and transit.producer_id != self.producer_id
        )

    def _fail(self, transit: TxnTransitMetadata) -> None:
        log.error("%r's transition to %s failed: this should not happen", self, transit)
        raise IllegalTransactionStateTransition(
            f"TransactionalId {self.transactional_id} failed transition to state {transit} "
            "due to unexpected metadata"
        )

    def __repr__(self) -> str:
        return (
            f"TransactionMetadata(transactionalId={self.transactional_id}, "
            f"producerId={self.producer_id}, producerEpoch={self.producer_epoch}, "
            f"txnTimeoutMs={self.txn_timeout_ms}, state={self.state}, "
            f"pendingState={self.pending_state}, topicPartitions={sorted(self.topic_partitions)}, "
            f"txnStartTimestamp={self.txn_start_timestamp}, "
            f"txnLastUpdateTimestamp={self.txn_last_update_timestamp}, "
            f"clientTransactionVersion={self.client_transaction_version})"
        )


def new_transaction_metadata(
    transactional_id: str, producer_id: int, txn_timeout_ms: int, timestamp: int
) -> TransactionMetadata:
    """A transactional id seen for the first time: Empty, no epoch yet (-1)."""
    return TransactionMetadata(
        transactional_id=transactional_id,
        producer_id=producer_id,
        last_producer_id=NO_PRODUCER_ID,
        producer_epoch=NO_PRODUCER_EPOCH,
        last_producer_epoch=NO_PRODUCER_EPOCH,
        txn_timeout_ms=txn_timeout_ms,
        state=S.EMPTY,
        txn_last_update_timestamp=timestamp,
    )
