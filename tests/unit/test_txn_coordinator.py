"""The transaction coordinator on a manual clock: InitProducerId, AddPartitionsToTxn,
EndTxn with its markers, fencing, concurrent requests, timeouts and expiry."""

from __future__ import annotations

import logging

import pytest
from kio.schema.errors import ErrorCode

from broker.server.purgatories import PurgatoryName, PurgatoryOutcome
from broker.txn.transaction_log import TRANSACTION_STATE_TOPIC_NAME
from broker.txn.transaction_metadata import SHORT_MAX
from broker.txn.transaction_state import TransactionState
from tests.helpers.txn_harness import Request, TxnHarness

pytestmark = pytest.mark.usefixtures("timer_tasks_must_not_fail")

E = ErrorCode
S = TransactionState


# ---------------------------------------------------------------- InitProducerId
def test_a_new_transactional_id_gets_a_producer_id_and_epoch_zero() -> None:
    h = TxnHarness()
    first = h.init("tx")
    assert (first.producer_id, first.producer_epoch) == (1000, 0)
    assert h.written("tx") == [S.EMPTY]
    again = h.init("tx")  # a new instance of the same producer
    assert (again.producer_id, again.producer_epoch) == (1000, 1)
    other = h.init("other")
    assert other.producer_id == 1001


def test_init_validates_the_timeout_and_the_id() -> None:
    h = TxnHarness(transaction_max_timeout_ms=60_000)
    assert h.init_box("tx", 60_001).result.error is E.invalid_transaction_timeout
    assert h.init_box("tx", 0).result.error is E.invalid_transaction_timeout
    assert h.init_box("", 1000).result.error is E.invalid_request
    assert h.log.records() == []


def test_init_with_the_producers_own_epoch_bumps_it_and_a_stale_one_is_fenced() -> None:
    h = TxnHarness()
    r = h.init("tx")
    bumped = h.init_box("tx", expected=(r.producer_id, r.producer_epoch)).result
    assert (bumped.error, bumped.producer_epoch) == (E.none, 1)
    retry = h.init_box("tx", expected=(r.producer_id, r.producer_epoch)).result
    assert (retry.error, retry.producer_epoch) == (E.none, 1)  # a retry of that bump
    h.init("tx")  # another instance takes over (epoch 2, previous epoch forgotten)
    stale = h.init_box("tx", expected=(r.producer_id, 1)).result
    assert stale.error is E.producer_fenced
    assert h.init_box("tx", expected=(12345, 0)).result.error is E.producer_fenced


def test_an_exhausted_epoch_rotates_the_producer_id() -> None:
    h = TxnHarness()
    r = h.init("tx")
    h.metadata_of("tx").producer_epoch = SHORT_MAX - 1
    rotated = h.init("tx")
    assert rotated.producer_id != r.producer_id
    assert rotated.producer_epoch == 0


def test_init_waits_in_the_produce_purgatory_while_the_log_replicates() -> None:
    h = TxnHarness()
    h.log.hold = True
    request = Request()
    box = h.init_box("tx", request=request)
    assert not box.done and request.purgatory is PurgatoryName.PRODUCE
    h.log.complete()
    assert box.result.error is E.none and request.outcome is PurgatoryOutcome.COMPLETED


def test_a_failed_append_is_mapped_and_leaves_the_state_as_it_was() -> None:
    h = TxnHarness()
    r = h.init("tx")
    h.log.fail_next = E.not_enough_replicas
    assert h.add("tx", r.producer_id, r.producer_epoch) is E.coordinator_not_available
    m = h.metadata_of("tx")
    assert (m.state, m.pending_state, m.topic_partitions) == (S.EMPTY, None, set())
    h.log.fail_next = E.not_leader_or_follower
    assert h.add("tx", r.producer_id, r.producer_epoch) is E.not_coordinator
    assert h.add("tx", r.producer_id, r.producer_epoch) is E.none


