"""Producer state of one partition (Kafka's ProducerStateManager and ProducerAppendInfo).

Per producer id the partition keeps a ``ProducerStateEntry``: the epoch, the last five
batches' sequence ranges with the offsets they were written at (``BatchMetadata``), the
last timestamp, the epoch of the transaction coordinator that wrote its last marker, and
the first offset of its ongoing transaction. From them:

- **Idempotence.** A client's batch that repeats one of the producer's last five batches
  (same epoch, first and last sequence) is a retry whose answer was lost: it is answered
  with the original offsets and not written again (``find_duplicate_batch``). Otherwise
  the batch must continue the sequence (``check_sequence``): first sequence = last + 1
  (wrapping after 2^31 - 1), or 0 with a new, higher epoch; anything else is
  OUT_OF_ORDER_SEQUENCE_NUMBER. A batch of an older epoch is INVALID_PRODUCER_EPOCH
  (Kafka's answer since 2.7, for transactional producers too: the client aborts and
  retries rather than failing fatally as with PRODUCER_FENCED). A producer the partition
  does not know — new, or whose state went with the records retention deleted — may
  start at any sequence (KIP-360, Kafka 2.5+): UNKNOWN_PRODUCER_ID is never answered.
- **Transactions.** A transactional batch begins the producer's transaction on this
  partition (``current_txn_first_offset``) or continues it; a COMMIT/ABORT marker (a
  control batch) ends it as a ``CompletedTxn``. A non-transactional batch while a
  transaction is open is INVALID_TXN_STATE; a marker of an older coordinator epoch is
  TRANSACTION_COORDINATOR_FENCED, of an older producer epoch INVALID_PRODUCER_EPOCH; a
  marker of transactions v2 (WriteTxnMarkers v2's transaction version 2, KIP-1228) must
  carry an epoch above the producer's (EndTxn bumped it), else INVALID_PRODUCER_EPOCH.
- **Last stable offset.** ``first_unstable_offset`` is the first offset of the earliest
  transaction that is still open, or completed with its marker not yet below the high
  watermark (Kafka's ongoing and unreplicated transactions). The partition's LSO is that
  offset (at least the log start) when it is below the high watermark, else the HW.

Checks depend on who appends (``AppendOrigin``): a client's batch gets all of them; the
coordinator's (markers, transactional offset commits) skips sequences; a follower's
replica of its leader's batches is checked for nothing (the leader did it), and neither
is the replay of a log when a partition opens.

Changes are staged: ``analyze_and_validate_producer_state`` runs every batch of an
append through a ``ProducerAppendInfo`` per producer (a copy of the entry), so a refused
append leaves the manager untouched; the partition then appends to its log and applies
them (``update``, ``complete_txn``).

Where this differs from Kafka: no producer snapshot files (the state is rebuilt from
the log when a partition opens, see ``Partition.rebuild_from_log``), and no transaction
verification of KIP-890 (a transactional batch for a partition the coordinator has not
added is written). A follower or a replay that meets a non-transactional batch inside a
transaction keeps going (Kafka raises INVALID_TXN_STATE there too; only a leader
refuses it).
"""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from broker.replica.append_origin import AppendOrigin
from protocol.control_batch import EndTransactionMarker
from protocol.record_batch import RecordBatchHeader

NUM_BATCHES_TO_RETAIN = 5
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1
_INT32_MAX = 0x7FFFFFFF


def increment_sequence(sequence: int, increment: int) -> int:
    """Sequences wrap from 2^31 - 1 to 0 (Kafka's DefaultRecordBatch.incrementSequence)."""
    if sequence > _INT32_MAX - increment:
        return increment - (_INT32_MAX - sequence) - 1
    return sequence + increment


def decrement_sequence(sequence: int, decrement: int) -> int:
    if sequence < decrement:
        return _INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


def last_sequence_of(header: RecordBatchHeader) -> int:
    if header.base_sequence == NO_SEQUENCE:
        return NO_SEQUENCE
    return increment_sequence(header.base_sequence, header.last_offset_delta)


class ProducerStateError(Exception):
    """A batch the producer state refuses; ``error`` is the produce answer."""

    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


def _batches() -> deque[BatchMetadata]:
    return deque(maxlen=NUM_BATCHES_TO_RETAIN)


