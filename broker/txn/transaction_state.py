"""The transaction states and the table of legal moves between them.

Kafka's ``TransactionState`` (TransactionMetadata.scala): eight states, each with the id
it is stored under in ``__transaction_state`` and the name DescribeTransactions and
ListTransactions report, and for each state the set of states a transaction may come
*from* (``validPreviousStates``). As for groups (``broker/group/group_state.py``), the
table is data, so a test can check every pair; a move outside it is a coordinator bug
and raises.

The life of one transaction::

    Empty/CompleteCommit/CompleteAbort --AddPartitions/AddOffsets--> Ongoing
    Ongoing --EndTxn(commit)--> PrepareCommit --markers written--> CompleteCommit
    Ongoing --EndTxn(abort)---> PrepareAbort  --markers written--> CompleteAbort
    Ongoing --InitProducerId of a new instance, or the timeout--> PrepareEpochFence
            --> PrepareAbort --> CompleteAbort
    Empty/CompleteCommit/CompleteAbort --transactional.id.expiration.ms--> Dead

PrepareEpochFence and Dead are only ever *pending* states: the coordinator prepares the
move, and either turns it into the next one (the fence into PrepareAbort) or removes
the transactional id (Dead) once its tombstone is written.
"""

from __future__ import annotations

from enum import Enum


class TransactionState(Enum):
    """Kafka's transaction states; ``value`` is the name the admin APIs report."""

    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"
    DEAD = "Dead"
    PREPARE_EPOCH_FENCE = "PrepareEpochFence"

    def __str__(self) -> str:
        return self.value

    @property
    def id(self) -> int:
        """The ``TransactionStatus`` byte of the ``__transaction_state`` value."""
        return STATE_IDS[self]

    @property
    def is_expiration_allowed(self) -> bool:
        """Whether a transactional id idle in this state may expire (no transaction open)."""
        return self in _EXPIRABLE


STATE_IDS: dict[TransactionState, int] = {
    TransactionState.EMPTY: 0,
    TransactionState.ONGOING: 1,
    TransactionState.PREPARE_COMMIT: 2,
    TransactionState.PREPARE_ABORT: 3,
    TransactionState.COMPLETE_COMMIT: 4,
    TransactionState.COMPLETE_ABORT: 5,
    TransactionState.DEAD: 6,
    TransactionState.PREPARE_EPOCH_FENCE: 7,
}
_BY_ID = {v: k for k, v in STATE_IDS.items()}

_EXPIRABLE = frozenset(
    {TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT}
)

_S = TransactionState

VALID_PREVIOUS_STATES: dict[TransactionState, frozenset[TransactionState]] = {
    # InitProducerId (a new epoch) after nothing, or after a finished transaction.
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    # AddPartitionsToTxn / AddOffsetsToTxn: the first starts a transaction, later ones add.
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    # EndTxn(commit).
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    # EndTxn(abort), or the abort a fence (new instance, timeout) turns into; with
    # transactions v2 also an abort with no partition added (from Empty or Complete*).
    _S.PREPARE_ABORT: frozenset(
        {_S.ONGOING, _S.PREPARE_EPOCH_FENCE, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}
    ),
    # Every marker acknowledged.
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    # transactional.id.expiration.ms of an idle id.
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_ABORT, _S.COMPLETE_COMMIT}),
    # A new producer instance, or the transaction timeout, fences an open transaction.
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}


class IllegalTransactionStateTransition(RuntimeError):
    """A transition the table (or a transition's own checks) forbids: a coordinator bug."""


def is_valid_transition(current: TransactionState, target: TransactionState) -> bool:
    """True when ``target`` lists ``current`` among its valid previous states."""
    return current in VALID_PREVIOUS_STATES[target]


def state_from_id(state_id: int) -> TransactionState:
    """The state stored as ``state_id``; ValueError for an id Kafka does not define."""
    try:
        return _BY_ID[state_id]
    except KeyError:
        raise ValueError(
            f"Unknown transaction state id {state_id} from the transaction status message"
        ) from None


def state_from_name(name: str) -> TransactionState | None:
    """The state named ``name`` exactly as Kafka names it (ListTransactions' filter)."""
    for state in TransactionState:
        if state.value == name:
            return state
    return None
