"""Transactions v2 (KIP-890 part 2) in the transaction coordinator, on the manual clock:
an epoch bump at every end (EndTxn v5), retries recognised by their epoch, aborts with
nothing added, fencing, producer id rotation when the epochs run out, and what a
coordinator that reloads ``__transaction_state`` knows."""

from __future__ import annotations

import struct

import pytest
from kio.schema.errors import ErrorCode

from broker.txn.transaction_log import read_txn_record_value, value_to_bytes
from broker.txn.transaction_metadata import SHORT_MAX, TxnTransitMetadata
from broker.txn.transaction_state import TransactionState
from protocol.builders import request_builder
from tests.helpers.dispatch_node import dispatch_node
from tests.helpers.txn_harness import Box, TxnHarness

pytestmark = pytest.mark.usefixtures("timer_tasks_must_not_fail")

E = ErrorCode
S = TransactionState


def test_every_end_bumps_the_epoch_and_answers_it() -> None:
    h = TxnHarness(transaction_version=2)
    r = h.init("tx")
    pid, epoch = r.producer_id, r.producer_epoch
    assert h.add_v2("tx", pid, epoch) is E.none
    assert h.end_v2("tx", pid, epoch, True) == (E.none, pid, epoch + 1)
    assert h.state() is S.PREPARE_COMMIT
    h.deliver_markers()
    assert h.state() is S.COMPLETE_COMMIT
    (marker,) = h.markers
    # The markers carry the bumped epoch and the transaction's version (KIP-1228).
    assert (marker.producer_epoch, marker.transaction_version) == (epoch + 1, 2)
    metadata = h.metadata_of()
    assert (metadata.producer_epoch, metadata.last_producer_epoch) == (epoch + 1, epoch)

    # The next transaction runs with the epoch the answer gave; the old one is fenced.
    assert h.add_v2("tx", pid, epoch) is E.producer_fenced
    assert h.add_v2("tx", pid, epoch + 1, [("t", 1)]) is E.none
    assert h.end_v2("tx", pid, epoch + 1, False) == (E.none, pid, epoch + 2)
    h.deliver_markers()
    assert h.state() is S.COMPLETE_ABORT
    assert h.written() == [
        S.EMPTY,
        S.ONGOING,
        S.PREPARE_COMMIT,
        S.COMPLETE_COMMIT,
        S.ONGOING,
        S.PREPARE_ABORT,
        S.COMPLETE_ABORT,
    ]


def test_a_retry_is_recognised_by_the_epoch_before_the_bump() -> None:
    h = TxnHarness(transaction_version=2)
    r = h.init("tx")
    pid, epoch = r.producer_id, r.producer_epoch
    h.add_v2("tx", pid, epoch)
    h.log.hold = True
    first = Box()
    h.coord.handle_end_transaction(
        "tx", pid, epoch, True, lambda *answer: first(answer), client_transaction_version=2
    )
    # While PrepareCommit is being written, the same end again is CONCURRENT_TRANSACTIONS.
    assert h.end_v2("tx", pid, epoch, True) == (E.concurrent_transactions, -1, -1)
    h.log.hold = False
    h.log.complete()
    assert first.result == (E.none, pid, epoch + 1)
    # Until the markers are written, a retry of the end is CONCURRENT_TRANSACTIONS too.
    assert h.end_v2("tx", pid, epoch, True) == (E.concurrent_transactions, -1, -1)
    h.deliver_markers()
    # Complete: the lost answer is answered again with the current epoch.
    assert h.end_v2("tx", pid, epoch, True) == (E.none, pid, epoch + 1)
    # Kafka's table: an abort retried after a commit is INVALID_TXN_STATE, an older
    # epoch PRODUCER_FENCED.
    assert h.end_v2("tx", pid, epoch, False) == (E.invalid_txn_state, -1, -1)
    assert h.end_v2("tx", pid, epoch - 1, True) == (E.producer_fenced, -1, -1)
    # With the current epoch, a commit with nothing added is INVALID_TXN_STATE ...
    assert h.end_v2("tx", pid, epoch + 1, True) == (E.invalid_txn_state, -1, -1)
    assert len(h.log.records()) == 4


