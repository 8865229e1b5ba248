"""The admin side of the transaction coordinator: DescribeTransactions and
ListTransactions (Kafka's ``handleDescribeTransactions`` and the state manager's
``listTransactionStates``), read from the state manager's cache. Nothing here changes
a transaction.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from broker.txn.transaction_metadata import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, TopicPartition
from broker.txn.transaction_state import TransactionState, state_from_name
from broker.txn.transaction_state_manager import TransactionStateManager

E = ErrorCode
S = TransactionState


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    """DescribeTransactions' answer for one transactional id."""

    transactional_id: str
    error: ErrorCode
    state: str = ""
    txn_timeout_ms: int = 0
    txn_start_timestamp: int = -1
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    topic_partitions: list[TopicPartition] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class TransactionListing:
    """ListTransactions' entry for one transactional id."""

    transactional_id: str
    producer_id: int
    state: TransactionState


def describe_transaction(
    manager: TransactionStateManager, transactional_id: str
) -> TransactionDescription:
    """An id being expired (pending Dead) or unknown is TRANSACTIONAL_ID_NOT_FOUND."""
    if not transactional_id:
        return TransactionDescription(transactional_id, E.invalid_request)
    error, found = manager.get_transaction_state(transactional_id)
    if error is not E.none:
        return TransactionDescription(transactional_id, error)
    if found is None or found.transaction_metadata.state is S.DEAD:
        return TransactionDescription(transactional_id, E.transactional_id_not_found)
    m = found.transaction_metadata
    return TransactionDescription(
        transactional_id,
        E.none,
        m.state.value,
        m.txn_timeout_ms,
        m.txn_start_timestamp,
        m.producer_id,
        m.producer_epoch,
        sorted(m.topic_partitions),
    )


def list_transaction_states(
    manager: TransactionStateManager,
    producer_ids: Iterable[int] = (),
    state_names: Iterable[str] = (),
    duration_filter_ms: int = -1,
    transactional_id_pattern: str | None = None,
) -> tuple[list[TransactionListing], list[str]]:
    """The ids matching every filter given (producer ids, state names, open longer than
    ``duration_filter_ms``, id matching the regular expression), and the state filters
    that name no state (Kafka's ``unknownStateFilters``)."""
    wanted_pids = set(producer_ids)
    states: set[TransactionState] = set()
    unknown: list[str] = []
    for name in state_names:
        state = state_from_name(name)
        if state is None:
            unknown.append(name)
        else:
            states.add(state)
    pattern = re.compile(transactional_id_pattern) if transactional_id_pattern else None
    now = manager.now_ms()
    out = []
    for m in manager.all_transactions():
        if m.state is S.DEAD:
            continue
        if wanted_pids and m.producer_id not in wanted_pids:
            continue
        if (states or unknown) and m.state not in states:
            continue
        if duration_filter_ms >= 0 and now - m.txn_start_timestamp <= duration_filter_ms:
            continue
        if pattern is not None and pattern.fullmatch(m.transactional_id) is None:
            continue
        out.append(TransactionListing(m.transactional_id, m.producer_id, m.state))
    return out, unknown
