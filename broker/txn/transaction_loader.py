"""Reading a ``__transaction_state`` partition back, in steps (Kafka's
``TransactionStateManager.loadTransactionMetadata``).

:func:`load_partition` is a generator for a :class:`~broker.coordinator.coordinator_loader.LoadJob`:
it reads the partition a record batch a step, keeping each key's last record undecoded
(what compaction keeps, and what replaying every record would leave: the later record
of a transactional id always wins), then decodes the survivors ``DECODE_UNIT`` a step,
and returns the transactions it found (a tombstone's id has none). The
:class:`~broker.txn.transaction_state_manager.TransactionStateManager` installs them;
:func:`transactions_to_complete` picks those caught between PrepareCommit/Abort and
Complete, whose markers the new coordinator owes.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from dataclasses import dataclass, field

from broker.txn.transaction_log import KeyValue, decode_all
from broker.txn.transaction_metadata import TransactionMetadata, TxnTransitMetadata
from broker.txn.transaction_state import TransactionState

S = TransactionState

DECODE_UNIT = 64  # records decoded a step (a few hundred microseconds)


@dataclass
class LoadedTransactions:
    transactions: dict[str, TransactionMetadata] = field(default_factory=dict)
    records: int = 0  # records read


@dataclass(frozen=True, slots=True)
class TransactionToComplete:
    """A loaded transaction caught between Prepare and Complete: its markers are owed."""

    transactional_id: str
    coordinator_epoch: int
    commit: bool
    txn_metadata: TransactionMetadata
    transit: TxnTransitMetadata


def load_partition(
    batches: Iterator[list[KeyValue]],
) -> Generator[int, None, LoadedTransactions]:
    """The steps of a load of the partition whose batches ``batches`` gives; each yields
    the units of work it did (records read or decoded)."""
    loaded = LoadedTransactions()
    latest: dict[bytes, bytes | None] = {}
    for batch in batches:
        for key, value in batch:
            latest.pop(key, None)  # keys in the order of their last record
            latest[key] = value
        loaded.records += len(batch)
        yield len(batch)
    survivors = list(latest.items())
    latest.clear()
    transactions = loaded.transactions
    for start in range(0, len(survivors), DECODE_UNIT):
        decoded = decode_all(survivors[start : start + DECODE_UNIT])
        for transactional_id, txn_value in decoded.items():
            if txn_value is None:
                transactions.pop(transactional_id, None)
            else:
                transactions[transactional_id] = txn_value.to_metadata(transactional_id)
        yield DECODE_UNIT
    return loaded


def transactions_to_complete(
    loaded: dict[str, TransactionMetadata], coordinator_epoch: int, now_ms: int
) -> list[TransactionToComplete]:
    """The loaded transactions caught between Prepare and Complete, prepared for their
    completion (their markers are sent, then CompleteCommit/Abort written)."""
    return [
        TransactionToComplete(
            transactional_id,
            coordinator_epoch,
            metadata.state is S.PREPARE_COMMIT,
            metadata,
            metadata.prepare_complete(now_ms),
        )
        for transactional_id, metadata in loaded.items()
        if metadata.state in (S.PREPARE_ABORT, S.PREPARE_COMMIT)
    ]
