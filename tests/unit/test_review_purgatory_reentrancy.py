"""Review: a ``check_and_complete`` made from inside a scan of the same key.

The purgatory promises that an ``on_complete`` may watch or check again on the same
thread. A state change made by one operation's completion can satisfy another operation
watching the same key that the running scan has already passed over; the nested
``check_and_complete(key)`` that announces the change must reach it, as it does in
Kafka (whose nested scan walks the same watcher list). Otherwise that operation waits
for its timeout although the change that satisfies it was announced.
"""

from __future__ import annotations

from purgatory.clock import ManualClock
from purgatory.delayed_operation import DelayedOperation
from purgatory.operation_purgatory import DelayedOperationPurgatory
from purgatory.system_timer import SystemTimer


class Gate(DelayedOperation):
    """Completes once ``state['open']`` is set."""

    def __init__(self, state: dict[str, bool], delay_ms: int = 1000) -> None:
        super().__init__(delay_ms)
        self.state = state
        self.completions = 0
        self.expirations = 0

    def try_complete(self) -> bool:
        if self.state["open"]:
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        self.completions += 1

    def on_expiration(self) -> None:
        self.expirations += 1


class Opener(DelayedOperation):
    """Completes when ``ready``; its completion opens the gate and announces it."""

    def __init__(
        self,
        state: dict[str, bool],
        purgatory: DelayedOperationPurgatory[DelayedOperation],
        key: str,
    ) -> None:
        super().__init__(1000)
        self.state = state
        self.purgatory = purgatory
        self.key = key
        self.ready = False

    def try_complete(self) -> bool:
        if self.ready:
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        self.state["open"] = True
        self.purgatory.check_and_complete(self.key)

    def on_expiration(self) -> None:
        pass


def _setup() -> tuple[DelayedOperationPurgatory[DelayedOperation], ManualClock, SystemTimer]:
    clock = ManualClock(0)
    timer = SystemTimer(clock)
    return DelayedOperationPurgatory("review", timer), clock, timer


def test_nested_check_on_same_key_reaches_an_operation_already_scanned() -> None:
    purgatory, clock, timer = _setup()
    state = {"open": False}
    gate = Gate(state)
    opener = Opener(state, purgatory, "k")
    # The gate is watched first, so the outer scan passes it before the opener runs.
    assert purgatory.try_complete_else_watch(gate, ["k"]) is False
    assert purgatory.try_complete_else_watch(opener, ["k"]) is False

    opener.ready = True
    purgatory.check_and_complete("k")

    assert gate.completions == 1, "the gate waited although its key was checked after it opened"
    assert gate.expirations == 0
    assert timer.size() == 0 and purgatory.watched() == 0
    # And nothing is left to fire later.
    clock.advance(2000)
    timer.advance_clock()
    assert gate.completions == 1 and gate.expirations == 0


def test_nested_check_still_keeps_unsatisfied_operations_watched() -> None:
    purgatory, _clock, timer = _setup()
    state = {"open": False}
    other_state = {"open": False}
    waiting = Gate(other_state)  # not satisfied by the opener's change
    opener = Opener(state, purgatory, "k")
    purgatory.try_complete_else_watch(waiting, ["k"])
    purgatory.try_complete_else_watch(opener, ["k"])

    opener.ready = True
    assert purgatory.check_and_complete("k") == 1
    assert waiting.completions == 0 and purgatory.watched() == 1

    other_state["open"] = True
    assert purgatory.check_and_complete("k") == 1
    assert waiting.completions == 1 and waiting.expirations == 0
    assert timer.size() == 0


def test_nested_check_after_a_nested_watch_loses_neither() -> None:
    purgatory, _clock, timer = _setup()
    state = {"open": False}
    gate = Gate(state)
    late = Gate({"open": False})  # watched from inside the scan, not satisfied yet

    class WatchingOpener(Opener):
        def on_complete(self) -> None:
            purgatory.try_complete_else_watch(late, ["k"])
            super().on_complete()

    opener = WatchingOpener(state, purgatory, "k")
    purgatory.try_complete_else_watch(gate, ["k"])
    purgatory.try_complete_else_watch(opener, ["k"])

    opener.ready = True
    assert purgatory.check_and_complete("k") == 2
    assert gate.completions == 1
    assert not late.is_completed and purgatory.watched() == 1 and timer.size() == 1
    late.state["open"] = True
    assert purgatory.check_and_complete("k") == 1 and timer.size() == 0
