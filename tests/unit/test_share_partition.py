"""SharePartition's state machine on the manual clock: acquire, the acknowledge types,
lock expiry and redelivery with delivery counts, archiving at the limit, renew, release,
record-lock back-pressure, and bad acknowledgements that change nothing."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.share.share_partition import (
    ABORTED,
    CONTROL,
    DATA,
    AcknowledgementBatch,
    AcknowledgeType,
    AcquiredRecords,
    RecordState,
    SharePartition,
    SharePartitionConfig,
)
from broker.share_coordinator.share_state_records import PersisterStateBatch
from purgatory import ManualClock, SystemTimer
from tests.helpers.share_writes import recording

A, R, X, G, N = (
    AcknowledgeType.ACCEPT,
    AcknowledgeType.RELEASE,
    AcknowledgeType.REJECT,
    AcknowledgeType.GAP,
    AcknowledgeType.RENEW,
)


def _partition(**config: int) -> tuple[SharePartition, ManualClock, SystemTimer, list[int]]:
    clock = ManualClock()
    timer = SystemTimer(clock)
    woken: list[int] = []
    sp = SharePartition(
        "g",
        "t",
        0,
        0,
        SharePartitionConfig(**{"record_lock_duration_ms": 1000, **config}),
        timer,
        on_available=lambda: woken.append(1),
    )
    return sp, clock, timer, woken


def _ack(first: int, last: int, *types: int) -> AcknowledgementBatch:
    return AcknowledgementBatch(first, last, tuple(int(t) for t in types))


def _expire(clock: ManualClock, timer: SystemTimer, ms: int = 1000) -> None:
    clock.advance(ms)
    timer.advance_clock()


def test_acquire_new_records_with_delivery_count_one_under_one_lock() -> None:
    sp, _, timer, _ = _partition()
    assert sp.acquire("m1", [(0, 4)], 100) == [AcquiredRecords(0, 4, 1)]
    assert sp.end_offset == 5 and sp.acquired_count == 5 and timer.size() == 1
    assert sp.record_state(2) == (RecordState.ACQUIRED, 1, "m1")
    # nothing more to acquire until the log has more
    assert sp.acquire("m2", [(0, 4)], 100) == []
    assert sp.next_fetch_offset() == 5


def test_record_limit_mode_caps_one_acquisition_inside_a_batch() -> None:
    """KIP-1206 record_limit: MaxRecords exactly, a batch split at the cap."""
    sp, *_ = _partition()
    assert sp.acquire("m1", [(0, 9)], 3, record_limit=True) == [AcquiredRecords(0, 2, 1)]
    assert sp.acquire("m2", [(3, 9)], 3, record_limit=True) == [AcquiredRecords(3, 5, 1)]


def test_batch_optimized_mode_acquires_whole_batches_past_max_records() -> None:
    """KIP-1206 batch_optimized (the default): the batch the cap falls in is acquired
    whole; no further batch is started once the cap is reached."""
    sp, *_ = _partition()
    assert sp.acquire("m1", [(0, 1), (2, 9), (10, 12)], 3) == [AcquiredRecords(0, 9, 1)]
    assert sp.acquire("m2", [(10, 12), (13, 20)], 3) == [AcquiredRecords(10, 12, 1)]
    # the record-lock window: a fetch whose MaxRecords it has room for takes the batch
    # that reaches MaxRecords whole, even past it (Kafka's); one it has no room for is
    # cut at the window, as is any in record_limit mode
    sp, *_ = _partition(max_record_locks=100)
    assert sp.acquire("m1", [(0, 29), (30, 149), (150, 199)], 50) == [AcquiredRecords(0, 149, 1)]
    assert sp.window_full() and sp.acquire("m2", [(150, 199)], 50) == []
    sp, *_ = _partition(max_record_locks=100)
    assert sp.acquire("m1", [(0, 29), (30, 149)], 500) == [AcquiredRecords(0, 99, 1)]
    sp, *_ = _partition(max_record_locks=100)
    assert sp.acquire("m1", [(0, 149)], 500, record_limit=True) == [AcquiredRecords(0, 99, 1)]


def test_aborted_records_are_archived_and_control_batches_skipped() -> None:
    """read_committed: an aborted transaction's batch is archived (never delivered),
    its marker skipped; the start offset moves past both."""
    sp, *_ = _partition()
    batches = [(0, 2, ABORTED), (3, 3, CONTROL), (4, 6, DATA)]
    assert sp.acquire("m1", batches, 100) == [AcquiredRecords(4, 6, 1)]
    assert sp.start_offset == 4
    assert sp.acquire("m1", [(0, 2, ABORTED), (3, 3, CONTROL)], 100) == []


def test_renew_is_invalid_record_state_when_the_group_has_not_enabled_it() -> None:
    sp, *_ = _partition()
    sp.acquire("m1", [(0, 1)], 100)
    assert sp.acknowledge("m1", [_ack(0, 1, N)], allow_renew=True, renew_enabled=False) == (
        ErrorCode.invalid_record_state,
        "Renew acknowledgements are not enabled for the share group.",
    )
    assert sp.record_state(0) == (RecordState.ACQUIRED, 1, "m1")
    assert sp.acknowledge("m1", [_ack(0, 1, N)], allow_renew=False)[0] is ErrorCode.invalid_request
    assert sp.acknowledge("m1", [_ack(0, 1, N)], allow_renew=True) == (ErrorCode.none, None)


def test_accept_moves_the_start_offset_and_cancels_the_lock() -> None:
    sp, _, timer, _ = _partition()
    sp.acquire("m1", [(0, 4)], 100)
    assert sp.acknowledge("m1", [_ack(0, 4, A)]) == (ErrorCode.none, None)
    assert sp.start_offset == 5 and sp.in_flight_count() == 0 and sp.acquired_count == 0
    assert timer.size() == 0  # cancelled at once, not left to expire


def test_partial_accept_keeps_the_lock_for_the_rest() -> None:
    sp, clock, timer, woken = _partition()
    sp.acquire("m1", [(0, 4)], 100)
    sp.acknowledge("m1", [_ack(0, 1, A)])
    assert sp.start_offset == 2 and timer.size() == 1
    _expire(clock, timer)
    assert sp.record_state(2) == (RecordState.AVAILABLE, 1, None)
    assert woken and sp.next_fetch_offset() == 2


def test_lock_expiry_redelivers_with_an_incremented_delivery_count() -> None:
    sp, clock, timer, woken = _partition()
    sp.acquire("m1", [(0, 2)], 100)
    _expire(clock, timer)
    assert woken == [1] and sp.acquired_count == 0
    assert sp.acquire("m2", [(0, 2)], 100) == [AcquiredRecords(0, 2, 2)]
    # the first member's lock is gone: its acknowledgement is refused
    assert sp.acknowledge("m1", [_ack(0, 2, A)])[0] is ErrorCode.invalid_record_state


def test_release_redelivers_and_reject_never_does() -> None:
    sp, _, _, woken = _partition()
    sp.acquire("m1", [(0, 3)], 100)
    assert sp.acknowledge("m1", [_ack(0, 3, R, X, A, G)])[0] is ErrorCode.none
    assert woken == [1]
    assert sp.record_state(0) == (RecordState.AVAILABLE, 1, None)
    assert sp.start_offset == 0 and sp.next_fetch_offset() == 0
    assert sp.acquire("m2", [(0, 3)], 100) == [AcquiredRecords(0, 0, 2)]
    sp.acknowledge("m2", [_ack(0, 0, A)])
    assert sp.start_offset == 4 and sp.in_flight_count() == 0


def test_archived_at_the_delivery_count_limit() -> None:
    sp, clock, timer, _ = _partition(delivery_count_limit=3)
    for delivery in (1, 2, 3):
        assert sp.acquire("m1", [(0, 0)], 100) == [AcquiredRecords(0, 0, delivery)]
        if delivery < 3:
            sp.acknowledge("m1", [_ack(0, 0, R)])
        else:
            _expire(clock, timer)  # an expiry at the limit archives too
    assert sp.record_state(0) is None and sp.start_offset == 1
    assert sp.acquire("m1", [(0, 0)], 100) == []


def test_renew_extends_the_lock() -> None:
    sp, clock, timer, _ = _partition()
    sp.acquire("m1", [(0, 1)], 100)
    clock.advance(900)
    timer.advance_clock()
    assert sp.acknowledge("m1", [_ack(0, 1, N)], allow_renew=True)[0] is ErrorCode.none
    _expire(clock, timer, 900)  # the first lock's deadline has passed: still held
    assert sp.record_state(0) == (RecordState.ACQUIRED, 1, "m1")
    _expire(clock, timer, 200)
    assert sp.record_state(0) == (RecordState.AVAILABLE, 1, None)


def test_renew_is_refused_before_v2() -> None:
    sp, *_ = _partition()
    sp.acquire("m1", [(0, 1)], 100)
    assert sp.acknowledge("m1", [_ack(0, 1, N)])[0] is ErrorCode.invalid_request


def test_max_record_locks_back_pressure() -> None:
    sp, *_ = _partition(max_record_locks=4)
    one_per_batch = [(i, i) for i in range(10)]
    assert sp.acquire("m1", one_per_batch, 100) == [AcquiredRecords(0, 3, 1)]
    assert sp.window_full() and not sp.can_acquire_records(10)
    assert sp.acquire("m2", one_per_batch[4:], 100) == []
    sp.acknowledge("m1", [_ack(0, 1, A)])
    assert sp.can_acquire_records(10)
    assert sp.acquire("m2", one_per_batch[4:], 100) == [AcquiredRecords(4, 5, 1)]


def test_release_acquired_records_of_a_member_that_left() -> None:
    sp, _, timer, woken = _partition()
    sp.acquire("m1", [(0, 1)], 100)
    sp.acquire("m2", [(2, 3)], 100)
    assert sp.release_acquired_records("m1") == 2
    assert woken == [1] and timer.size() == 1
    assert sp.record_state(2) == (RecordState.ACQUIRED, 1, "m2")
    assert sp.acquire("m2", [(0, 3)], 100) == [AcquiredRecords(0, 1, 2)]


def test_bad_acknowledgements_change_nothing() -> None:
    sp, _, timer, _ = _partition()
    sp.acquire("m1", [(5, 9)], 100)  # a share partition started at 0: 0-4 are gaps
    bad = [
        ([_ack(9, 5, A)], ErrorCode.invalid_request),  # last < first
        ([_ack(5, 6, A, A, A)], ErrorCode.invalid_request),  # types do not match
        ([_ack(5, 5, 7)], ErrorCode.invalid_request),  # unknown type
        ([_ack(5, 12, A)], ErrorCode.invalid_request),  # past the acquired records
        ([_ack(20, 10**15, A)], ErrorCode.invalid_request),  # absurd range
        ([_ack(0, 5, A)], ErrorCode.invalid_record_state),  # never acquired
        ([_ack(5, 6, A), _ack(7, 7, A), _ack(-3, 7, A)], ErrorCode.invalid_request),
    ]
    for batches, error in bad:
        assert sp.acknowledge("m1", batches)[0] is error, batches
    assert sp.acknowledge("m2", [_ack(5, 9, A)])[0] is ErrorCode.invalid_record_state
    for offset in range(5, 10):
        assert sp.record_state(offset) == (RecordState.ACQUIRED, 1, "m1")
    assert sp.acquired_count == 5 and timer.size() == 1
    sp.acknowledge("m1", [_ack(5, 9, A)])
    assert sp.acknowledge("m1", [_ack(5, 9, A)])[0] is ErrorCode.invalid_record_state


def test_log_start_moving_past_the_start_offset_drops_records() -> None:
    sp, _, timer, _ = _partition()
    sp.acquire("m1", [(0, 4)], 100)
    sp.move_start_offset(3)
    assert sp.start_offset == 3 and sp.acquired_count == 2 and timer.size() == 1
    sp.move_start_offset(10)
    assert sp.start_offset == 10 == sp.end_offset and timer.size() == 0


def test_random_operations_keep_the_counts_true() -> None:
    """Acquire, acknowledge (every type), release, expire and move the log start in a
    seeded random order: the counts the fast paths trust stay equal to the states."""
    import random

    rng = random.Random(7)
    sp, clock, timer, _ = _partition(max_record_locks=100, delivery_count_limit=3)
    members = ["m1", "m2", "m3"]
    log_end = 0
    for _ in range(3000):
        op = rng.random()
        if op < 0.3:
            log_end += rng.randint(0, 5)
            first = sp.next_fetch_offset()
            if first < log_end:
                sp.acquire(rng.choice(members), [(first, log_end - 1)], rng.randint(1, 20))
        elif op < 0.7:
            member = rng.choice(members)
            held = [
                o
                for o in range(sp.start_offset, sp.end_offset)
                if (state := sp.record_state(o)) and state[0] is RecordState.ACQUIRED
                and state[2] == member
            ]  # fmt: skip
            if held:
                o = rng.choice(held)
                kind = rng.choice([A, R, X, G, N])
                error, _ = sp.acknowledge(member, [_ack(o, o, kind)], allow_renew=True)
                assert error is ErrorCode.none
        elif op < 0.8:
            sp.release_acquired_records(rng.choice(members))
        elif op < 0.95:
            clock.advance(rng.randint(1, 600))
            timer.advance_clock()
        elif log_end:
            sp.move_start_offset(rng.randint(sp.start_offset, log_end))
        states = [sp.record_state(o) for o in range(sp.start_offset, sp.end_offset)]
        present = [s for s in states if s is not None]
        assert sp._available == sum(s[0] is RecordState.AVAILABLE for s in present)
        assert sp.acquired_count == sum(s[0] is RecordState.ACQUIRED for s in present)
        assert sp.in_flight_count() == len(present)
        assert all(s[1] <= 3 for s in present)
        first_available = next(
            (o for o, s in zip(range(sp.start_offset, sp.end_offset), states, strict=True)
             if s is not None and s[0] is RecordState.AVAILABLE),
            sp.end_offset,
        )  # fmt: skip
        assert sp.next_fetch_offset() == first_available
    assert (timer.size() == 0) == (sp.acquired_count == 0)


def test_an_accept_that_opens_a_full_window_wakes_the_waiting_fetches() -> None:
    sp, _, _, woken = _partition(max_record_locks=2)
    sp.acquire("m1", [(i, i) for i in range(6)], 100)
    assert sp.window_full() and not woken
    sp.acknowledge("m1", [_ack(1, 1, A)])  # the start offset does not move: no wake
    assert not woken
    sp.acknowledge("m1", [_ack(0, 0, A)])
    assert woken == [1] and sp.can_acquire_records(6)


# -- durable state (the share coordinator's batches) -------------------------------------


def _durable(
    **config: int,
) -> tuple[
    SharePartition, ManualClock, SystemTimer, list[tuple[int, tuple[PersisterStateBatch, ...]]]
]:
    clock = ManualClock()
    timer = SystemTimer(clock)
    writes: list[tuple[int, tuple[PersisterStateBatch, ...]]] = []
    sp = SharePartition(
        "g",
        "t",
        0,
        0,
        SharePartitionConfig(**{"record_lock_duration_ms": 1000, **config}),
        timer,
        initialized=False,
        on_write=recording(writes),
    )
    return sp, clock, timer, writes


def test_an_initialising_share_partition_acquires_nothing_until_it_has_its_state() -> None:
    sp, _, _, writes = _durable()
    assert not sp.can_acquire_records(10)
    assert sp.acquire("m1", [(0, 9)], 100) == []
    assert sp.acknowledge("m1", [_ack(0, 0, A)])[0] is ErrorCode.invalid_record_state
    # start 3; 3-4 acknowledged, 5 archived, 6 available once, 8 available twice (7: a gap)
    sp.initialize(
        3,
        [
            PersisterStateBatch(3, 4, 2, 1),
            PersisterStateBatch(5, 5, 4, 5),
            PersisterStateBatch(6, 6, 0, 1),
            PersisterStateBatch(8, 8, 0, 2),
        ],
    )
    assert sp.start_offset == 6 and sp.end_offset == 9
    assert sp.acquire("m1", [(0, 9)], 100) == [
        AcquiredRecords(6, 6, 2),
        AcquiredRecords(7, 7, 1),
        AcquiredRecords(8, 8, 3),
        AcquiredRecords(9, 9, 1),
    ]
    assert writes == []  # acquisition is not written


def test_acknowledgements_and_lock_expiry_write_the_changed_batches() -> None:
    sp, clock, timer, writes = _durable(delivery_count_limit=2)
    sp.initialize(0, [])
    sp.acquire("m1", [(0, 5)], 100)
    assert sp.acknowledge("m1", [_ack(0, 1, A), _ack(3, 3, R), _ack(4, 4, X)]) == (
        ErrorCode.none,
        None,
    )
    assert writes[-1] == (
        0,
        (
            PersisterStateBatch(0, 1, 2, 1),
            PersisterStateBatch(3, 3, 0, 1),
            PersisterStateBatch(4, 4, 4, 1),
        ),
    )
    sp.acquire("m1", [(0, 5)], 100)  # 3 again (count 2)
    _expire(clock, timer)  # each lock writes what it let go
    assert writes[-2:] == [
        (2, (PersisterStateBatch(2, 2, 0, 1), PersisterStateBatch(5, 5, 0, 1))),
        (2, (PersisterStateBatch(3, 3, 4, 2),)),  # archived at the limit
    ]
    sp.acquire("m1", [(0, 5)], 100)
    sp.acknowledge("m1", [_ack(2, 2, A), _ack(5, 5, A)])
    assert writes[-1] == (2, (PersisterStateBatch(2, 2, 2, 2), PersisterStateBatch(5, 5, 2, 2)))
    assert sp.start_offset == 6  # moved once the write was made; the next write says it
    assert sp.writes == 4


def test_initialize_keeps_the_record_lock_window_only() -> None:
    sp, _, _, _ = _durable(max_record_locks=10)
    sp.initialize(100, [PersisterStateBatch(100, 2**62, 0, 1)])
    assert sp.in_flight_count() == 10 and sp.end_offset == 110


def test_a_marker_offset_read_back_as_a_gap_is_archived_when_its_control_batch_comes() -> None:
    """A new leader reads the durable state back; a transaction marker between two state
    batches is a gap, made AVAILABLE. Its control batch is never delivered, so it is
    archived when fetched, and the start offset moves past it (it used to stay there for
    good: found by the simulation's share checkers, issue 33)."""
    sp, _, _, writes = _durable()
    sp.initialize(0, [PersisterStateBatch(0, 2, 2, 1), PersisterStateBatch(4, 5, 0, 1)])
    assert sp.start_offset == 3 and sp.record_state(3) == (RecordState.AVAILABLE, 0, None)
    acquired = sp.acquire("m1", [(3, 3, CONTROL), (4, 5, DATA)], 100)
    assert acquired == [AcquiredRecords(4, 5, 2)]
    assert sp.start_offset == 4 and sp.record_state(3) is None  # archived, then left behind
    assert writes and writes[-1][0] == 4  # the new start offset is made durable