# ---------------------------------------------------------------- AddPartitions
def test_add_partitions_starts_the_transaction_and_checks_the_producer() -> None:
    h = TxnHarness()
    r = h.init("tx")
    assert h.add("tx", r.producer_id + 1, r.producer_epoch) is E.invalid_producer_id_mapping
    assert h.add("tx", r.producer_id, r.producer_epoch + 1) is E.producer_fenced
    assert h.add("unknown", r.producer_id, 0) is E.invalid_producer_id_mapping
    assert h.add("tx", r.producer_id, r.producer_epoch, [("t", 0), ("t", 1)]) is E.none
    assert h.state("tx") is S.ONGOING
    written = len(h.log.records())
    # Already in the transaction: answered at once, nothing written.
    assert h.add("tx", r.producer_id, r.producer_epoch, [("t", 1)]) is E.none
    assert len(h.log.records()) == written


def test_verify_only_answers_which_partitions_the_transaction_has() -> None:
    # Kafka 4: a partition not in the transaction is TRANSACTION_ABORTABLE (the
    # AddPartitionsToTxn handler answers INVALID_TXN_STATE to a v4 request).
    h = TxnHarness()
    r = h.begin("tx")
    answer = h.coord.handle_verify_partitions_in_transaction(
        "tx", r.producer_id, r.producer_epoch, [("t", 0), ("t", 1)]
    )
    assert answer == {("t", 0): E.none, ("t", 1): E.transaction_abortable}


# ---------------------------------------------------------------------- EndTxn
@pytest.mark.parametrize("commit", [True, False])
def test_end_writes_prepare_then_markers_then_complete(commit: bool) -> None:
    h = TxnHarness()
    r = h.begin("tx")
    h.add("tx", r.producer_id, r.producer_epoch, [("t", 1)])
    request = Request()
    assert h.end("tx", r.producer_id, r.producer_epoch, commit, request) is E.none
    prepare, complete = (
        (S.PREPARE_COMMIT, S.COMPLETE_COMMIT) if commit else (S.PREPARE_ABORT, S.COMPLETE_ABORT)
    )
    assert h.written("tx")[-1] is prepare
    m = h.metadata_of("tx")
    assert (m.state, m.pending_state) == (prepare, complete)
    assert h.sender.woken == [0]
    # While the markers are out, the producer's next transaction must wait.
    assert h.add("tx", r.producer_id, r.producer_epoch) is E.concurrent_transactions
    assert h.init_box("tx").result.error is E.concurrent_transactions
    assert h.deliver_markers() == 1
    (marker,) = h.markers
    assert (marker.commit, marker.producer_epoch, marker.coordinator_epoch) == (commit, 0, 0)
    assert marker.partitions == {("t", 0), ("t", 1)}
    assert h.written("tx")[-1] is complete
    assert (h.state("tx"), h.metadata_of("tx").topic_partitions) == (complete, set())
    # The next transaction may start.
    assert h.add("tx", r.producer_id, r.producer_epoch) is E.none


def test_end_follows_kafkas_rules_in_every_state() -> None:
    h = TxnHarness()
    r = h.init("tx")
    pid, epoch = r.producer_id, r.producer_epoch
    assert h.end("tx", pid, epoch, True) is E.invalid_txn_state  # Empty
    h.add("tx", pid, epoch)
    assert h.end("tx", pid, epoch + 1, True) is E.producer_fenced
    assert h.end("tx", pid + 1, epoch, True) is E.invalid_producer_id_mapping
    assert h.end("tx", pid, epoch, True) is E.none
    assert h.end("tx", pid, epoch, True) is E.concurrent_transactions  # markers pending
    h.deliver_markers()
    assert h.end("tx", pid, epoch, True) is E.none  # a retried commit: already done
    assert h.end("tx", pid, epoch, False) is E.invalid_txn_state
    h.add("tx", pid, epoch)
    assert h.end("tx", pid, epoch, False) is E.none
    h.deliver_markers()
    assert h.end("tx", pid, epoch, False) is E.none
    assert h.end("tx", pid, epoch, True) is E.invalid_txn_state