@dataclass(slots=True)
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    coordinator_epoch: int = -1
    last_timestamp: int = NO_TIMESTAMP
    current_txn_first_offset: int | None = None
    batches: deque[BatchMetadata] = field(default_factory=_batches)

    @property
    def is_empty(self) -> bool:
        return not self.batches

    @property
    def first_seq(self) -> int:
        return self.batches[0].first_seq if self.batches else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def staged_copy(self) -> ProducerStateEntry:
        """What a ``ProducerAppendInfo`` starts from: everything but the batches."""
        return ProducerStateEntry(
            self.producer_id,
            self.producer_epoch,
            self.coordinator_epoch,
            self.last_timestamp,
            self.current_txn_first_offset,
        )

    def maybe_update_producer_epoch(self, epoch: int) -> bool:
        """A new epoch forgets the old epoch's batches."""
        if epoch == self.producer_epoch:
            return False
        self.batches.clear()
        self.producer_epoch = epoch
        return True

    def add_batch(
        self, epoch: int, last_seq: int, last_offset: int, offset_delta: int, timestamp: int
    ) -> None:
        self.maybe_update_producer_epoch(epoch)
        self.batches.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp

    def update(self, staged: ProducerStateEntry) -> None:
        """Take in what an append staged (Kafka's ProducerStateEntry.update)."""
        self.maybe_update_producer_epoch(staged.producer_epoch)
        self.batches.extend(staged.batches)
        self.coordinator_epoch = staged.coordinator_epoch
        self.current_txn_first_offset = staged.current_txn_first_offset
        self.last_timestamp = staged.last_timestamp

    def find_duplicate_batch(self, header: RecordBatchHeader) -> BatchMetadata | None:
        """One of the last five batches with this batch's epoch and sequence range."""
        if header.producer_epoch != self.producer_epoch:
            return None
        first, last = header.base_sequence, last_sequence_of(header)
        for batch in self.batches:
            if batch.first_seq == first and batch.last_seq == last:
                return batch
        return None


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


@dataclass(slots=True)
class TxnMetadata:
    producer_id: int
    first_offset: int
    last_offset: int | None = None


