"""Re-mapping a transactions-v2 producer (KIP-890 part 2) in a replay: its epoch moves at
every EndTxn v5+, and its producer id when the epochs run out (``replay_rewrite``)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from protocol.builders import request_builder, response_builder
from protocol.record_batch import iter_batches
from protocol.record_builder import build_record_batch
from spark_jobs.replay_rewrite import (
    END_TXN,
    INIT_PRODUCER_ID,
    PRODUCE,
    TXN_OFFSET_COMMIT,
    ReplayRewriter,
)
from spark_jobs.traffic import SKIP_INTER_BROKER, is_inter_broker

TXN = "sim-tv2"
#: A client talks to its coordinator on one connection and to a leader on another.
COORDINATOR, LEADER = "to-coordinator", "to-leader"
ADD_PARTITIONS_TO_TXN = 24


def _init(rw: ReplayRewriter, connection: str, txn: str | None, answer: tuple[int, int]) -> None:
    request = request_builder(INIT_PRODUCER_ID, 5).InitProducerIdRequest(
        transactional_id=txn,
        transaction_timeout=timedelta(seconds=30),
        producer_id=-1,
        producer_epoch=-1,
    )
    assert rw.rewrite(connection, INIT_PRODUCER_ID, request) is request
    response = response_builder(INIT_PRODUCER_ID, 5).InitProducerIdResponse(
        throttle_time=timedelta(0), error_code=0, producer_id=answer[0], producer_epoch=answer[1]
    )
    rw.learn(connection, INIT_PRODUCER_ID, request, response)


def _produce(rw: ReplayRewriter, pid: int, epoch: int) -> tuple[int, int]:
    """A transactional Produce v12 of captured (pid, epoch): what the replay sends."""
    b = request_builder(PRODUCE, 12)
    records = build_record_batch(
        [(None, b"v", [])],
        timestamp_ms=1,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=0,
        is_transactional=True,
    )
    request = b.ProduceRequest(
        transactional_id=TXN,
        acks=-1,
        timeout=timedelta(seconds=10),
        topic_data=(
            b.TopicProduceData(
                name="sim-txn", partition_data=(b.PartitionProduceData(index=0, records=records),)
            ),
        ),
    )
    out = rw.rewrite(LEADER, PRODUCE, request).topic_data[0].partition_data[0].records
    (header,) = [h for _, h in iter_batches(out, verify_crc=True)]  # raises on a bad CRC
    return header.producer_id, header.producer_epoch


def _commit_offsets(rw: ReplayRewriter, pid: int, epoch: int) -> tuple[int, int]:
    request = request_builder(TXN_OFFSET_COMMIT, 5).TxnOffsetCommitRequest(
        transactional_id=TXN,
        group_id=TXN,
        producer_id=pid,
        producer_epoch=epoch,
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        topics=(),
    )
    out = rw.rewrite(COORDINATOR, TXN_OFFSET_COMMIT, request)
    return int(out.producer_id), int(out.producer_epoch)


def _end(rw: ReplayRewriter, pid: int, epoch: int, answer: tuple[int, int]) -> tuple[int, int]:
    """EndTxn v5 of captured (pid, epoch), answered ``answer`` by the new broker."""
    request = request_builder(END_TXN, 5).EndTxnRequest(
        transactional_id=TXN, producer_id=pid, producer_epoch=epoch, committed=True
    )
    sent = rw.rewrite(COORDINATOR, END_TXN, request)
    response = response_builder(END_TXN, 5).EndTxnResponse(
        throttle_time=timedelta(0), error_code=0, producer_id=answer[0], producer_epoch=answer[1]
    )
    rw.learn(COORDINATOR, END_TXN, sent, response)
    return int(sent.producer_id), int(sent.producer_epoch)


def _transaction(
    rw: ReplayRewriter, captured: tuple[int, int], end_answer: tuple[int, int]
) -> list[tuple[int, int]]:
    """One captured transaction (produce, offsets, end): the (id, epoch) each was sent as."""
    return [
        _produce(rw, *captured),
        _commit_offsets(rw, *captured),
        _end(rw, *captured, end_answer),
    ]


def test_each_end_moves_the_captured_epoch_onto_the_new_brokers_answer() -> None:
    """Captured producer 2 bumps 0 -> 1 -> 2 and so does the new broker's 7; the new
    broker's answers are followed, not an offset: its third end answers epoch 5."""
    rw = ReplayRewriter()
    _init(rw, COORDINATOR, TXN, (7, 0))
    assert _transaction(rw, (2, 0), (7, 1)) == [(7, 0)] * 3
    assert _transaction(rw, (2, 1), (7, 2)) == [(7, 1)] * 3
    assert _transaction(rw, (2, 2), (7, 5)) == [(7, 2)] * 3
    assert _produce(rw, 2, 3) == (7, 5)


