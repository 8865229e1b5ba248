"""Transactions in a partition's log: markers, the last stable offset, the aborted index.

Transactional batches begin a producer's transaction on a partition; the coordinator's
COMMIT/ABORT marker (a control batch, ``AppendOrigin.COORDINATOR``) ends it. The last
stable offset is the first offset of the earliest transaction still undecided, or
decided with its marker not yet below the high watermark; aborted transactions enter the
transaction index (Kafka's ``.txnindex``) with the LSO of their time. read_committed
reads stop at the LSO and list the aborted transactions they overlap. Everything is
rebuilt from the log when a partition reopens. Times are integers; the replica manager
runs on the manual clock.
"""

from __future__ import annotations

from pathlib import Path

from kio.schema.errors import ErrorCode

from broker.log import DiskLog, LogConfig, MemoryLog, PartitionLog
from broker.log.transaction_index import (
    ENTRY_SIZE,
    AbortedTxn,
    TransactionIndex,
    read_txn_index_file,
)
from broker.replica.append_origin import AppendOrigin
from broker.replica.delayed_fetch import READ_COMMITTED, FetchParams, FetchPartitionStatus
from broker.replica.delayed_produce import ProduceStatuses
from broker.replica.partition import Partition
from protocol.control_batch import (
    CONTROL_TYPE_ABORT,
    CONTROL_TYPE_COMMIT,
    EndTransactionMarker,
    build_control_batch,
    parse_control_batch,
)
from protocol.record_batch import iter_batches, parse_batch_header
from protocol.record_builder import build_record_batch
from tests.unit.test_replica_manager import TP, FetchAnswer, broker_node

A, B = 100, 200  # producer ids


def txn(pid: int, seq: int, n: int = 1, *, epoch: int = 0) -> bytes:
    return build_record_batch(
        [(None, b"v", ())] * n,
        timestamp_ms=1_000,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=True,
    )


def plain(n: int = 1) -> bytes:
    return build_record_batch([(None, b"p", ())] * n, timestamp_ms=1_000)


def marker(pid: int, commit: bool, *, epoch: int = 0, coordinator_epoch: int = 0) -> bytes:
    return build_control_batch(pid, epoch, coordinator_epoch, commit, 2_000)


def leader(log: PartitionLog | None = None, replicas: list[int] | None = None) -> Partition:
    partition = Partition("t", 0, log if log is not None else MemoryLog(), 0)
    replicas = replicas or [0]
    partition.make_leader(0, replicas, replicas, 0)
    return partition


def put(partition: Partition, records: bytes, origin: AppendOrigin = AppendOrigin.CLIENT) -> int:
    result = partition.append_records_to_leader(records, 0, origin)
    assert result.error is ErrorCode.none, result.error_message
    return result.base_offset


def end(partition: Partition, pid: int, commit: bool, **kw: int) -> int:
    return put(partition, marker(pid, commit, **kw), AppendOrigin.COORDINATOR)


def offsets(records: bytes) -> list[int]:
    return [
        o
        for _, h in iter_batches(records, allow_partial_tail=True)
        for o in range(h.base_offset, h.last_offset + 1)
    ]


# -- control batches -------------------------------------------------------------------


def test_a_marker_is_a_transactional_control_batch_with_kafkas_record() -> None:
    batch = build_control_batch(7, 3, 12, True, 5_000)
    header = parse_batch_header(batch)
    assert (header.is_control, header.is_transactional) == (True, True)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 3, -1)
    assert (header.records_count, header.base_timestamp) == (1, 5_000)
    assert parse_control_batch(batch) == EndTransactionMarker(CONTROL_TYPE_COMMIT, 12)
    abort = parse_control_batch(build_control_batch(7, 3, 12, False, 5_000))
    assert abort == EndTransactionMarker(CONTROL_TYPE_ABORT, 12)
    assert abort is not None and not abort.is_commit
    # Kafka's bytes: key = version 0, type 1; value = version 0, coordinator epoch 12.
    assert b"\x08\x00\x00\x00\x01\x0c\x00\x00\x00\x00\x00\x0c" in batch


# -- the last stable offset ------------------------------------------------------------


def test_lso_with_interleaved_transactions_of_two_producers() -> None:
    p = leader()
    assert p.last_stable_offset == 0
    put(p, txn(A, 0, 2))  # 0-1: A begins
    assert (p.high_watermark, p.last_stable_offset) == (2, 0)
    put(p, plain())  # 2
    put(p, txn(B, 0))  # 3: B begins
    put(p, txn(A, 2))  # 4
    assert p.last_stable_offset == 0
    assert end(p, A, commit=True) == 5
    assert p.last_stable_offset == 3  # B is still open
    put(p, txn(A, 3))  # 6: A's next transaction
    assert end(p, B, commit=False) == 7
    assert p.last_stable_offset == 6
    assert end(p, A, commit=False) == 8
    assert (p.high_watermark, p.last_stable_offset) == (9, 9)
    # B aborted while A's second transaction (from 6) was open: LSO 6 at its time.
    assert p.txn_index.entries() == [AbortedTxn(B, 3, 7, 6), AbortedTxn(A, 6, 8, 9)]