class ProducerAppendInfo:
    """One producer's batches in one append, validated against its state and staged."""

    def __init__(
        self, producer_id: int, current_entry: ProducerStateEntry, origin: AppendOrigin
    ) -> None:
        self.producer_id = producer_id
        self.origin = origin
        self._current = current_entry
        self.updated_entry = current_entry.staged_copy()
        self.started_transactions: list[TxnMetadata] = []

    def append(
        self,
        header: RecordBatchHeader,
        marker: EndTransactionMarker | None,
        transaction_version: int = 0,
    ) -> CompletedTxn | None:
        """Stage one batch; a COMMIT/ABORT marker returns the transaction it ends (None
        for a marker of a producer with no transaction here, or an empty control batch)."""
        if header.is_control:
            if marker is None:
                return None
            return self.append_end_txn_marker(
                marker,
                header.producer_epoch,
                header.base_offset,
                header.max_timestamp,
                transaction_version,
            )
        self.append_data_batch(
            header.producer_epoch,
            header.base_sequence,
            last_sequence_of(header),
            header.max_timestamp,
            header.base_offset,
            header.last_offset,
            header.is_transactional,
        )
        return None

    def append_data_batch(
        self,
        epoch: int,
        first_seq: int,
        last_seq: int,
        last_timestamp: int,
        first_offset: int,
        last_offset: int,
        is_transactional: bool,
    ) -> None:
        self._check_producer_epoch(epoch, first_offset)
        if self.origin is AppendOrigin.CLIENT:
            self._check_sequence(epoch, first_seq, first_offset)
        updated = self.updated_entry
        updated.add_batch(epoch, last_seq, last_offset, last_offset - first_offset, last_timestamp)
        if updated.current_txn_first_offset is not None and not is_transactional:
            if self.origin is not AppendOrigin.REPLICATION:
                raise ProducerStateError(
                    ErrorCode.invalid_txn_state,
                    f"expected a transactional write from producer {self.producer_id} at "
                    f"offset {first_offset}",
                )
        elif updated.current_txn_first_offset is None and is_transactional:
            updated.current_txn_first_offset = first_offset
            self.started_transactions.append(TxnMetadata(self.producer_id, first_offset))

    def append_end_txn_marker(
        self,
        marker: EndTransactionMarker,
        epoch: int,
        offset: int,
        timestamp: int,
        transaction_version: int = 0,
    ) -> CompletedTxn | None:
        if transaction_version >= 2:
            self._check_marker_epoch_bumped(epoch, offset)
        else:
            self._check_producer_epoch(epoch, offset)
        updated = self.updated_entry
        fenced = updated.coordinator_epoch > marker.coordinator_epoch
        if fenced and self.origin is not AppendOrigin.REPLICATION:
            raise ProducerStateError(
                ErrorCode.transaction_coordinator_fenced,
                f"invalid coordinator epoch for producer {self.producer_id} at offset "
                f"{offset}: {marker.coordinator_epoch} (zombie), "
                f"{updated.coordinator_epoch} (current)",
            )
        completed = None
        if updated.current_txn_first_offset is not None:
            completed = CompletedTxn(
                self.producer_id,
                updated.current_txn_first_offset,
                offset,
                is_aborted=not marker.is_commit,
            )
        updated.maybe_update_producer_epoch(epoch)
        updated.coordinator_epoch = marker.coordinator_epoch
        updated.current_txn_first_offset = None
        updated.last_timestamp = timestamp
        return completed

    def _check_producer_epoch(self, epoch: int, offset: int) -> None:
        current = self.updated_entry.producer_epoch
        if epoch < current and self.origin is not AppendOrigin.REPLICATION:
            raise ProducerStateError(
                ErrorCode.invalid_producer_epoch,
                f"epoch of producer {self.producer_id} at offset {offset} is {epoch}, "
                f"which is smaller than the last seen epoch {current}",
            )

    def _check_marker_epoch_bumped(self, epoch: int, offset: int) -> None:
        """KIP-1228: a transactions-v2 marker carries the epoch EndTxn bumped, so it must
        be above the producer's; an equal one is a late or repeated marker."""
        current = self.updated_entry.producer_epoch
        if epoch <= current and self.origin is not AppendOrigin.REPLICATION:
            raise ProducerStateError(
                ErrorCode.invalid_producer_epoch,
                f"epoch of the transaction version 2 marker of producer {self.producer_id} at "
                f"offset {offset} is {epoch}, which is not larger than the last seen epoch "
                f"{current}",
            )

    def _check_sequence(self, epoch: int, first_seq: int, offset: int) -> None:
        updated, current = self.updated_entry, self._current
        if epoch != updated.producer_epoch:
            if first_seq != 0 and updated.producer_epoch != NO_PRODUCER_EPOCH:
                raise ProducerStateError(
                    ErrorCode.out_of_order_sequence_number,
                    f"invalid sequence number for new epoch of producer {self.producer_id} at "
                    f"offset {offset}: {epoch} (request epoch), {first_seq} (seq. number), "
                    f"{updated.producer_epoch} (current producer epoch)",
                )
            return
        if not updated.is_empty:
            last_seq = updated.last_seq
        elif epoch == current.producer_epoch:
            last_seq = current.last_seq
        else:
            last_seq = NO_SEQUENCE
        # A producer whose state is gone (retention, DeleteRecords) may go on anywhere.
        in_sequence = first_seq == last_seq + 1 or (first_seq == 0 and last_seq == _INT32_MAX)
        if current.producer_epoch != NO_PRODUCER_EPOCH and not in_sequence:
            raise ProducerStateError(
                ErrorCode.out_of_order_sequence_number,
                f"out of order sequence number for producer {self.producer_id} at offset "
                f"{offset}: {first_seq} (incoming seq. number), {last_seq} (current end "
                "sequence number)",
            )


@dataclass(slots=True)
class ProducerAppendAnalysis:
    """What an append would do to the producer state (Kafka's analyzeAndValidate...)."""

    updated_producers: dict[int, ProducerAppendInfo] = field(default_factory=dict)
    completed_txns: list[CompletedTxn] = field(default_factory=list)
    duplicate: BatchMetadata | None = None


def analyze_and_validate_producer_state(
    manager: ProducerStateManager,
    batches: list[tuple[RecordBatchHeader, EndTransactionMarker | None]],
    origin: AppendOrigin,
    transaction_version: int = 0,
) -> ProducerAppendAnalysis:
    """Stage every batch of an append that carries a producer id; the headers hold the
    offsets (and timestamps) they will have in the log. A client's retry of one of the
    last five batches stops here with ``duplicate`` set. Raises ProducerStateError."""
    analysis = ProducerAppendAnalysis()
    for header, marker in batches:
        pid = header.producer_id
        if pid < 0:
            continue
        if origin is AppendOrigin.CLIENT:
            entry = manager.last_entry(pid)
            duplicate = entry.find_duplicate_batch(header) if entry is not None else None
            if duplicate is not None:
                analysis.duplicate = duplicate
                return analysis
        info = analysis.updated_producers.get(pid)
        if info is None:
            info = analysis.updated_producers[pid] = manager.prepare_update(pid, origin)
        completed = info.append(header, marker, transaction_version)
        if completed is not None:
            analysis.completed_txns.append(completed)
    return analysis