def test_a_request_from_before_the_answer_keeps_the_epoch_it_was_sent_at() -> None:
    rw = ReplayRewriter()
    _init(rw, COORDINATOR, TXN, (7, 0))
    _transaction(rw, (2, 0), (7, 1))
    # The leader's AddPartitionsToTxn of the ended transaction, late: still epoch 0 ...
    assert _commit_offsets(rw, 2, 0) == (7, 0)
    # ... and the next transaction's first request still takes the answer.
    assert _produce(rw, 2, 1) == (7, 1)


def test_the_new_brokers_exhausted_epochs_move_the_producer_onto_its_new_id() -> None:
    """The new broker ran out of epochs first (its producer was older): its EndTxn answered
    a new producer id at epoch 0, while the captured producer goes on at epoch 1."""
    rw = ReplayRewriter()
    _init(rw, COORDINATOR, TXN, (7, 32766))
    assert _transaction(rw, (2, 0), (8, 0)) == [(7, 32766)] * 3
    assert _transaction(rw, (2, 1), (8, 1)) == [(8, 0)] * 3
    assert _produce(rw, 2, 2) == (8, 1)


def test_the_captured_producers_new_id_takes_the_new_brokers_answer() -> None:
    """The captured producer ran out of epochs: its next transaction names producer id 3 at
    epoch 0, which maps onto what the new broker answered the end of the last one."""
    rw = ReplayRewriter()
    _init(rw, COORDINATOR, TXN, (7, 0))
    assert _transaction(rw, (2, 32766), (7, 1)) == [(7, 0)] * 3
    assert _transaction(rw, (3, 0), (7, 2)) == [(7, 1)] * 3
    assert _produce(rw, 3, 1) == (7, 2)


def test_another_producers_answer_is_not_taken_on_another_connection() -> None:
    """The regression of the simulation's capture: sim-tv2 asked its coordinator, then an
    idempotent producer was answered on a third connection before sim-tv2's first Produce
    reached its leader: that Produce used to take the other producer's id."""
    rw = ReplayRewriter()
    _init(rw, COORDINATOR, TXN, (7, 0))
    _init(rw, "elsewhere", None, (9, 0))
    assert _produce(rw, 2, 0) == (7, 0)


def test_a_leaders_add_partitions_to_txn_is_inter_broker_and_not_replayed() -> None:
    """v4+ is the brokers' (KIP-890); v3 and below the clients'."""
    assert is_inter_broker(ADD_PARTITIONS_TO_TXN, None, 5)
    assert is_inter_broker(ADD_PARTITIONS_TO_TXN, None, 4)
    assert not is_inter_broker(ADD_PARTITIONS_TO_TXN, None, 3)
    assert not is_inter_broker(ADD_PARTITIONS_TO_TXN, None)  # version unknown: a client's
    b = request_builder(ADD_PARTITIONS_TO_TXN, 5)
    add: Any = b.AddPartitionsToTxnRequest(
        transactions=(
            b.AddPartitionsToTxnTransaction(
                transactional_id=TXN, producer_id=2, producer_epoch=0, verify_only=False, topics=()
            ),
        )
    )
    assert ReplayRewriter.skip_reason(ADD_PARTITIONS_TO_TXN, add, 5) == SKIP_INTER_BROKER
