"""The transaction state machine: the table of moves, TransactionMetadata's two-step
transitions, and the ``__transaction_state`` record schemas."""

from __future__ import annotations

import itertools
import struct

import pytest

from broker.txn.transaction_log import (
    key_to_bytes,
    read_txn_record_key,
    read_txn_record_value,
    value_to_bytes,
)
from broker.txn.transaction_metadata import (
    NO_PRODUCER_EPOCH,
    SHORT_MAX,
    TransactionMetadata,
    TxnTransitMetadata,
    new_transaction_metadata,
)
from broker.txn.transaction_state import (
    VALID_PREVIOUS_STATES,
    IllegalTransactionStateTransition,
    TransactionState,
    is_valid_transition,
    state_from_id,
    state_from_name,
)

S = TransactionState

# Kafka 4's table (TransactionState.java), written out pair by pair: transactions v2
# (KIP-890) abort from Empty and the Complete states.
EXPECTED = {
    S.EMPTY: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.ONGOING: {S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.PREPARE_COMMIT: {S.ONGOING},
    S.PREPARE_ABORT: {
        S.ONGOING,
        S.PREPARE_EPOCH_FENCE,
        S.EMPTY,
        S.COMPLETE_COMMIT,
        S.COMPLETE_ABORT,
    },
    S.COMPLETE_COMMIT: {S.PREPARE_COMMIT},
    S.COMPLETE_ABORT: {S.PREPARE_ABORT},
    S.DEAD: {S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT},
    S.PREPARE_EPOCH_FENCE: {S.ONGOING},
}


def _meta(state: TransactionState, epoch: int = 3) -> TransactionMetadata:
    return TransactionMetadata(
        transactional_id="tx",
        producer_id=7,
        last_producer_id=-1,
        producer_epoch=epoch,
        last_producer_epoch=-1,
        txn_timeout_ms=1000,
        state=state,
        topic_partitions={("t", 0)} if state is not S.EMPTY else set(),
        txn_start_timestamp=10,
        txn_last_update_timestamp=10,
    )


@pytest.mark.parametrize(("current", "target"), list(itertools.product(S, S)))
def test_every_pair_of_states_follows_kafkas_table(
    current: TransactionState, target: TransactionState
) -> None:
    allowed = current in EXPECTED[target]
    assert is_valid_transition(current, target) is allowed
    assert (current in VALID_PREVIOUS_STATES[target]) is allowed
    metadata = _meta(current)

    def prepare() -> TxnTransitMetadata:
        return metadata._prepare_transition_to(target, 7, 3, -1, 1000, frozenset(), 10, 20)

    if allowed:
        assert prepare().txn_state is target
        assert metadata.pending_state is target
    else:
        with pytest.raises(IllegalTransactionStateTransition):
            prepare()
        assert metadata.pending_state is None


def test_state_ids_and_names_are_kafkas() -> None:
    assert [s.id for s in S] == [0, 1, 2, 3, 4, 5, 6, 7]
    assert [state_from_id(i) for i in range(8)] == list(S)
    assert state_from_name("PrepareEpochFence") is S.PREPARE_EPOCH_FENCE
    assert state_from_name("ongoing") is None  # exact, as Kafka's fromName
    with pytest.raises(ValueError):
        state_from_id(8)
    assert [s for s in S if s.is_expiration_allowed] == [
        S.EMPTY,
        S.COMPLETE_COMMIT,
        S.COMPLETE_ABORT,
    ]


def test_a_prepared_move_blocks_another_until_completed() -> None:
    m = new_transaction_metadata("tx", 7, 1000, 0)
    transit = m.prepare_increment_producer_epoch(1000, None, 5)
    assert transit is not None and transit.producer_epoch == 0
    assert m.pending_transition_in_progress
    with pytest.raises(IllegalTransactionStateTransition):
        m.prepare_add_partitions({("t", 0)}, 6)
    m.complete_transition_to(transit)
    assert (m.state, m.producer_epoch, m.pending_state) == (S.EMPTY, 0, None)
    with pytest.raises(IllegalTransactionStateTransition):
        m.complete_transition_to(transit)  # nothing pending


def test_add_partitions_starts_the_clock_once_and_keeps_adding() -> None:
    m = _meta(S.EMPTY)
    first = m.prepare_add_partitions({("t", 0)}, 100)
    m.complete_transition_to(first)
    assert (m.state, m.txn_start_timestamp) == (S.ONGOING, 100)
    second = m.prepare_add_partitions({("t", 1)}, 200)
    m.complete_transition_to(second)
    assert m.txn_start_timestamp == 100  # the transaction started at its first partition
    assert m.topic_partitions == {("t", 0), ("t", 1)}
    assert m.txn_last_update_timestamp == 200


def test_commit_then_complete_clears_the_partitions() -> None:
    m = _meta(S.ONGOING)
    m.complete_transition_to(m.prepare_abort_or_commit(S.PREPARE_COMMIT, 50))
    assert m.state is S.PREPARE_COMMIT and m.topic_partitions == {("t", 0)}
    complete = m.prepare_complete(60)
    m.remove_partition(("t", 0))
    m.complete_transition_to(complete)
    assert (m.state, m.topic_partitions) == (S.COMPLETE_COMMIT, set())


def test_fence_bumps_the_epoch_once_even_after_a_failed_fence() -> None:
    m = _meta(S.ONGOING, epoch=3)
    assert m.prepare_fence_producer_epoch().producer_epoch == 4
    m.pending_state = None
    m.has_failed_epoch_fence = True
    assert m.prepare_fence_producer_epoch().producer_epoch == 3
    m.pending_state = None
    m.producer_epoch = SHORT_MAX
    with pytest.raises(IllegalTransactionStateTransition):
        m.prepare_fence_producer_epoch()


def test_increment_epoch_with_an_expected_epoch() -> None:
    m = _meta(S.EMPTY, epoch=5)
    # The producer's own epoch: bump, remember the previous one.
    t = m.prepare_increment_producer_epoch(1000, 5, 1)
    assert t is not None and (t.producer_epoch, t.last_producer_epoch) == (6, 5)
    m.complete_transition_to(t)
    # A retry of that bump (the answer was lost): the same epoch again.
    t = m.prepare_increment_producer_epoch(1000, 5, 2)
    assert t is not None and (t.producer_epoch, t.last_producer_epoch) == (6, 5)
    m.pending_state = None
    # Anything else is a fenced producer.
    assert m.prepare_increment_producer_epoch(1000, 2, 3) is None
    assert m.pending_state is None


def test_rotation_gives_a_new_producer_id_with_epoch_zero() -> None:
    m = _meta(S.COMPLETE_COMMIT, epoch=SHORT_MAX - 1)
    assert m.is_producer_epoch_exhausted
    t = m.prepare_producer_id_rotation(99, 1000, 5, record_last_epoch=True)
    m.complete_transition_to(t)
    assert (m.producer_id, m.producer_epoch, m.last_producer_id) == (99, 0, 7)
    assert m.last_producer_epoch == SHORT_MAX - 1
    ongoing = _meta(S.ONGOING)
    with pytest.raises(IllegalTransactionStateTransition):
        ongoing.prepare_producer_id_rotation(99, 1000, 5, record_last_epoch=False)


def test_prepare_epoch_fence_and_dead_are_never_completed() -> None:
    m = _meta(S.ONGOING)
    fence = m.prepare_fence_producer_epoch()
    with pytest.raises(IllegalTransactionStateTransition):
        m.complete_transition_to(fence)
    idle = _meta(S.EMPTY)
    dead = idle.prepare_dead()
    with pytest.raises(IllegalTransactionStateTransition):
        idle.complete_transition_to(dead)


def test_a_transit_that_loses_a_partition_is_refused() -> None:
    m = _meta(S.ONGOING)
    bad = m._prepare_transition_to(S.ONGOING, 7, 3, -1, 1000, frozenset(), 10, 20)
    with pytest.raises(IllegalTransactionStateTransition):
        m.complete_transition_to(bad)


# ---------------------------------------------------------------- the log schemas
def test_records_round_trip_in_kafkas_schema() -> None:
    m = _meta(S.ONGOING)
    transit = m.prepare_add_partitions({("t", 1), ("u", 0)}, 77)
    key, value = key_to_bytes("tx"), value_to_bytes(transit)
    assert key == struct.pack(">hh", 0, 2) + b"tx"
    assert value[:2] == b"\x00\x00"  # value version 0
    assert read_txn_record_key(key) == "tx"
    decoded = read_txn_record_value(value)
    assert decoded.state is S.ONGOING
    assert decoded.topic_partitions == {("t", 0), ("t", 1), ("u", 0)}
    assert (decoded.producer_id, decoded.producer_epoch, decoded.txn_timeout_ms) == (7, 3, 1000)
    assert (decoded.txn_start_timestamp, decoded.txn_last_update_timestamp) == (10, 77)
    loaded = decoded.to_metadata("tx")
    assert loaded.last_producer_epoch == NO_PRODUCER_EPOCH  # not in the schema, as Kafka


def test_empty_is_written_with_null_partitions() -> None:
    m = new_transaction_metadata("tx", 7, 1000, 0)
    transit = m.prepare_increment_producer_epoch(1000, None, 5)
    assert transit is not None
    value = value_to_bytes(transit)
    # version, producer id, epoch, timeout, status, then the partitions array: -1 (null)
    assert struct.unpack_from(">i", value, 2 + 8 + 2 + 4 + 1)[0] == -1
    assert read_txn_record_value(value).topic_partitions == frozenset()


def test_a_flexible_value_version_1_is_read() -> None:
    def uvarint(n: int) -> bytes:
        out = bytearray()
        while True:
            byte = n & 0x7F
            n >>= 7
            if n:
                out.append(byte | 0x80)
            else:
                out.append(byte)
                return bytes(out)

    body = struct.pack(">hqhib", 1, 42, 2, 5000, S.PREPARE_COMMIT.id)
    body += uvarint(2)  # one topic (compact array: n + 1)
    body += uvarint(2) + b"t" + uvarint(3) + struct.pack(">ii", 0, 3) + uvarint(0)
    body += struct.pack(">qq", 900, 800)
    body += uvarint(1) + uvarint(2) + uvarint(2) + b"\x00\x02"  # tag 2: client version
    decoded = read_txn_record_value(body)
    assert decoded.state is S.PREPARE_COMMIT
    assert decoded.topic_partitions == {("t", 0), ("t", 3)}
    assert (decoded.producer_id, decoded.txn_last_update_timestamp) == (42, 900)
