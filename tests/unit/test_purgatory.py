"""DelayedOperation and DelayedOperationPurgatory on a manual clock."""

from __future__ import annotations

from collections.abc import Callable

from purgatory.clock import ManualClock
from purgatory.delayed_operation import DelayedOperation
from purgatory.operation_purgatory import DelayedOperationPurgatory
from purgatory.system_timer import SystemTimer


class FakeOperation(DelayedOperation):
    """Completes when ``ready`` is set (or when ``on_try`` makes it so)."""

    def __init__(self, delay_ms: int, ready: bool = False) -> None:
        super().__init__(delay_ms)
        self.ready = ready
        self.completions = 0
        self.expirations = 0
        self.tries = 0
        self.on_try: Callable[[FakeOperation], None] | None = None

    def try_complete(self) -> bool:
        self.tries += 1
        ready = self.ready  # the state as this check saw it
        if self.on_try is not None:
            self.on_try(self)  # a state change right after the check
        if ready:
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        self.completions += 1

    def on_expiration(self) -> None:
        self.expirations += 1


def _setup(
    purge_interval: int = 1000,
) -> tuple[DelayedOperationPurgatory[FakeOperation], ManualClock, SystemTimer]:
    clock = ManualClock(0)
    timer = SystemTimer(clock)
    return DelayedOperationPurgatory("test", timer, purge_interval=purge_interval), clock, timer


def _tick_to(clock: ManualClock, timer: SystemTimer, ms: int) -> None:
    while clock.now_ms() < ms:
        clock.advance(1)
        timer.advance_clock()


def test_completable_operation_completes_at_once_and_is_not_watched() -> None:
    purgatory, _, timer = _setup()
    op = FakeOperation(100, ready=True)
    assert purgatory.try_complete_else_watch(op, ["a"]) is True
    assert op.completions == 1 and purgatory.watched() == 0 and timer.size() == 0


def test_check_and_complete_counts_and_cleans_up() -> None:
    purgatory, _, _ = _setup()
    ops = [FakeOperation(100) for _ in range(3)]
    for op in ops:
        assert purgatory.try_complete_else_watch(op, ["a"]) is False
    assert purgatory.watched() == 3 and purgatory.num_delayed() == 3
    assert purgatory.check_and_complete("a") == 0
    ops[0].ready = ops[2].ready = True
    assert purgatory.check_and_complete("a") == 2
    assert purgatory.watched() == 1 and purgatory.num_delayed() == 1
    assert purgatory.check_and_complete("missing") == 0
    ops[1].ready = True
    assert purgatory.check_and_complete("a") == 1
    assert purgatory.watched_keys() == []  # an empty watch list is removed


def test_on_complete_exactly_once_across_two_keys_and_expiry() -> None:
    purgatory, clock, timer = _setup()
    op = FakeOperation(50)
    purgatory.try_complete_else_watch(op, ["a", "b"])
    op.ready = True
    assert purgatory.check_and_complete("a") == 1
    assert purgatory.check_and_complete("b") == 0
    assert op.force_complete() is False
    _tick_to(clock, timer, 100)
    assert op.completions == 1 and op.expirations == 0
    assert purgatory.expired_count == 0


def test_expiry_completes_once_and_counts() -> None:
    purgatory, clock, timer = _setup()
    op = FakeOperation(50)
    purgatory.try_complete_else_watch(op, ["a", "b"])
    _tick_to(clock, timer, 49)
    assert op.completions == 0
    _tick_to(clock, timer, 50)
    assert op.completions == 1 and op.expirations == 1 and op.is_completed
    assert purgatory.expired_count == 1 and purgatory.num_delayed() == 0
    # a late check on a key neither completes it again nor counts it
    op.ready = True
    assert purgatory.check_and_complete("a") == 0
    assert purgatory.check_and_complete("b") == 0
    assert op.completions == 1


def test_second_check_catches_completion_that_raced_the_watch() -> None:
    purgatory, _, timer = _setup()
    op = FakeOperation(100)

    def become_ready_after_first_try(o: FakeOperation) -> None:
        # The state changes right after the first check, before the watch (another
        # key's append, say): no check_and_complete will come for it afterwards.
        if o.tries == 1:
            o.ready = True

    op.on_try = become_ready_after_first_try
    assert purgatory.try_complete_else_watch(op, ["a"]) is True
    assert op.tries == 2 and op.completions == 1
    assert timer.size() == 0  # never added to the timer


def test_cancel_for_key_cancels_timers_without_completing() -> None:
    purgatory, clock, timer = _setup()
    pending, done = FakeOperation(30), FakeOperation(30)
    other = FakeOperation(30)
    purgatory.try_complete_else_watch(pending, ["a", "b"])
    purgatory.try_complete_else_watch(done, ["a"])
    purgatory.try_complete_else_watch(other, ["b"])
    done.force_complete()
    assert purgatory.cancel_for_key("a") == [pending]
    assert pending.completions == 0 and not pending.is_completed
    assert pending.deadline_ms is None and timer.size() == 1
    assert "a" not in purgatory.watched_keys()
    _tick_to(clock, timer, 100)
    assert pending.completions == 0 and other.expirations == 1
    assert purgatory.cancel_for_key("a") == []