def test_markers_go_to_each_partitions_leader() -> None:
    h = TxnHarness(brokers=3, topics={"t": 3})
    for p in range(3):
        h.metadata.change_partition("t", p, leader=p)
    r = h.init("tx")
    h.add("tx", r.producer_id, r.producer_epoch, [("t", 0), ("t", 1), ("t", 2)])
    h.end("tx", r.producer_id, r.producer_epoch, True)
    assert sorted(h.sender.woken) == [0, 1, 2]
    assert h.deliver_markers() == 3
    assert h.state("tx") is S.COMPLETE_COMMIT


# ---------------------------------------------------------------------- fencing
def test_a_new_instance_aborts_the_open_transaction_and_fences_the_old_one() -> None:
    h = TxnHarness()
    old = h.begin("tx")
    h.log.hold = True
    request = Request()
    box = h.init_box("tx", request=request)
    assert not box.done and request.purgatory is PurgatoryName.PRODUCE  # PrepareAbort
    h.log.hold = False
    h.log.complete()
    assert box.result.error is E.concurrent_transactions
    m = h.metadata_of("tx")
    assert (m.state, m.producer_epoch) == (S.PREPARE_ABORT, old.producer_epoch + 1)
    # The old instance is fenced at once, at the coordinator.
    assert h.end("tx", old.producer_id, old.producer_epoch, True) is E.producer_fenced
    assert h.add("tx", old.producer_id, old.producer_epoch) is E.producer_fenced
    # The retry waits for the abort's markers, which carry the bumped epoch.
    assert h.init_box("tx").result.error is E.concurrent_transactions
    h.deliver_markers()
    (marker,) = h.markers
    assert (marker.commit, marker.producer_epoch) == (False, old.producer_epoch + 1)
    assert h.written("tx")[-2:] == [S.PREPARE_ABORT, S.COMPLETE_ABORT]
    new = h.init("tx")
    assert (new.producer_id, new.producer_epoch) == (old.producer_id, old.producer_epoch + 2)


def test_a_fence_whose_write_fails_reuses_its_epoch() -> None:
    h = TxnHarness()
    old = h.begin("tx")
    h.log.fail_next = E.not_enough_replicas
    assert h.init_box("tx").result.error is E.coordinator_not_available
    m = h.metadata_of("tx")
    assert m.has_failed_epoch_fence and m.producer_epoch == old.producer_epoch + 1
    assert h.init_box("tx").result.error is E.concurrent_transactions
    assert h.metadata_of("tx").producer_epoch == old.producer_epoch + 1  # not bumped again


# ---------------------------------------------------------------------- timeouts
def test_a_transaction_open_longer_than_its_timeout_is_aborted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    h = TxnHarness(abort_timed_out_transactions_interval_ms=10_000)
    r = h.begin("tx", timeout_ms=5_000)
    h.advance(9_900)
    assert h.state("tx") is S.ONGOING
    with caplog.at_level(logging.INFO, logger="broker.txn"):
        h.advance(200)  # the abort job runs at 10 000 ms
        m = h.metadata_of("tx")
        assert (m.state, m.producer_epoch) == (S.PREPARE_ABORT, r.producer_epoch + 1)
        assert h.coord.timed_out_aborts == 1
        h.deliver_markers()
    assert h.state("tx") is S.COMPLETE_ABORT
    assert "Completed rollback of ongoing transaction for transactionalId tx due to timeout" in (
        caplog.text
    )
    # The producer that let it time out is fenced.
    assert h.end("tx", r.producer_id, r.producer_epoch, True) is E.producer_fenced


def test_a_transaction_within_its_timeout_is_left_alone() -> None:
    h = TxnHarness(abort_timed_out_transactions_interval_ms=1_000)
    h.begin("tx", timeout_ms=60_000)
    h.advance(30_000)
    assert h.state("tx") is S.ONGOING and h.coord.timed_out_aborts == 0


