"""The optional purgatory listener: told of each watched operation's life, once each."""

from __future__ import annotations

from collections.abc import Hashable

from purgatory.clock import ManualClock
from purgatory.delayed_operation import DelayedOperation
from purgatory.operation_purgatory import DelayedOperationPurgatory
from purgatory.system_timer import SystemTimer


class Op(DelayedOperation):
    def __init__(self, delay_ms: int) -> None:
        super().__init__(delay_ms)
        self.ready = False

    def try_complete(self) -> bool:
        return self.force_complete() if self.ready else False

    def on_complete(self) -> None:
        pass

    def on_expiration(self) -> None:
        pass


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, DelayedOperation, tuple[Hashable, ...] | None]] = []

    def on_watch(self, operation: DelayedOperation, keys: tuple[Hashable, ...]) -> None:
        self.events.append(("watch", operation, keys))

    def on_complete(self, operation: DelayedOperation) -> None:
        self.events.append(("complete", operation, None))

    def on_expire(self, operation: DelayedOperation) -> None:
        self.events.append(("expire", operation, None))


def _purgatory() -> tuple[ManualClock, SystemTimer, DelayedOperationPurgatory[Op], Recorder]:
    clock = ManualClock()
    timer = SystemTimer(clock)
    purgatory: DelayedOperationPurgatory[Op] = DelayedOperationPurgatory("Fetch", timer)
    recorder = Recorder()
    purgatory.listener = recorder
    return clock, timer, purgatory, recorder


def test_watched_then_completed_by_a_key() -> None:
    _, _, purgatory, recorder = _purgatory()
    op = Op(100)
    assert not purgatory.try_complete_else_watch(op, ["a", "b"])
    op.ready = True
    assert purgatory.check_and_complete("a") == 1
    purgatory.check_and_complete("b")  # completed already: no second event
    assert recorder.events == [("watch", op, ("a", "b")), ("complete", op, None)]


def test_watched_then_expired_reports_expire_not_complete() -> None:
    clock, timer, purgatory, recorder = _purgatory()
    op = Op(100)
    purgatory.try_complete_else_watch(op, ["a"])
    clock.advance(100)
    timer.advance_clock()
    assert recorder.events == [("watch", op, ("a",)), ("expire", op, None)]
    assert purgatory.expired_count == 1


def test_operation_completed_on_first_check_is_never_reported() -> None:
    _, _, purgatory, recorder = _purgatory()
    op = Op(100)
    op.ready = True
    assert purgatory.try_complete_else_watch(op, ["a"])
    assert recorder.events == []


def test_no_listener_changes_nothing() -> None:
    clock, timer, purgatory, _ = _purgatory()
    purgatory.listener = None
    op = Op(10)
    purgatory.try_complete_else_watch(op, ["a"])
    clock.advance(10)
    timer.advance_clock()
    assert op.is_completed and purgatory.expired_count == 1