def test_purge_accounting_and_cross_key_cleanup() -> None:
    purge_interval = 10
    purgatory, _, _ = _setup(purge_interval=purge_interval)
    ops = [FakeOperation(1000) for _ in range(purge_interval)]
    for op in ops:
        purgatory.try_complete_else_watch(op, ["a", "b"])
    assert purgatory.watched() == 2 * purge_interval
    for op in ops:
        op.ready = True
    assert purgatory.check_and_complete("a") == purge_interval
    # completion leaves the timer at once ...
    assert purgatory.num_delayed() == 0
    # ... but key b still holds the completed operations until a purge
    assert purgatory.watched() == purge_interval
    # The estimate (ops watched since the last purge minus delayed) is 10, which is
    # not above purge_interval: watching more triggers the purge at the next check.
    fresh = [FakeOperation(1000) for _ in range(purge_interval)]
    for op in fresh:
        purgatory.try_complete_else_watch(op, ["c"])
    assert purgatory.purged_count == purge_interval
    assert "b" not in purgatory.watched_keys()
    assert purgatory.watched() == purge_interval
    assert all(op.completions == 1 for op in ops)


def test_purge_completed_direct() -> None:
    purgatory, clock, timer = _setup()
    a, b = FakeOperation(10), FakeOperation(500)
    purgatory.try_complete_else_watch(a, ["x", "y"])
    purgatory.try_complete_else_watch(b, ["y"])
    _tick_to(clock, timer, 10)  # a expires: still listed under x and y
    assert purgatory.watched() == 3
    assert purgatory.purge_completed() == 2
    assert purgatory.watched() == 1 and purgatory.watched_keys() == ["y"]


def test_delayed_operations_lists_waiting_ops_with_keys_and_deadlines() -> None:
    purgatory, clock, _ = _setup()
    clock.set(1000)
    late, early, done = FakeOperation(300), FakeOperation(100), FakeOperation(200)
    purgatory.try_complete_else_watch(late, [("t", 0), ("t", 1)])
    purgatory.try_complete_else_watch(early, [("t", 1)])
    purgatory.try_complete_else_watch(done, [("t", 0)])
    done.force_complete()
    assert purgatory.delayed_operations() == [early, late]
    info = late.debug_info()
    assert info["keys"] == ["('t', 0)", "('t', 1)"]
    assert info["deadline_ms"] == 1300 and info["type"] == "FakeOperation"


def test_reentrant_completion_watching_on_same_key() -> None:
    purgatory, _, _ = _setup()
    follow_up = FakeOperation(100)

    class Chained(FakeOperation):
        def on_complete(self) -> None:
            super().on_complete()
            purgatory.try_complete_else_watch(follow_up, ["a"])

    first = Chained(100)
    purgatory.try_complete_else_watch(first, ["a"])
    first.ready = True
    assert purgatory.check_and_complete("a") == 1
    assert purgatory.watched() == 1 and not follow_up.is_completed
    follow_up.ready = True
    assert purgatory.check_and_complete("a") == 1


def test_zero_delay_operation_expires_at_once_after_watch() -> None:
    purgatory, _, timer = _setup()
    op = FakeOperation(0)
    assert purgatory.try_complete_else_watch(op, ["a"]) is False
    assert op.completions == 1 and op.expirations == 1 and purgatory.expired_count == 1
    assert timer.size() == 0


def test_what_the_console_reads_counts_completions_and_changes_no_timer() -> None:
    """completed_count (the console's completed/s), the wheel's buckets and the next
    expiration, read without dropping anything the reaper would see."""
    purgatory, clock, timer = _setup()
    parked = [FakeOperation(5), FakeOperation(30)]
    for op in parked:
        assert purgatory.try_complete_else_watch(op, ["k"]) is False
    sizes = [level.bucket_sizes() for level in timer.timing_wheel.levels()]
    assert sum(map(sum, sizes)) == 2
    assert timer.peek_next_expiration_ms() == 5
    parked[0].ready = True
    assert purgatory.check_and_complete("k") == 1
    assert (purgatory.completed_count, purgatory.expired_count) == (1, 0)
    # The emptied bucket is skipped; the 30 ms one sits in level 2's bucket of 20 ms.
    assert timer.peek_next_expiration_ms() == 20
    assert len(timer._queue.heap) == 2  # ...and the emptied one left for the reaper to drop
    _tick_to(clock, timer, 31)
    assert (purgatory.completed_count, purgatory.expired_count) == (1, 1)
    assert timer.peek_next_expiration_ms() is None