def test_a_decided_transaction_stays_unstable_until_the_hw_passes_its_marker() -> None:
    p = leader(replicas=[0, 1])
    put(p, txn(A, 0, 3))  # 0-2
    end(p, A, commit=True)  # 3
    assert p.last_stable_offset == 0  # HW 0: nothing is stable yet
    p.update_follower(1, 3, now_ms=0)  # the follower has 0-2, not the marker
    assert (p.high_watermark, p.last_stable_offset) == (3, 0)
    p.update_follower(1, 4, now_ms=0)
    assert (p.high_watermark, p.last_stable_offset) == (4, 4)


def test_a_marker_for_no_open_transaction_changes_nothing_but_the_epochs() -> None:
    p = leader()
    end(p, A, commit=False, coordinator_epoch=3)
    assert len(p.txn_index) == 0
    assert p.last_stable_offset == 1
    entry = p.producers.last_entry(A)
    assert entry is not None and entry.coordinator_epoch == 3


def test_markers_from_a_fenced_coordinator_or_for_an_older_epoch_are_refused() -> None:
    p = leader()
    put(p, txn(A, 0, epoch=2))
    end(p, A, commit=True, epoch=2, coordinator_epoch=5)
    put(p, txn(A, 1, epoch=2))
    zombie = p.append_records_to_leader(
        marker(A, False, epoch=2, coordinator_epoch=4), 0, AppendOrigin.COORDINATOR
    )
    assert zombie.error is ErrorCode.transaction_coordinator_fenced
    old = p.append_records_to_leader(
        marker(A, False, epoch=1, coordinator_epoch=5), 0, AppendOrigin.COORDINATOR
    )
    assert old.error is ErrorCode.invalid_producer_epoch
    # A fencing abort carries the bumped epoch: the old epoch's producer is refused after.
    end(p, A, commit=False, epoch=3, coordinator_epoch=5)
    assert p.append_records_to_leader(txn(A, 2, epoch=2), 0).error is (
        ErrorCode.invalid_producer_epoch
    )
    assert p.last_stable_offset == p.log_end_offset


# -- read_committed reads --------------------------------------------------------------


def test_read_committed_stops_at_the_lso_and_lists_overlapping_aborts() -> None:
    p = leader()
    put(p, txn(A, 0, 2))  # 0-1
    put(p, txn(B, 0))  # 2
    end(p, A, commit=False)  # 3
    put(p, plain(2))  # 4-5
    put(p, txn(A, 2))  # 6: A's second transaction, open

    uncommitted = p.read(0, 1 << 20, up_to_log_end=False)
    assert offsets(uncommitted.records) == list(range(7))
    assert uncommitted.aborted_transactions is None
    assert uncommitted.last_stable_offset == 2

    committed = p.read(0, 1 << 20, up_to_log_end=False, read_committed=True)
    assert offsets(committed.records) == [0, 1]
    assert committed.aborted_transactions == [AbortedTxn(A, 0, 3, 2)]
    at_lso = p.read(2, 1 << 20, up_to_log_end=False, read_committed=True)
    assert (at_lso.records, at_lso.aborted_transactions) == (b"", [])

    end(p, B, commit=True)  # 7
    end(p, A, commit=False)  # 8
    whole = p.read(0, 1 << 20, up_to_log_end=False, read_committed=True)
    assert offsets(whole.records) == list(range(9))
    assert whole.aborted_transactions == [AbortedTxn(A, 0, 3, 2), AbortedTxn(A, 6, 8, 9)]
    later = p.read(4, 1 << 20, up_to_log_end=False, read_committed=True)
    assert later.aborted_transactions == [AbortedTxn(A, 6, 8, 9)]
    # a read that stops before a transaction starts does not list it
    first = p.read(4, 1, up_to_log_end=False, read_committed=True)
    assert offsets(first.records) == [4, 5]
    assert first.aborted_transactions == []
    # followers read to the log end, with no list
    follower = p.read(0, 1 << 20, up_to_log_end=True, read_committed=True)
    assert follower.aborted_transactions is None


def test_the_index_collects_by_range() -> None:
    index = TransactionIndex()
    index.append(AbortedTxn(A, 0, 5, 0))
    index.append(AbortedTxn(B, 3, 9, 6))
    index.append(AbortedTxn(A, 10, 12, 13))
    assert index.collect_aborted_txns(0, 3) == [AbortedTxn(A, 0, 5, 0)]
    assert index.collect_aborted_txns(6, 10) == [AbortedTxn(B, 3, 9, 6)]
    assert index.collect_aborted_txns(6, 11) == [AbortedTxn(B, 3, 9, 6), AbortedTxn(A, 10, 12, 13)]
    index.truncate_to(9)
    assert index.entries() == [AbortedTxn(A, 0, 5, 0)]
    index.delete_before(6)
    assert len(index) == 0


# -- replicas, truncation, reopening ---------------------------------------------------


def _scenario(p: Partition) -> None:
    put(p, txn(A, 0, 2))  # 0-1
    put(p, txn(B, 0))  # 2
    end(p, A, commit=False, coordinator_epoch=1)  # 3
    put(p, txn(A, 2))  # 4: open
    end(p, B, commit=True, coordinator_epoch=1)  # 5


