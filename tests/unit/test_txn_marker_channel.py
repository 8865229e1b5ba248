"""The marker channel manager: where markers go, what each answer does, and the
completion append, with a fake sender on a manual clock."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from broker.txn.marker_sender import marker_errors, write_txn_markers_request
from broker.txn.transaction_marker_channel_manager import TxnMarkerEntry
from broker.txn.transaction_state import TransactionState
from protocol.builders import response_builder
from tests.helpers.txn_harness import TxnHarness

pytestmark = pytest.mark.usefixtures("timer_tasks_must_not_fail")

E = ErrorCode
S = TransactionState


def _committing(h: TxnHarness, partitions: list[tuple[str, int]] | None = None) -> None:
    r = h.init("tx")
    h.add("tx", r.producer_id, r.producer_epoch, partitions or [("t", 0), ("t", 1)])
    assert h.end("tx", r.producer_id, r.producer_epoch, True) is E.none


def test_a_partition_whose_leader_moved_is_retried_at_its_new_leader() -> None:
    h = TxnHarness(brokers=2)
    _committing(h)

    def not_leader(broker_id: int, entry: TxnMarkerEntry) -> dict[tuple[str, int], ErrorCode]:
        return {("t", 1): E.not_leader_or_follower}

    h.deliver_markers(not_leader)
    m = h.metadata_of("tx")
    assert m.topic_partitions == {("t", 1)} and m.state is S.PREPARE_COMMIT
    h.metadata.change_partition("t", 1, leader=1)
    h.metadata.topics["t"].partitions[1].replicas = [0, 1]
    h.deliver_markers(not_leader)  # still queued for broker 0: answered NOT_LEADER again
    assert h.channel.queued_brokers() == [1]
    h.deliver_markers()
    assert h.state("tx") is S.COMPLETE_COMMIT


def test_a_lost_connection_sends_the_markers_again() -> None:
    h = TxnHarness()
    _committing(h)
    entries = h.channel.drain(0)
    assert h.channel.on_response(0, entries, None) is True
    assert h.channel.queued_brokers() == [0]
    h.deliver_markers()
    assert h.state("tx") is S.COMPLETE_COMMIT


def test_a_fencing_error_stops_sending_the_transactions_markers() -> None:
    h = TxnHarness()
    _committing(h)
    h.deliver_markers(lambda b, e: {("t", 0): E.transaction_coordinator_fenced})
    assert h.channel.transactions_with_pending_markers == {}
    assert h.channel.queued_brokers() == []
    assert h.state("tx") is S.PREPARE_COMMIT  # a newer coordinator completes it


def test_markers_without_a_leader_wait_for_one() -> None:
    h = TxnHarness(brokers=2)
    h.metadata.change_partition("t", 1, leader=-1)
    _committing(h)
    assert len(h.channel.markers_queue_for_unknown_broker) == 1
    h.deliver_markers()
    assert h.metadata_of("tx").topic_partitions == {("t", 1)}
    h.metadata.change_partition("t", 1, leader=1)
    assert h.channel.markers_queue_for_unknown_broker == []
    h.deliver_markers()
    assert h.state("tx") is S.COMPLETE_COMMIT


def test_partitions_of_a_deleted_topic_are_skipped() -> None:
    h = TxnHarness(topics={"t": 2, "gone": 1})
    _committing(h, [("t", 0), ("gone", 0)])
    h.channel.drain(0)  # lose what was queued: the retry will find the topic gone
    h.metadata.delete_topic("gone")
    entry = TxnMarkerEntry("tx", 1000, 0, True, 0, {("t", 0), ("gone", 0)})
    h.channel.on_response(0, [entry], None)
    h.deliver_markers()
    assert h.state("tx") is S.COMPLETE_COMMIT


def test_the_completion_append_is_retried_while_the_coordinator_is_unavailable() -> None:
    h = TxnHarness()
    _committing(h)
    h.log.fail_next = E.not_enough_replicas
    h.deliver_markers()
    m = h.metadata_of("tx")
    assert (m.state, m.pending_state) == (S.PREPARE_COMMIT, S.COMPLETE_COMMIT)
    h.advance(100)
    assert h.state("tx") is S.COMPLETE_COMMIT


def test_the_request_and_response_shapes() -> None:
    entry = TxnMarkerEntry("tx", 7, 2, True, 5, {("t", 1), ("t", 0), ("u", 3)})
    request = write_txn_markers_request([entry])
    (marker,) = request.markers
    assert (marker.producer_id, marker.producer_epoch, marker.coordinator_epoch) == (7, 2, 5)
    assert marker.transaction_result is True
    assert [(t.name, list(t.partition_indexes)) for t in marker.topics] == [
        ("t", [0, 1]),
        ("u", [3]),
    ]
    b = response_builder(27, 1)
    response = b.WriteTxnMarkersResponse(
        markers=(
            b.WritableTxnMarkerResult(
                producer_id=7,
                topics=(
                    b.WritableTxnMarkerTopicResult(
                        name="t",
                        partitions=(
                            b.WritableTxnMarkerPartitionResult(
                                partition_index=0, error_code=E.none
                            ),
                        ),
                    ),
                ),
            ),
        )
    )
    assert marker_errors(response) == {7: {("t", 0): E.none}}
