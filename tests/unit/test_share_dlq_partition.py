"""KIP-1191 on the share partition, on the manual clock: which records go to the
dead-letter queue (REJECT and the delivery count limit; not ACCEPT, RELEASE or GAP),
ARCHIVING until the write ends, ARCHIVED after, and nothing at all when the group has no
DLQ (share.version 1)."""

from __future__ import annotations

from broker.share.dlq.dlq_records import CLIENT_REJECT, DELIVERY_COUNT_EXCEEDED
from broker.share.share_partition import (
    AcknowledgementBatch,
    AcknowledgeType,
    RecordState,
    SharePartition,
    SharePartitionConfig,
)
from broker.share_coordinator.share_state_records import PersisterStateBatch
from purgatory import ManualClock, SystemTimer
from tests.helpers.share_writes import recording

A, R, X, G = (
    AcknowledgeType.ACCEPT,
    AcknowledgeType.RELEASE,
    AcknowledgeType.REJECT,
    AcknowledgeType.GAP,
)
Run = tuple[int, int, int, str]


class FakeDeadLetters:
    """The manager's port: on or off, and the runs handed to it."""

    def __init__(self, enabled: bool = True) -> None:
        self.on = enabled
        self.runs: list[Run] = []

    def enabled(self, group_id: str) -> bool:
        return self.on

    def enqueue(
        self, partition: SharePartition, first: int, last: int, delivery_count: int, cause: str
    ) -> None:
        self.runs.append((first, last, delivery_count, cause))


def _partition(
    enabled: bool = True, limit: int = 5
) -> tuple[
    SharePartition,
    FakeDeadLetters,
    ManualClock,
    SystemTimer,
    list[tuple[int, tuple[PersisterStateBatch, ...]]],
]:
    clock = ManualClock()
    timer = SystemTimer(clock)
    dead_letters = FakeDeadLetters(enabled)
    writes: list[tuple[int, tuple[PersisterStateBatch, ...]]] = []
    sp = SharePartition(
        "g",
        "t",
        0,
        0,
        SharePartitionConfig(record_lock_duration_ms=1000, delivery_count_limit=limit),
        timer,
        on_write=recording(writes),
        dead_letters=dead_letters,
    )
    return sp, dead_letters, clock, timer, writes


def _ack(first: int, last: int, *types: int) -> list[AcknowledgementBatch]:
    return [AcknowledgementBatch(first, last, tuple(int(t) for t in types))]


def _state(sp: SharePartition, offset: int) -> RecordState | None:
    found = sp.record_state(offset)
    return None if found is None else found[0]


def test_a_rejected_range_is_archiving_until_its_write_ends_then_archived() -> None:
    sp, dead_letters, _clock, _timer, writes = _partition()
    sp.acquire("m1", [(0, 4)], 100)
    sp.acknowledge("m1", _ack(0, 2, X))
    assert dead_letters.runs == [(0, 2, 1, CLIENT_REJECT)]
    assert [_state(sp, o) for o in range(3)] == [RecordState.ARCHIVING] * 3
    assert sp.start_offset == 0  # ARCHIVING is not done: it holds the SPSO
    assert writes[-1] == (0, (PersisterStateBatch(0, 2, 3, 1),))  # durable as state 3

    sp.finish_archiving(0, 2)
    assert sp.start_offset == 3 and _state(sp, 0) is None
    assert writes[-1] == (3, ())


def test_accept_release_and_gap_are_not_dead_lettered() -> None:
    sp, dead_letters, _clock, _timer, _writes = _partition()
    sp.acquire("m1", [(0, 2)], 100)
    sp.acknowledge("m1", _ack(0, 0, A))
    sp.acknowledge("m1", _ack(1, 1, R))
    sp.acknowledge("m1", _ack(2, 2, G))
    assert dead_letters.runs == []
    assert _state(sp, 1) is RecordState.AVAILABLE and _state(sp, 2) is RecordState.ARCHIVED