def test_a_follower_replicates_markers_into_the_same_state() -> None:
    source = leader()
    _scenario(source)
    follower = Partition("t", 0, MemoryLog(), broker_id=1)
    follower.make_follower(0, 0, [0, 1], [0, 1])
    follower.append_records_as_follower(
        source.read(0, 1 << 20, up_to_log_end=True).records, leader_high_watermark=6
    )
    assert follower.txn_index.entries() == source.txn_index.entries() == [AbortedTxn(A, 0, 3, 2)]
    assert follower.producers.first_unstable_offset() == 4
    follower.make_leader(1, [0, 1], [1], 0)
    assert follower.last_stable_offset == 4
    end(follower, A, commit=True, coordinator_epoch=1)
    assert follower.last_stable_offset == follower.log_end_offset == 7


def test_truncation_rebuilds_the_state_below_the_cut() -> None:
    p = leader()
    _scenario(p)
    p.truncate_to(3)  # the abort marker and what follows go
    assert len(p.txn_index) == 0
    assert p.producers.first_undecided_offset() == 0
    assert p.last_stable_offset == 0


def test_transactions_survive_a_reopen_of_a_disk_log(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    config = LogConfig.from_topic_configs({"segment.bytes": "100"})  # a segment per batch
    p = leader(DiskLog(directory, config))
    _scenario(p)
    end(p, A, commit=False, coordinator_epoch=1)  # 6
    expected = [AbortedTxn(A, 0, 3, 2), AbortedTxn(A, 4, 6, 7)]
    assert p.txn_index.entries() == expected
    files = sorted(directory.glob("*.txnindex"))
    assert [f.name for f in files] == [
        "00000000000000000003.txnindex",
        "00000000000000000006.txnindex",
    ]
    assert [read_txn_index_file(f) for f in files] == [[expected[0]], [expected[1]]]
    assert files[0].stat().st_size == ENTRY_SIZE == 34
    put(p, txn(B, 1))  # 7: open across the restart
    p.log.close()

    reopened = leader(DiskLog(directory, config))
    reopened.rebuild_from_log()
    assert reopened.txn_index.entries() == expected
    assert sorted(f.name for f in directory.glob("*.txnindex")) == [f.name for f in files]
    assert reopened.last_stable_offset == 7
    entry = reopened.producers.last_entry(B)
    assert entry is not None and entry.current_txn_first_offset == 7
    assert reopened.producers.last_entry(A) is not None
    assert (
        reopened.append_records_to_leader(
            marker(A, True, coordinator_epoch=0), 0, AppendOrigin.COORDINATOR
        ).error
        is ErrorCode.transaction_coordinator_fenced
    )
    end(reopened, B, commit=True, coordinator_epoch=1)
    assert reopened.last_stable_offset == reopened.log_end_offset == 9
    reopened.log.close()


# -- the replica manager: markers through append_records, parked read_committed fetches --


async def test_a_read_committed_fetch_waits_for_the_marker() -> None:
    async with broker_node([0]) as node:
        node.manager.append_to_leader(TP, txn(A, 0, 2), required_acks=1)
        answer = FetchAnswer()
        node.manager.fetch_messages(
            FetchParams(-1, 500, 1, 1 << 20, isolation_level=READ_COMMITTED),
            [FetchPartitionStatus(TP, 0, 1 << 20)],
            answer,
            None,
        )
        assert not answer.answered  # the HW is 2, the LSO 0
        node.manager.append_to_leader(TP, plain(), required_acks=1)
        assert not answer.answered

        statuses: list[ProduceStatuses] = []
        node.manager.append_records(
            1_000,
            -1,
            {TP: marker(A, False)},
            statuses.append,
            None,
            origin=AppendOrigin.COORDINATOR,
        )
        assert statuses[0][TP].result.error is ErrorCode.none
        [(_status, result)] = answer.only()
        assert offsets(result.records) == [0, 1, 2, 3]
        assert result.last_stable_offset == result.high_watermark == 4
        assert result.aborted_transactions == [AbortedTxn(A, 0, 3, 4)]


async def test_a_client_produce_of_a_marker_is_invalid_record() -> None:
    async with broker_node([0]) as node:
        statuses: list[ProduceStatuses] = []
        node.manager.append_records(1_000, 1, {TP: marker(A, True)}, statuses.append, None)
        assert statuses[0][TP].result.error is ErrorCode.invalid_record
        assert node.partition.log_end_offset == 0


def test_entries_below_the_log_start_go_with_their_files(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    p = leader(DiskLog(directory, LogConfig.from_topic_configs({"segment.bytes": "100"})))
    _scenario(p)
    end(p, A, commit=False, coordinator_epoch=1)  # 6
    p.log.delete_records_before(4)  # DeleteRecords: segments below 4 go
    p.on_log_start_offset_changed()
    assert p.txn_index.entries() == [AbortedTxn(A, 4, 6, 7)]
    assert [f.name for f in directory.glob("*.txnindex")] == ["00000000000000000006.txnindex"]
    p.log.close()
