"""Property test: SystemTimer against a reference model (a dict of expirations).

Random sequences of add / re-add / cancel / advance. After every advance exactly the
tasks whose expiration has been reached have fired, each once, at that clock value;
``size()`` always equals the model's size; ``next_expiration_ms()`` never lies later
than the earliest pending expiration (the reaper relies on that to not oversleep).
"""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from purgatory.clock import ManualClock
from purgatory.system_timer import SystemTimer
from tests.helpers.timers import RecordingTask

TASK_IDS = st.integers(min_value=0, max_value=15)


class TimerModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = ManualClock(1000)
        self.timer = SystemTimer(self.clock, tick_ms=1, wheel_size=8)
        self.tasks: dict[int, RecordingTask] = {}
        self.pending: dict[int, int] = {}  # the model: task id -> expiration
        self.fired: dict[int, list[int]] = {}  # task id -> clock values it fired at

    def _task(self, task_id: int) -> RecordingTask:
        task = self.tasks.get(task_id)
        if task is None:
            task = self.tasks[task_id] = RecordingTask(0, self.clock, label=task_id)
        return task

    def _collect(self) -> None:
        for task_id, task in self.tasks.items():
            if task.fired_at:
                self.fired.setdefault(task_id, []).extend(task.fired_at)
                task.fired_at.clear()

    @rule(task_id=TASK_IDS, delay=st.integers(min_value=-2, max_value=3000))
    def add(self, task_id: int, delay: int) -> None:
        task = self._task(task_id)
        task.delay_ms = delay
        self.timer.add(task)
        self.pending.pop(task_id, None)  # re-adding moves it
        self._collect()
        if delay <= 0:
            assert self.fired.pop(task_id) == [self.clock.now_ms()]
        else:
            assert task_id not in self.fired
            self.pending[task_id] = self.clock.now_ms() + delay

    @rule(task_id=TASK_IDS)
    def cancel(self, task_id: int) -> None:
        self._task(task_id).cancel()
        self.pending.pop(task_id, None)

    @rule(step=st.one_of(st.integers(0, 5), st.integers(0, 600), st.integers(0, 5000)))
    def advance(self, step: int) -> None:
        self.clock.advance(step)
        now = self.clock.now_ms()
        ran = self.timer.advance_clock()
        self._collect()
        due = {task_id for task_id, expiration in self.pending.items() if expiration <= now}
        assert set(self.fired) == due
        assert all(times == [now] for times in self.fired.values())
        assert ran == len(due)
        for task_id in due:
            del self.pending[task_id]
        self.fired.clear()

    @invariant()
    def sizes_agree(self) -> None:
        assert self.timer.size() == len(self.pending)

    @invariant()
    def next_expiration_is_not_late(self) -> None:
        next_ms = self.timer.next_expiration_ms()
        if not self.pending:
            assert next_ms is None
        else:
            assert next_ms is not None and next_ms <= min(self.pending.values())


TimerModel.TestCase.settings = settings(max_examples=150, stateful_step_count=60, deadline=None)
test_timer_matches_model = TimerModel.TestCase