class ProducerStateManager:
    def __init__(self) -> None:
        self._producers: dict[int, ProducerStateEntry] = {}
        # open transactions by first offset, and completed ones whose marker is not yet
        # below the high watermark (Kafka's ongoingTxns / unreplicatedTxns)
        self._ongoing: dict[int, TxnMetadata] = {}
        self._unreplicated: dict[int, TxnMetadata] = {}

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    def active_producers(self) -> dict[int, ProducerStateEntry]:
        return dict(self._producers)

    def prepare_update(self, producer_id: int, origin: AppendOrigin) -> ProducerAppendInfo:
        entry = self._producers.get(producer_id) or ProducerStateEntry(producer_id)
        return ProducerAppendInfo(producer_id, entry, origin)

    def update(self, info: ProducerAppendInfo) -> None:
        """Apply what ``info`` staged, once its batches are in the log."""
        current = self._producers.get(info.producer_id)
        if current is None:
            self._producers[info.producer_id] = info.updated_entry
        else:
            current.update(info.updated_entry)
        for txn in info.started_transactions:
            self._ongoing[txn.first_offset] = txn

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """The LSO to record with a completed transaction in the transaction index: the
        first offset of the earliest other open transaction, else just past its marker."""
        for txn in sorted(self._ongoing.values(), key=lambda t: t.first_offset):
            if txn.producer_id != completed.producer_id:
                return txn.first_offset
        return completed.last_offset + 1

    def complete_txn(self, completed: CompletedTxn) -> None:
        """The transaction ended; it stays unstable until the HW passes its marker."""
        txn = self._ongoing.pop(completed.first_offset, None)
        if txn is None:
            raise ValueError(f"transaction {completed} was not started")
        txn.last_offset = completed.last_offset
        self._unreplicated[completed.first_offset] = txn

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        self._remove_unreplicated_transactions(high_watermark)

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        self._remove_unreplicated_transactions(log_start_offset)

    def _remove_unreplicated_transactions(self, offset: int) -> None:
        if not self._unreplicated:  # the usual case, on every read and every HW move
            return
        done = [
            first
            for first, txn in self._unreplicated.items()
            if txn.last_offset is not None and txn.last_offset < offset
        ]
        for first in done:
            del self._unreplicated[first]

    def first_unstable_offset(self) -> int | None:
        if not self._ongoing and not self._unreplicated:  # no transaction: every read
            return None
        return min(itertools.chain(self._ongoing, self._unreplicated))

    def first_unstable_offset_at(self, high_watermark: int) -> int | None:
        """`on_high_watermark_updated` then `first_unstable_offset`, in one call: every
        read of every partition asks (Partition.last_stable_offset), and nearly all find
        no transaction at all."""
        if not self._ongoing and not self._unreplicated:
            return None
        self._remove_unreplicated_transactions(high_watermark)
        return self.first_unstable_offset()

    def first_undecided_offset(self) -> int | None:
        return min(self._ongoing) if self._ongoing else None

    def ongoing_transactions(self) -> list[TxnMetadata]:
        return sorted(self._ongoing.values(), key=lambda t: t.first_offset)

    def remove_expired_producers(self, now_ms: int, expiration_ms: int) -> list[int]:
        """Forget producers idle for ``producer.id.expiration.ms`` with no transaction
        open (their last batch's timestamp is the clock, as in Kafka)."""
        expired = [
            pid
            for pid, entry in self._producers.items()
            if entry.current_txn_first_offset is None
            and now_ms - entry.last_timestamp >= expiration_ms
        ]
        for pid in expired:
            del self._producers[pid]
        return expired

    def clear(self) -> None:
        self._producers.clear()
        self._ongoing.clear()
        self._unreplicated.clear()

    def load_snapshot(self, entries: list[ProducerStateEntry]) -> None:
        """Start from a snapshot's producers (Kafka's loadFromSnapshot): a follower that
        builds its state from the remote tier (broker/remote/tier_state.py)."""
        self.clear()
        for entry in entries:
            self._producers[entry.producer_id] = entry