def test_an_abort_with_nothing_added_bumps_the_epoch_and_writes_no_marker() -> None:
    h = TxnHarness(transaction_version=2)
    r = h.init("tx")
    pid, epoch = r.producer_id, r.producer_epoch
    assert h.end_v2("tx", pid, epoch, True) == (E.invalid_txn_state, -1, -1)
    assert h.end_v2("tx", pid, epoch, False) == (E.none, pid, epoch + 1)
    assert h.state() is S.COMPLETE_ABORT  # no partition: completed at once
    assert h.markers == []
    # The same abort retried is answered again; a fresh one bumps once more.
    assert h.end_v2("tx", pid, epoch, False) == (E.none, pid, epoch + 1)
    assert h.end_v2("tx", pid, epoch + 1, False) == (E.none, pid, epoch + 2)


def test_a_v1_client_on_a_v2_cluster_keeps_its_epoch() -> None:
    h = TxnHarness(transaction_version=2)
    r = h.begin("tx")
    assert h.end("tx", r.producer_id, r.producer_epoch, True) is E.none
    h.deliver_markers()
    assert h.metadata_of().producer_epoch == r.producer_epoch
    (marker,) = h.markers
    assert (marker.producer_epoch, marker.transaction_version) == (r.producer_epoch, 0)
    # A v1 client ending a complete transaction again is answered NONE (its retry).
    assert h.end("tx", r.producer_id, r.producer_epoch, True) is E.none


def test_a_new_instance_fences_a_v2_transaction_and_the_abort_bumps_once_more() -> None:
    h = TxnHarness(transaction_version=2)
    r = h.init("tx")
    pid, epoch = r.producer_id, r.producer_epoch
    h.add_v2("tx", pid, epoch)
    assert h.init_box("tx").result.error is E.concurrent_transactions
    # The fence bumped the epoch, the abort (at the cluster's version 2) once more.
    assert h.state() is S.PREPARE_ABORT
    assert h.metadata_of().producer_epoch == epoch + 2
    h.deliver_markers()
    (marker,) = h.markers
    assert marker.producer_epoch == epoch + 2
    again = h.init("tx")
    assert (again.producer_id, again.producer_epoch) == (pid, epoch + 3)
    # The fenced instance is refused.
    assert h.end_v2("tx", pid, epoch, True) == (E.producer_fenced, -1, -1)


def test_a_timed_out_transaction_is_aborted_at_the_clusters_version() -> None:
    h = TxnHarness(transaction_version=0)
    r = h.init("tx", timeout_ms=1000)
    h.add_v2("tx", r.producer_id, r.producer_epoch)
    h.advance(12_000)
    assert h.state() is S.PREPARE_ABORT
    # transaction.version 0: the fence's epoch only.
    assert h.metadata_of().producer_epoch == r.producer_epoch + 1


def test_the_epochs_running_out_move_the_producer_to_the_next_id() -> None:
    h = TxnHarness(transaction_version=2)
    r = h.init("tx")
    pid = r.producer_id
    metadata = h.metadata_of()
    metadata.producer_epoch = SHORT_MAX - 1
    h.add_v2("tx", pid, SHORT_MAX - 1)
    assert h.end_v2("tx", pid, SHORT_MAX - 1, True) == (E.none, pid, SHORT_MAX)
    h.deliver_markers()
    metadata = h.metadata_of()
    assert metadata.producer_id != pid and metadata.producer_epoch == 0
    assert metadata.last_producer_id == pid
    # The end retried with the old producer id and epoch is answered with the new ones.
    assert h.end_v2("tx", pid, SHORT_MAX - 1, True) == (E.none, metadata.producer_id, 0)