def test_per_offset_types_send_only_the_rejected_offsets_in_runs() -> None:
    sp, dead_letters, _clock, _timer, _writes = _partition()
    sp.acquire("m1", [(0, 5)], 100)
    sp.acknowledge("m1", _ack(0, 5, X, X, A, R, X, G))
    assert dead_letters.runs == [(0, 1, 1, CLIENT_REJECT), (4, 4, 1, CLIENT_REJECT)]
    assert _state(sp, 5) is RecordState.ARCHIVED  # a GAP has no record to dead-letter


def test_a_release_at_the_delivery_count_limit_is_dead_lettered() -> None:
    sp, dead_letters, _clock, _timer, _writes = _partition(limit=2)
    sp.acquire("m1", [(0, 1)], 100)
    sp.acknowledge("m1", _ack(0, 1, R))
    assert dead_letters.runs == []  # delivery 1 of 2: available again
    sp.acquire("m1", [(0, 1)], 100)
    sp.acknowledge("m1", _ack(0, 1, R))
    assert dead_letters.runs == [(0, 1, 2, DELIVERY_COUNT_EXCEEDED)]
    assert _state(sp, 0) is RecordState.ARCHIVING


def test_a_lock_that_expires_at_the_limit_is_dead_lettered() -> None:
    sp, dead_letters, clock, timer, _writes = _partition(limit=1)
    sp.acquire("m1", [(0, 0)], 100)
    clock.advance(1000)
    timer.advance_clock()
    assert dead_letters.runs == [(0, 0, 1, DELIVERY_COUNT_EXCEEDED)]


def test_a_member_that_leaves_at_the_limit_has_its_records_dead_lettered() -> None:
    sp, dead_letters, _clock, _timer, _writes = _partition(limit=1)
    sp.acquire("m1", [(0, 2)], 100)
    assert sp.release_acquired_records("m1") == 3
    assert dead_letters.runs == [(0, 2, 1, DELIVERY_COUNT_EXCEEDED)]


def test_without_a_dlq_a_reject_archives_at_once_and_nothing_is_sent() -> None:
    sp, dead_letters, _clock, _timer, writes = _partition(enabled=False, limit=1)
    sp.acquire("m1", [(0, 3)], 100)
    sp.acknowledge("m1", _ack(0, 1, X))
    sp.acknowledge("m1", _ack(2, 3, R))  # at the limit
    assert dead_letters.runs == []
    assert sp.start_offset == 4
    assert all(b.delivery_state != 3 for _start, batches in writes for b in batches)


def test_an_archiving_offset_cannot_be_acquired_or_acknowledged() -> None:
    sp, _dead_letters, _clock, _timer, _writes = _partition()
    sp.acquire("m1", [(0, 0)], 100)
    sp.acknowledge("m1", _ack(0, 0, X))
    assert sp.acquire("m2", [(0, 0)], 100) == []
    error, _message = sp.acknowledge("m1", _ack(0, 0, A))
    assert error.name == "invalid_record_state"


def test_finishing_a_run_the_partition_no_longer_holds_changes_nothing() -> None:
    sp, _dead_letters, _clock, _timer, writes = _partition()
    sp.acquire("m1", [(0, 1)], 100)
    sp.acknowledge("m1", _ack(0, 0, A))
    count = len(writes)
    sp.finish_archiving(0, 1)  # 0 was accepted, 1 is still acquired
    assert len(writes) == count and _state(sp, 1) is RecordState.ACQUIRED


def test_a_state_read_with_archiving_runs_writes_them_again() -> None:
    """A leader that took over finds the last one's ARCHIVING runs and writes them
    again, the cause inferred from the delivery count (it is not persisted)."""
    sp, dead_letters, _clock, _timer, _writes = _partition(limit=3)
    sp.initialize(
        0,
        [
            PersisterStateBatch(0, 1, 3, 1),
            PersisterStateBatch(2, 2, 2, 1),
            PersisterStateBatch(3, 3, 3, 3),
        ],
    )
    assert dead_letters.runs == [(0, 1, 1, CLIENT_REJECT), (3, 3, 3, DELIVERY_COUNT_EXCEEDED)]
    assert sp.start_offset == 0
    sp.finish_archiving(0, 1)
    sp.finish_archiving(3, 3)
    assert sp.start_offset == 4
