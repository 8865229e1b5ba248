"""EndTxn, and the aborts the coordinator starts itself: Kafka's
``TransactionCoordinator.endTransaction`` and ``abortTimedOutTransactions``.

``end_transaction`` checks the producer and the state (Kafka's rules: a client must
send the current epoch, the coordinator's own aborts carry a bumped one; Ongoing moves
to PrepareCommit/PrepareAbort, a Complete state repeats its answer, a Prepare state is
CONCURRENT_TRANSACTIONS for the same result and INVALID_TXN_STATE for the other),
writes the prepare to ``__transaction_state`` (the request waits in the Produce
purgatory), answers once it is replicated, and hands the transaction to the marker
channel with its completion prepared.

A fence (InitProducerId of a new instance, or a timeout) arrives here with the pending
state PrepareEpochFence and the bumped epoch: it becomes PrepareAbort with that epoch,
so the markers fence the old instance on every partition.

Transactions v2 (KIP-890 part 2: an EndTxn v5+, or the coordinator's own aborts when the
cluster finalized ``transaction.version`` 2) follow Kafka's ``endTransaction``: every end
bumps the epoch (``prepare_abort_or_commit``) and answers the producer id and the new
epoch; a retry is recognised by its epoch (one below the current: the bump it missed
answered again, or ``Short.MaxValue - 1`` of the previous producer id after the epochs
ran out), an abort with nothing added is allowed from Empty and the Complete states, and
an exhausted epoch takes the next producer id at the completion. Kafka's table:

    +----------------+---------------+---------------+
    |                | Abort         | Commit        |
    |                | retry current | retry current |
    +----------------+---------------+---------------+
    | Empty          | PF    bump    | PF    ITS     |
    | CompleteAbort  | NONE  bump    | ITS   ITS     |
    | CompleteCommit | ITS   bump    | NONE  ITS     |
    +----------------+---------------+---------------+

(PF PRODUCER_FENCED, ITS INVALID_TXN_STATE, bump: a new PrepareAbort with the epoch
bumped.) Older clients keep the rules above, whatever the cluster finalized.

A class of its own (``TxnEnd``) given what it uses at construction: the state manager,
the marker channel, the clock and the producer id source; the coordinator builds one and
delegates to it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import NoReturn

from kio.schema.errors import ErrorCode

from broker.server.purgatories import ParkedRequest
from broker.txn.transaction_marker_channel_manager import TransactionMarkerChannelManager
from broker.txn.transaction_metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    SHORT_MAX,
    TV_2,
    TransactionMetadata,
    TxnTransitMetadata,
    supports_epoch_bump,
)
from broker.txn.transaction_state import IllegalTransactionStateTransition, TransactionState
from broker.txn.transaction_state_manager import (
    TransactionalIdAndProducerIdEpoch,
    TransactionStateManager,
)
from purgatory import Clock

log = logging.getLogger("broker.txn")

E = ErrorCode
S = TransactionState

ErrorCallback = Callable[[ErrorCode], None]
#: EndTxn's answer: the error, and (v5, transactions v2) the producer id and epoch to
#: use next (-1 and -1 otherwise).
EndTxnCallback = Callable[[ErrorCode, int, int], None]


def errors_only(callback: ErrorCallback) -> EndTxnCallback:
    """An EndTxn callback for a caller that wants the error only."""
    return lambda error, _producer_id, _epoch: callback(error)


@dataclass(frozen=True, slots=True)
class _AnswerAgain:
    """A v2 retry of an end that is done: NONE with the current producer id and epoch."""

    producer_id: int
    producer_epoch: int


class TxnEnd:
    """The EndTxn path and the aborts the coordinator starts itself, over the state
    manager (reads and writes ``__transaction_state``), the marker channel (writes the
    markers), the clock and the producer id source (transactions v2 rotate the producer
    id when its epochs run out). Kafka has these as methods of its
    TransactionCoordinator; here they are a class of their own that the coordinator
    builds and calls."""

    __slots__ = (
        "_clock",
        "_generate_producer_id",
        "_marker_channel_manager",
        "_txn_manager",
        "timed_out_aborts",
    )

    def __init__(
        self,
        clock: Clock,
        txn_manager: TransactionStateManager,
        marker_channel_manager: TransactionMarkerChannelManager,
        producer_id_generator: Callable[[], int] | None = None,
    ) -> None:
        self._clock = clock
        self._txn_manager = txn_manager
        self._marker_channel_manager = marker_channel_manager
        self._generate_producer_id = producer_id_generator
        # Transactions aborted because they outlived their timeout (for metrics, tests).
        self.timed_out_aborts = 0

    def end_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        is_from_client: bool,
        response_callback: EndTxnCallback,
        parked_request: ParkedRequest | None,
        client_transaction_version: int = 0,
    ) -> None:
        """Kafka's ``endTransaction`` (``endTransactionWithTV1`` below transactions v2)."""
        if not transactional_id:
            response_callback(E.invalid_request, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
            return
        error, found = self._txn_manager.get_transaction_state(transactional_id)
        if error is E.none and found is None:
            error = E.invalid_producer_id_mapping
        if error is not E.none or found is None:
            response_callback(error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
            return
        metadata = found.transaction_metadata
        coordinator_epoch = found.coordinator_epoch
        v2 = supports_epoch_bump(client_transaction_version)
        if v2:
            result = self._prepare_end_transit_v2(
                metadata, producer_id, producer_epoch, commit, is_from_client
            )
        else:
            result = self._prepare_end_transit(
                metadata, producer_id, producer_epoch, commit, is_from_client
            )
        if isinstance(result, _AnswerAgain):
            response_callback(E.none, result.producer_id, result.producer_epoch)
            return
        if isinstance(result, ErrorCode):
            log.debug(
                "Aborting append of %s to transaction log with coordinator and returning %s "
                "error to client for %s's EndTransaction request",
                "COMMIT" if commit else "ABORT",
                result.name,
                transactional_id,
            )
            response_callback(result, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
            return
        new_metadata, is_epoch_fence = result

        def send_txn_markers_callback(error: ErrorCode) -> None:
            if error is not E.none:
                log.info(
                    "Aborting sending of transaction markers and returning %s error to client "
                    "for %s's EndTransaction request of %s, since appending %s to transaction "
                    "log with coordinator epoch %d failed",
                    error.name,
                    transactional_id,
                    "COMMIT" if commit else "ABORT",
                    new_metadata.txn_state,
                    coordinator_epoch,
                )
                if is_epoch_fence:
                    self._mark_failed_epoch_fence(transactional_id, coordinator_epoch, error)
                response_callback(error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
                return
            pre_send = self._prepare_complete_after_append(
                transactional_id, producer_id, producer_epoch, commit, coordinator_epoch, v2
            )
            if isinstance(pre_send, ErrorCode):
                log.info(
                    "Aborting sending of transaction markers after appended %s to transaction "
                    "log and returning %s error to client for %s's EndTransaction request",
                    "COMMIT" if commit else "ABORT",
                    pre_send.name,
                    transactional_id,
                )
                response_callback(pre_send, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
                return
            txn_metadata, complete = pre_send
            # The prepare is durable: answer now, and write the markers behind it. With
            # transactions v2 the answer carries the bumped epoch.
            if v2:
                response_callback(E.none, txn_metadata.producer_id, txn_metadata.producer_epoch)
            else:
                response_callback(E.none, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
            self._marker_channel_manager.add_txn_markers_to_send(
                coordinator_epoch, commit, txn_metadata, complete
            )

        self._txn_manager.append_transaction_to_log(
            transactional_id,
            coordinator_epoch,
            new_metadata,
            send_txn_markers_callback,
            parked_request=parked_request,
        )

    def _prepare_end_transit(
        self,
        metadata: TransactionMetadata,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        is_from_client: bool,
    ) -> tuple[TxnTransitMetadata, bool] | ErrorCode:
        if metadata.producer_id != producer_id:
            return E.invalid_producer_id_mapping
        # Clients must send their epoch; the coordinator's own aborts carry a bumped one.
        if (is_from_client and producer_epoch != metadata.producer_epoch) or (
            producer_epoch < metadata.producer_epoch
        ):
            return E.producer_fenced
        if (
            metadata.pending_transition_in_progress
            and metadata.pending_state is not S.PREPARE_EPOCH_FENCE
        ):
            return E.concurrent_transactions
        state = metadata.state
        if state is S.ONGOING:
            next_state = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
            is_epoch_fence = False
            if next_state is S.PREPARE_ABORT and metadata.pending_state is S.PREPARE_EPOCH_FENCE:
                # Make way for PrepareAbort, carrying the bumped epoch.
                is_epoch_fence = True
                metadata.pending_state = None
                metadata.producer_epoch = producer_epoch
                metadata.last_producer_epoch = NO_PRODUCER_EPOCH
            transit = metadata.prepare_abort_or_commit(next_state, self._clock.now_ms())
            return transit, is_epoch_fence
        if state is S.COMPLETE_COMMIT:
            return E.none if commit else _invalid_state(metadata, commit)
        if state is S.COMPLETE_ABORT:
            return E.none if not commit else _invalid_state(metadata, commit)
        if state is S.PREPARE_COMMIT:
            return E.concurrent_transactions if commit else _invalid_state(metadata, commit)
        if state is S.PREPARE_ABORT:
            return E.concurrent_transactions if not commit else _invalid_state(metadata, commit)
        if state is S.EMPTY:
            return _invalid_state(metadata, commit)
        _illegal_state(metadata)

    def _prepare_end_transit_v2(
        self,
        metadata: TransactionMetadata,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        is_from_client: bool,
    ) -> tuple[TxnTransitMetadata, bool] | ErrorCode | _AnswerAgain:
        """Kafka's ``endTransaction`` for transactions v2: epochs name retries."""
        is_epoch_fence = metadata.pending_state is S.PREPARE_EPOCH_FENCE
        # A retry of an end that overflowed the epoch: the new producer id is current.
        retry_on_overflow = (
            not is_epoch_fence
            and metadata.last_producer_id == producer_id
            and producer_epoch == SHORT_MAX - 1
            and metadata.producer_epoch == 0
        )
        # A retry of an end whose bump is stored.
        retry_on_epoch_bump = not is_epoch_fence and metadata.producer_epoch == producer_epoch + 1
        state = metadata.state
        if is_epoch_fence:
            valid_epoch = (
                not is_from_client or producer_epoch == metadata.producer_epoch
            ) and producer_epoch >= metadata.producer_epoch
        elif state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            valid_epoch = retry_on_epoch_bump
        elif state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            valid_epoch = (
                retry_on_epoch_bump
                or retry_on_overflow
                or producer_epoch == metadata.producer_epoch
            )
        else:
            valid_epoch = producer_epoch == metadata.producer_epoch
        is_retry = retry_on_epoch_bump or retry_on_overflow
        if metadata.producer_id != producer_id and not retry_on_overflow:
            return E.invalid_producer_id_mapping
        if not valid_epoch:
            return E.producer_fenced
        if metadata.pending_transition_in_progress and not is_epoch_fence:
            return E.concurrent_transactions
        again = _AnswerAgain(metadata.producer_id, metadata.producer_epoch)
        if state is S.ONGOING:
            next_state = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
            return self._completion_v2(metadata, next_state, producer_epoch, is_epoch_fence)
        if state is S.COMPLETE_COMMIT:
            if commit:
                return again if is_retry else _invalid_state(metadata, commit)
            if is_retry:
                return _invalid_state(metadata, commit)
            return self._completion_v2(metadata, S.PREPARE_ABORT, producer_epoch, False, True)
        if state is S.COMPLETE_ABORT:
            if commit:
                return _invalid_state(metadata, commit)
            if is_retry:
                return again
            return self._completion_v2(metadata, S.PREPARE_ABORT, producer_epoch, False, True)
        if state is S.PREPARE_COMMIT:
            return E.concurrent_transactions if commit else _invalid_state(metadata, commit)
        if state is S.PREPARE_ABORT:
            return E.concurrent_transactions if not commit else _invalid_state(metadata, commit)
        if state is S.EMPTY:
            if commit:
                return _invalid_state(metadata, commit)
            return self._completion_v2(metadata, S.PREPARE_ABORT, producer_epoch, False, True)
        _illegal_state(metadata)

    def _completion_v2(
        self,
        metadata: TransactionMetadata,
        next_state: TransactionState,
        producer_epoch: int,
        is_epoch_fence: bool,
        no_partition_added: bool = False,
    ) -> tuple[TxnTransitMetadata, bool] | ErrorCode:
        """``generateTxnTransitMetadataForTxnCompletion``: the prepare with the epoch
        bumped, naming the next producer id when the epochs ran out."""
        next_producer_id = NO_PRODUCER_ID
        if not is_epoch_fence and metadata.is_producer_epoch_exhausted:
            if self._generate_producer_id is None:
                return E.unknown_server_error
            next_producer_id = self._generate_producer_id()
        if next_state is S.PREPARE_ABORT and is_epoch_fence:
            # Make way for PrepareAbort, from the fence's epoch.
            metadata.pending_state = None
            metadata.producer_epoch = producer_epoch
            metadata.last_producer_epoch = NO_PRODUCER_EPOCH
        transit = metadata.prepare_abort_or_commit(
            next_state,
            self._clock.now_ms(),
            client_transaction_version=TV_2,
            next_producer_id=next_producer_id,
            no_partition_added=no_partition_added,
        )
        return transit, is_epoch_fence

    def _prepare_complete_after_append(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        v2: bool = False,
    ) -> tuple[TransactionMetadata, TxnTransitMetadata] | ErrorCode:
        error, found = self._txn_manager.get_transaction_state(transactional_id)
        if error is not E.none:
            return error
        if found is None:
            message = (
                f"The coordinator still owns the transaction partition for {transactional_id}, "
                "but there is no metadata in the cache; this is not expected"
            )
            log.critical(message)
            raise IllegalTransactionStateTransition(message)
        if found.coordinator_epoch != coordinator_epoch:
            return E.not_coordinator
        metadata = found.transaction_metadata
        if metadata.producer_id != producer_id:
            return E.invalid_producer_id_mapping
        # With transactions v2 the prepare bumped the epoch the request named.
        if metadata.producer_epoch != producer_epoch and not (
            v2 and metadata.producer_epoch == producer_epoch + 1
        ):
            return E.producer_fenced
        if metadata.pending_transition_in_progress:
            return E.concurrent_transactions
        if metadata.state is S.PREPARE_COMMIT and commit:
            return metadata, metadata.prepare_complete(self._clock.now_ms())
        if metadata.state is S.PREPARE_ABORT and not commit:
            return metadata, metadata.prepare_complete(self._clock.now_ms())
        return _invalid_state(metadata, commit)

    def _mark_failed_epoch_fence(
        self,
        transactional_id: str,
        coordinator_epoch: int,
        error: ErrorCode,
    ) -> None:
        _error, found = self._txn_manager.get_transaction_state(transactional_id)
        if found is not None and found.coordinator_epoch == coordinator_epoch:
            found.transaction_metadata.has_failed_epoch_fence = True
            log.warning(
                "The coordinator failed to write an epoch fence transition for producer %s to "
                "the transaction log with error %s. The epoch was increased to %d but not "
                "returned to the client",
                transactional_id,
                error.name,
                found.transaction_metadata.producer_epoch,
            )

    # ================================================ timed-out transactions
    def abort_timed_out_transactions(
        self,
        on_complete: Callable[[TransactionalIdAndProducerIdEpoch], ErrorCallback],
    ) -> int:
        """Kafka's ``transaction-abort`` job: fence and abort every Ongoing transaction
        open longer than its timeout. Returns how many aborts it started."""
        started = 0
        for txn in self._txn_manager.timed_out_transactions():
            error, found = self._txn_manager.get_transaction_state(txn.transactional_id)
            if error is not E.none or found is None:
                log.error(
                    "Could not find transaction metadata when trying to timeout transaction for %s",
                    txn,
                )
                continue
            metadata = found.transaction_metadata
            if metadata.producer_id != txn.producer_id:
                log.error(
                    "Found incorrect producerId when expiring transactionalId: %s. Expected "
                    "producerId: %d. Found producerId: %d",
                    txn.transactional_id,
                    txn.producer_id,
                    metadata.producer_id,
                )
                continue
            if metadata.pending_transition_in_progress:
                log.debug(
                    "Skipping abort of timed out transaction %s since there is a pending state "
                    "transition",
                    txn,
                )
                continue
            fence = metadata.prepare_fence_producer_epoch()
            started += 1
            self.timed_out_aborts += 1
            # Not from a client: the abort runs with the cluster's transaction version.
            self.end_transaction(
                metadata.transactional_id,
                fence.producer_id,
                fence.producer_epoch,
                False,
                False,
                errors_only(on_complete(txn)),
                None,
                self._txn_manager.transaction_version_level(),
            )
        return started


def _illegal_state(metadata: TransactionMetadata) -> NoReturn:
    message = (
        f"Found transactionalId {metadata.transactional_id} with state {metadata.state}. "
        "This is illegal as we should never have transitioned to this state."
    )
    log.critical(message)
    raise IllegalTransactionStateTransition(message)


def _invalid_state(metadata: TransactionMetadata, commit: bool) -> ErrorCode:
    log.debug(
        "TransactionalId: %s's state is %s, but received transaction marker result to send: %s",
        metadata.transactional_id,
        metadata.state,
        "COMMIT" if commit else "ABORT",
    )
    return E.invalid_txn_state


def on_end_transaction_complete(
    txn: TransactionalIdAndProducerIdEpoch,
) -> ErrorCallback:
    def on_done(error: ErrorCode) -> None:
        if error is E.none:
            log.info(
                "Completed rollback of ongoing transaction for transactionalId %s due to timeout",
                txn.transactional_id,
            )
        elif error in (
            E.invalid_producer_id_mapping,
            E.producer_fenced,
            E.concurrent_transactions,
        ):
            log.debug(
                "Rollback of ongoing transaction for transactionalId %s has been cancelled "
                "due to error %s",
                txn.transactional_id,
                error.name,
            )
        else:
            log.warning(
                "Rollback of ongoing transaction for transactionalId %s failed due to error %s",
                txn.transactional_id,
                error.name,
            )

    return on_done