def test_a_reloaded_coordinator_knows_the_client_version_and_the_previous_producer() -> None:
    h = TxnHarness(transaction_version=2)
    h.metadata.register_broker(1, "127.0.0.1", 9999)
    r = h.init("tx")
    pid, epoch = r.producer_id, r.producer_epoch
    h.add_v2("tx", pid, epoch)
    h.end_v2("tx", pid, epoch, True)
    # Version 1 values, with the tagged fields of Kafka 4.
    _key, value = h.log.records()[-1]
    assert value is not None and value[:2] == b"\x00\x01"
    assert read_txn_record_value(value).client_transaction_version == 2
    partition = h.manager.partition_for("tx")
    h.metadata.change_partition("__transaction_state", partition, leader=1)
    h.metadata.change_partition("__transaction_state", partition, leader=0)
    reloaded = h.metadata_of()
    assert reloaded.state is S.PREPARE_COMMIT
    assert (reloaded.producer_epoch, reloaded.client_transaction_version) == (epoch + 1, 2)
    assert reloaded.last_producer_id == pid
    h.deliver_markers()  # the new coordinator completes it, with version 2 markers
    assert h.state() is S.COMPLETE_COMMIT
    assert h.markers[-1].transaction_version == 2


def test_transaction_version_0_writes_version_0_values() -> None:
    h = TxnHarness(transaction_version=0)
    h.begin("tx")
    assert all(v is not None and v[:2] == b"\x00\x00" for _k, v in h.log.records())


def test_a_version_1_value_is_kafkas_bytes_with_its_tagged_fields() -> None:
    """``TransactionLogValue.json`` v1 by hand: the fields, then the tagged fields that
    differ from their defaults in tag order (0 PreviousProducerId, 2
    ClientTransactionVersion; NextProducerId -1 is left out)."""
    transit = TxnTransitMetadata(
        producer_id=4_000_000_000,
        last_producer_id=4_000_000_000,
        producer_epoch=8,
        last_producer_epoch=7,
        txn_timeout_ms=60000,
        txn_state=S.PREPARE_COMMIT,
        topic_partitions=frozenset({("x", 0)}),
        txn_start_timestamp=1_700_000_000_000,
        txn_last_update_timestamp=1_700_000_005_000,
        client_transaction_version=2,
    )
    expected = (
        struct.pack(">hqhib", 1, 4_000_000_000, 8, 60000, S.PREPARE_COMMIT.id)
        + b"\x02"  # one topic (compact array: count + 1)
        + b"\x02x"  # "x" (compact string)
        + b"\x02"
        + struct.pack(">i", 0)  # [0]
        + b"\x00"  # the topic's tagged fields
        + struct.pack(">qq", 1_700_000_005_000, 1_700_000_000_000)
        + b"\x02"  # two tagged fields
        + b"\x00\x08"
        + struct.pack(">q", 4_000_000_000)  # tag 0, 8 bytes
        + b"\x02\x02"
        + struct.pack(">h", 2)  # tag 2, 2 bytes
    )
    assert value_to_bytes(transit, 2) == expected
    decoded = read_txn_record_value(expected)
    assert (decoded.previous_producer_id, decoded.next_producer_id) == (4_000_000_000, -1)
    assert decoded.client_transaction_version == 2
    # transaction.version 0 writes version 0, as before (the golden files' bytes).
    assert value_to_bytes(transit, 0)[:2] == b"\x00\x00"


async def test_end_txn_v5_answers_the_producer_id_and_epoch_fields() -> None:
    """``EndTxnResponse.json`` v5 by hand: throttle, error, ProducerId, ProducerEpoch,
    tagged fields; refused here (nobody coordinates the id), so -1 and -1."""
    node = dispatch_node()
    body = request_builder(26, 5).EndTxnRequest(
        transactional_id="tx", producer_id=7, producer_epoch=3, committed=True
    )
    in_flight = node.send(26, 5, body)
    if in_flight.future is not None:
        node.dispatcher.settle(in_flight)
    frame = node.dispatcher.encode(in_flight)
    assert frame is not None
    # size, correlation id, the header's tagged fields, then the body.
    body_bytes = bytes(frame)[4 + 4 + 1 :]
    assert body_bytes == (struct.pack(">ihqh", 0, E.not_coordinator.value, -1, -1) + b"\x00")