# ---------------------------------------------------------------------- expiry
def test_idle_transactional_ids_expire_and_open_ones_do_not() -> None:
    h = TxnHarness(
        transactional_id_expiration_ms=60_000, remove_expired_transactional_ids_interval_ms=10_000
    )
    h.init("idle")
    h.begin("busy", timeout_ms=900_000)
    h.advance(70_000)
    assert h.written("idle")[-1] is None  # a tombstone
    assert h.manager.get_transaction_state("idle") == (E.none, None)
    assert h.state("busy") is S.ONGOING
    # Expired means new: the id starts over with a new producer id.
    assert h.init("idle").producer_id != 1000


# -------------------------------------------------------------- load / unload
def test_a_new_leader_loads_and_completes_what_was_prepared() -> None:
    h = TxnHarness()
    r = h.begin("tx")
    h.end("tx", r.producer_id, r.producer_epoch, True)
    # The coordinator moves away before the markers are acknowledged...
    partition = h.manager.partition_for("tx")
    h.metadata.register_broker(1, "127.0.0.1", 9999)
    h.metadata.change_partition(TRANSACTION_STATE_TOPIC_NAME, partition, leader=1)
    assert h.manager.get_transaction_state("tx")[0] is E.not_coordinator
    assert h.channel.queued_brokers() == []  # its markers were dropped
    # ...and comes back (a new coordinator epoch): it loads PrepareCommit and resends.
    h.metadata.change_partition(TRANSACTION_STATE_TOPIC_NAME, partition, leader=0)
    assert h.state("tx") is S.PREPARE_COMMIT
    h.deliver_markers()
    assert h.markers[-1].coordinator_epoch == 2
    assert h.state("tx") is S.COMPLETE_COMMIT


def test_a_partition_without_its_replica_online_is_loading() -> None:
    h = TxnHarness()
    partition = h.manager.partition_for("tx")
    h.metadata.register_broker(1, "127.0.0.1", 9999)
    h.metadata.change_partition(TRANSACTION_STATE_TOPIC_NAME, partition, leader=1)
    h.log.offline.add(partition)
    h.metadata.change_partition(TRANSACTION_STATE_TOPIC_NAME, partition, leader=0)
    assert h.init_box("tx").result.error is E.coordinator_load_in_progress
    assert h.coord.handle_list_transactions()[0] is E.coordinator_load_in_progress
    h.log.offline.clear()
    h.metadata.partition_changed(TRANSACTION_STATE_TOPIC_NAME)
    assert h.init("tx").producer_epoch == 0


# ------------------------------------------------------------ describe / list
def test_describe_and_list() -> None:
    h = TxnHarness()
    r = h.begin("tx")
    h.init("idle")
    d = h.coord.handle_describe_transactions("tx")
    assert (d.error, d.state, d.producer_id, d.topic_partitions) == (
        E.none,
        "Ongoing",
        r.producer_id,
        [("t", 0)],
    )
    assert h.coord.handle_describe_transactions("nope").error is E.transactional_id_not_found
    error, listed, unknown = h.coord.handle_list_transactions(state_names=["Ongoing", "Bogus"])
    assert (error, [t.transactional_id for t in listed], unknown) == (E.none, ["tx"], ["Bogus"])
    _, listed, _ = h.coord.handle_list_transactions(transactional_id_pattern="id.*")
    assert [t.transactional_id for t in listed] == ["idle"]
    h.advance(5_000)
    _, listed, _ = h.coord.handle_list_transactions(duration_filter_ms=4_000)
    assert {t.transactional_id for t in listed} == {"tx", "idle"}  # idle: never started
    _, listed, _ = h.coord.handle_list_transactions(
        duration_filter_ms=6_000, state_names=["Ongoing"]
    )
    assert listed == []
