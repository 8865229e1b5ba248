"""Idempotent producers on one partition: Kafka's ProducerStateManager rules.

A partition replica (``Partition`` over a ``MemoryLog`` or a ``DiskLog``) appends what a
producer sends; times are plain integers, nothing sleeps. Kafka's rules under test:
a retry of any of a producer's last five batches is answered with success and the
original offsets (written once); a batch that overlaps older sequences, skips one, or
restarts without a new epoch is OUT_OF_ORDER_SEQUENCE_NUMBER; a new epoch starts at 0;
an older epoch is INVALID_PRODUCER_EPOCH; a producer the partition does not know may
start anywhere (KIP-360); the state survives a reopen of the log.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from broker.log import DiskLog, LogConfig, MemoryLog, PartitionLog
from broker.replica.append_origin import AppendOrigin
from broker.replica.partition import AppendResult, Partition
from broker.replica.producer_state import (
    ProducerStateEntry,
    ProducerStateManager,
    decrement_sequence,
    increment_sequence,
)
from protocol.control_batch import build_control_batch
from protocol.record_builder import build_record_batch

PID = 1000
INT32_MAX = 2**31 - 1


def data(
    seq: int,
    n: int = 1,
    *,
    pid: int = PID,
    epoch: int = 0,
    txn: bool = False,
    ts: int = 1_000,
) -> bytes:
    return build_record_batch(
        [(None, f"v{seq + i}".encode(), ()) for i in range(n)],
        timestamp_ms=ts,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=txn,
    )


def leader(log: PartitionLog | None = None, *, log_append_time: bool = False) -> Partition:
    partition = Partition(
        "t", 0, log if log is not None else MemoryLog(), 0, log_append_time=log_append_time
    )
    partition.make_leader(0, [0], [0], 0)
    return partition


def ok(result: AppendResult) -> tuple[int, int]:
    assert result.error is ErrorCode.none, result.error_message
    return result.base_offset, result.last_offset


# -- duplicates ------------------------------------------------------------------------


def test_a_retry_of_each_of_the_last_five_batches_gets_its_original_offsets() -> None:
    partition = leader()
    written = []
    seq = 0
    for i in range(7):
        written.append((seq, 2, ok(partition.append_records_to_leader(data(seq, 2, ts=i), 0))))
        seq += 2
    end = partition.log_end_offset
    for first_seq, n, offsets in written[-5:]:
        retry = partition.append_records_to_leader(data(first_seq, n), now_ms=99)
        assert ok(retry) == offsets
        assert retry.log_start_offset == 0
    assert partition.log_end_offset == end  # nothing written twice


def test_the_retry_answers_the_original_batch_timestamp_as_log_append_time() -> None:
    # Kafka answers a duplicate with the cached batch's timestamp as logAppendTime: the
    # append time on a LogAppendTime topic, the batch's max timestamp on a CreateTime one.
    appended = leader(log_append_time=True)
    first = appended.append_records_to_leader(data(0, ts=5), now_ms=777)
    assert first.log_append_time_ms == 777
    assert appended.append_records_to_leader(data(0, ts=5), now_ms=900).log_append_time_ms == 777

    created = leader()
    assert created.append_records_to_leader(data(0, ts=5), now_ms=777).log_append_time_ms == -1
    assert created.append_records_to_leader(data(0, ts=5), now_ms=900).log_append_time_ms == 5


def test_a_batch_older_than_the_last_five_is_out_of_order() -> None:
    partition = leader()
    for seq in range(6):
        ok(partition.append_records_to_leader(data(seq), 0))
    assert partition.append_records_to_leader(data(0), 0).error is (
        ErrorCode.out_of_order_sequence_number
    )
    assert ok(partition.append_records_to_leader(data(1), 0)) == (1, 1)  # still cached


def test_overlaps_gaps_and_restarts_are_out_of_order_and_write_nothing() -> None:
    partition = leader()
    ok(partition.append_records_to_leader(data(0, 3), 0))  # sequences 0-2
    ok(partition.append_records_to_leader(data(3, 2), 0))  # sequences 3-4
    for bad in (data(2, 2), data(3, 1), data(4, 3), data(6), data(0, 1)):
        result = partition.append_records_to_leader(bad, 0)
        assert result.error is ErrorCode.out_of_order_sequence_number
        assert result.base_offset == -1
        assert result.error_message
    assert partition.log_end_offset == 5
    assert ok(partition.append_records_to_leader(data(5), 0)) == (5, 5)


def test_sequences_wrap_after_int32_max() -> None:
    assert increment_sequence(INT32_MAX - 1, 3) == 1
    assert decrement_sequence(1, 3) == INT32_MAX - 1
    partition = leader()
    ok(partition.append_records_to_leader(data(INT32_MAX - 1, 2), 0))  # ..., INT32_MAX
    assert ok(partition.append_records_to_leader(data(0, 2), 0)) == (2, 3)
    # A batch that itself wraps is cached by its wrapped last sequence.
    partition = leader()
    ok(partition.append_records_to_leader(data(INT32_MAX - 1, 4), 0))  # ends at sequence 1
    assert ok(partition.append_records_to_leader(data(INT32_MAX - 1, 4), 0)) == (0, 3)
    assert ok(partition.append_records_to_leader(data(2), 0)) == (4, 4)


# -- epochs and unknown producers ------------------------------------------------------


def test_a_new_epoch_starts_at_sequence_zero_and_fences_the_old_one() -> None:
    partition = leader()
    ok(partition.append_records_to_leader(data(0, 2, epoch=0), 0))
    bumped = partition.append_records_to_leader(data(5, epoch=1), 0)
    assert bumped.error is ErrorCode.out_of_order_sequence_number
    assert ok(partition.append_records_to_leader(data(0, epoch=1), 0)) == (2, 2)
    stale = partition.append_records_to_leader(data(2, epoch=0), 0)
    assert stale.error is ErrorCode.invalid_producer_epoch
    # The old epoch's batches are forgotten: its retry is not a duplicate any more.
    assert partition.append_records_to_leader(data(0, 2, epoch=0), 0).error is (
        ErrorCode.invalid_producer_epoch
    )
    entry = partition.producers.last_entry(PID)
    assert entry is not None
    assert (entry.producer_epoch, entry.last_seq) == (1, 0)


def test_an_unknown_producer_may_start_at_any_sequence() -> None:
    # KIP-360 (Kafka 2.5+): its state may have gone with the records retention deleted.
    partition = leader()
    assert ok(partition.append_records_to_leader(data(42, epoch=3), 0)) == (0, 0)
    assert partition.append_records_to_leader(data(44, epoch=3), 0).error is (
        ErrorCode.out_of_order_sequence_number
    )
    assert ok(partition.append_records_to_leader(data(43, epoch=3), 0)) == (1, 1)


def test_two_producers_are_checked_apart() -> None:
    partition = leader()
    ok(partition.append_records_to_leader(data(0, pid=1), 0))
    ok(partition.append_records_to_leader(data(0, pid=2), 0))
    ok(partition.append_records_to_leader(data(1, pid=1), 0))
    assert ok(partition.append_records_to_leader(data(0, pid=2), 0)) == (1, 1)
    assert {e.producer_id: e.last_seq for e in partition.active_producers()} == {1: 1, 2: 0}


# -- what a client may not write -------------------------------------------------------


def test_clients_may_not_write_control_batches_or_producer_ids_without_sequence() -> None:
    partition = leader()
    marker = build_control_batch(PID, 0, 0, True, 1_000)
    refused = partition.append_records_to_leader(marker, 0)
    assert refused.error is ErrorCode.invalid_record
    assert "control records" in (refused.error_message or "")
    no_seq = partition.append_records_to_leader(data(-1), 0)
    assert no_seq.error is ErrorCode.invalid_record
    assert partition.log_end_offset == 0
    # The coordinator writes markers.
    written = partition.append_records_to_leader(marker, 0, AppendOrigin.COORDINATOR)
    assert ok(written) == (0, 0)


def test_a_plain_batch_inside_a_transaction_is_invalid_txn_state() -> None:
    partition = leader()
    ok(partition.append_records_to_leader(data(0, txn=True), 0))
    result = partition.append_records_to_leader(data(1), 0)
    assert result.error is ErrorCode.invalid_txn_state
    assert partition.log_end_offset == 1


# -- expiry ------------------------------------------------------------------------------


def test_idle_producers_expire_but_not_with_a_transaction_open() -> None:
    partition = leader()
    ok(partition.append_records_to_leader(data(0, pid=1, ts=1_000), 0))
    ok(partition.append_records_to_leader(data(0, pid=2, ts=1_000, txn=True), 0))
    ok(partition.append_records_to_leader(data(0, pid=3, ts=5_000), 0))
    assert partition.remove_expired_producers(now_ms=5_999, expiration_ms=5_000) == []
    assert partition.remove_expired_producers(now_ms=6_000, expiration_ms=5_000) == [1]
    assert sorted(e.producer_id for e in partition.active_producers()) == [2, 3]
    # An expired producer is unknown: it may go on from any sequence.
    assert ok(partition.append_records_to_leader(data(7, pid=1), 0)) == (3, 3)


def test_the_manager_stages_changes_until_update() -> None:
    manager = ProducerStateManager()
    info = manager.prepare_update(PID, AppendOrigin.CLIENT)
    info.append_data_batch(0, 0, 1, 10, first_offset=0, last_offset=1, is_transactional=True)
    assert manager.last_entry(PID) is None
    assert manager.first_unstable_offset() is None
    manager.update(info)
    entry = manager.last_entry(PID)
    assert isinstance(entry, ProducerStateEntry)
    assert (entry.last_seq, entry.current_txn_first_offset, entry.last_timestamp) == (1, 0, 10)
    assert manager.first_unstable_offset() == 0


# -- replicas and reopened logs --------------------------------------------------------


def test_a_follower_keeps_the_state_and_answers_retries_once_it_leads() -> None:
    source = leader()
    for seq in range(0, 10, 2):
        ok(source.append_records_to_leader(data(seq, 2), 0))
    records = source.read(0, 1 << 20, up_to_log_end=True).records

    follower = Partition("t", 0, MemoryLog(), broker_id=1)
    follower.make_follower(0, 0, [0, 1], [0, 1])
    follower.append_records_as_follower(records, leader_high_watermark=10)
    follower.make_leader(1, [0, 1], [1], 0)
    for seq in range(0, 10, 2):
        assert ok(follower.append_records_to_leader(data(seq, 2), 0)) == (seq, seq + 1)
    assert follower.append_records_to_leader(data(11), 0).error is (
        ErrorCode.out_of_order_sequence_number
    )


@pytest.mark.parametrize("kind", ["memory", "disk"])
def test_producer_state_survives_a_reopen(kind: str, tmp_path: Path) -> None:
    def open_log() -> PartitionLog:
        if kind == "memory":
            return shared
        return DiskLog(tmp_path / "t-0", LogConfig())

    shared = MemoryLog()
    first = leader(open_log())
    for seq in range(0, 12, 2):
        ok(first.append_records_to_leader(data(seq, 2, epoch=4), 0))
    ok(first.append_records_to_leader(data(0, pid=7, epoch=1, ts=123), 0))
    if kind == "disk":
        first.log.close()

    reopened = leader(open_log())
    reopened.rebuild_from_log()
    assert ok(reopened.append_records_to_leader(data(10, 2, epoch=4), 0)) == (10, 11)
    assert ok(reopened.append_records_to_leader(data(2, 2, epoch=4), 0)) == (2, 3)
    assert reopened.append_records_to_leader(data(0, 2, epoch=4), 0).error is (
        ErrorCode.out_of_order_sequence_number
    )
    assert reopened.append_records_to_leader(data(12, epoch=3), 0).error is (
        ErrorCode.invalid_producer_epoch
    )
    entry = reopened.producers.last_entry(7)
    assert entry is not None
    assert (entry.producer_epoch, entry.last_seq, entry.last_timestamp) == (1, 0, 123)
    assert ok(reopened.append_records_to_leader(data(12, epoch=4), 0)) == (13, 13)
    reopened.log.close()


# -- transactions v2 markers (KIP-1228) ---------------------------------------------------


def test_a_transaction_version_2_marker_must_carry_a_bumped_epoch() -> None:
    partition = leader()
    ok(partition.append_records_to_leader(data(0, epoch=3, txn=True), 0))
    same = build_control_batch(PID, 3, 0, True, 1_000)
    # A version 1 marker may carry the transaction's epoch; a version 2 one may not.
    refused = partition.append_records_to_leader(same, 0, AppendOrigin.COORDINATOR, 2)
    assert refused.error is ErrorCode.invalid_producer_epoch
    bumped = build_control_batch(PID, 4, 0, True, 1_000)
    ok(partition.append_records_to_leader(bumped, 0, AppendOrigin.COORDINATOR, 2))
    # The same marker again (a late retry) is now refused as well.
    again = partition.append_records_to_leader(bumped, 0, AppendOrigin.COORDINATOR, 2)
    assert again.error is ErrorCode.invalid_producer_epoch


def test_a_version_1_marker_keeps_the_old_rule() -> None:
    partition = leader()
    ok(partition.append_records_to_leader(data(0, epoch=3, txn=True), 0))
    same = build_control_batch(PID, 3, 0, False, 1_000)
    ok(partition.append_records_to_leader(same, 0, AppendOrigin.COORDINATOR, 0))
