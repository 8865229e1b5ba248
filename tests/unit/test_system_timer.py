"""SystemTimer on a manual clock: exactly-once firing, on time, cancel and move."""

from __future__ import annotations

import random

import pytest

from purgatory.clock import ManualClock
from purgatory.system_timer import SystemTimer
from purgatory.timer_task import TimerTask
from tests.helpers.timers import RecordingTask


def _timer(start_ms: int = 0) -> tuple[SystemTimer, ManualClock]:
    clock = ManualClock(start_ms)
    return SystemTimer(clock), clock


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_tasks_fire_once_within_one_tick_when_advanced_every_ms(seed: int) -> None:
    rng = random.Random(seed)
    timer, clock = _timer(start_ms=rng.randrange(0, 10_000))
    tasks: list[tuple[RecordingTask, int]] = []
    for _ in range(2000):
        # random steps of the clock, ticking the timer every ms on the way
        for _ in range(rng.choice([0, 0, 1, 1, 2, 5])):
            clock.advance(1)
            timer.advance_clock()
        delay = rng.randrange(0, 500)  # 0..499, duplicates included
        task = RecordingTask(delay, clock)
        expected = clock.now_ms() + delay
        timer.add(task)
        tasks.append((task, expected))
    for _ in range(600):
        clock.advance(1)
        timer.advance_clock()
    assert timer.size() == 0
    for task, expected in tasks:
        assert len(task.fired_at) == 1, (task.delay_ms, task.fired_at)
        # tick is 1 ms and the timer is advanced every ms: it fires exactly on time
        assert expected <= task.fired_at[0] <= expected + 1


@pytest.mark.parametrize("seed", [4, 5])
def test_random_tasks_with_coarse_advances_never_fire_early(seed: int) -> None:
    rng = random.Random(seed)
    timer, clock = _timer()
    tasks: list[tuple[RecordingTask, int]] = []
    for _ in range(2000):
        clock.advance(rng.choice([0, 1, 3, 17, 60]))
        timer.advance_clock()
        delay = rng.randrange(0, 500)
        task = RecordingTask(delay, clock)
        tasks.append((task, clock.now_ms() + delay))
        timer.add(task)
    clock.advance(1000)
    timer.advance_clock()
    for task, expected in tasks:
        assert len(task.fired_at) == 1
        assert task.fired_at[0] >= expected


def test_non_positive_delay_runs_at_once() -> None:
    timer, clock = _timer(start_ms=50)
    zero, negative = RecordingTask(0, clock), RecordingTask(-5, clock)
    timer.add(zero)
    timer.add(negative)
    assert zero.fired_at == [50] and negative.fired_at == [50]
    assert timer.size() == 0


def test_cancelled_task_leaves_size_at_once_and_never_fires() -> None:
    timer, clock = _timer()
    task, other = RecordingTask(30, clock), RecordingTask(30, clock)
    timer.add(task)
    timer.add(other)
    assert timer.size() == 2
    task.cancel()
    assert timer.size() == 1
    task.cancel()  # idempotent
    assert timer.size() == 1
    clock.advance(100)
    assert timer.advance_clock() == 1
    assert task.fired_at == [] and other.fired_at == [100]


def test_readding_a_task_moves_it() -> None:
    timer, clock = _timer()
    task = RecordingTask(100, clock)
    timer.add(task)
    clock.advance(10)
    timer.advance_clock()
    task.delay_ms = 300
    timer.add(task)
    assert timer.size() == 1
    for _ in range(400):
        clock.advance(1)
        timer.advance_clock()
    assert task.fired_at == [310]


def test_overflow_tasks_cascade_and_fire_on_time() -> None:
    timer, clock = _timer()
    mid, far, near = RecordingTask(350, clock), RecordingTask(450, clock), RecordingTask(5, clock)
    for task in (mid, far, near):
        timer.add(task)
    levels = timer.timing_wheel.levels()
    assert [level.interval for level in levels] == [20, 400, 8000]
    assert mid._timer_task_entry is not None and levels[1].bucket_for(mid._timer_task_entry)
    assert far._timer_task_entry is not None and levels[2].bucket_for(far._timer_task_entry)
    # advance only when the timer says something is due, as the reaper does
    while timer.size():
        next_ms = timer.next_expiration_ms()
        assert next_ms is not None
        clock.set(max(clock.now_ms(), next_ms))
        timer.advance_clock()
    assert near.fired_at == [5] and mid.fired_at == [350] and far.fired_at == [450]


def test_next_expiration_ignores_buckets_emptied_by_cancel() -> None:
    timer, clock = _timer()
    early, late = RecordingTask(5, clock), RecordingTask(15, clock)
    timer.add(early)
    timer.add(late)
    assert timer.next_expiration_ms() == 5
    early.cancel()
    assert timer.next_expiration_ms() == 15
    late.cancel()
    assert timer.next_expiration_ms() is None
    # the dropped bucket is queued again when used again
    again = RecordingTask(5, clock)
    timer.add(again)
    assert timer.next_expiration_ms() == 5
    clock.advance(5)
    assert timer.advance_clock() == 1 and again.fired_at == [5]


def test_earlier_expiration_callback() -> None:
    timer, clock = _timer()
    calls: list[int | None] = []
    timer.on_earlier_expiration = lambda: calls.append(timer.next_expiration_ms())
    timer.add(RecordingTask(15, clock))
    timer.add(RecordingTask(18, clock))  # later: no call
    timer.add(RecordingTask(15, clock))  # same bucket: not queued again
    timer.add(RecordingTask(3, clock))  # earlier
    timer.add(RecordingTask(50, clock))  # overflow bucket (expiration 40): later
    assert calls == [15, 3]


def test_task_run_can_schedule_and_cancel_tasks() -> None:
    timer, clock = _timer()
    victim = RecordingTask(10, clock)
    follow_up = RecordingTask(5, clock)

    class Chain(TimerTask):
        def run(self) -> None:
            victim.cancel()  # same batch: must not run afterwards
            timer.add(follow_up)

    timer.add(Chain(10))
    timer.add(victim)
    clock.advance(10)
    assert timer.advance_clock() == 1
    assert victim.fired_at == [] and timer.size() == 1
    clock.advance(5)
    timer.advance_clock()
    assert follow_up.fired_at == [15]


def test_failing_task_does_not_stop_the_others(caplog: pytest.LogCaptureFixture) -> None:
    timer, clock = _timer()

    class Boom(TimerTask):
        def run(self) -> None:
            raise RuntimeError("boom")

    ok = RecordingTask(3, clock)
    timer.add(Boom(3))
    timer.add(ok)
    clock.advance(3)
    assert timer.advance_clock() == 2
    assert ok.fired_at == [3]
    assert "boom" in caplog.text


def test_tick_larger_than_one() -> None:
    clock = ManualClock(0)
    timer = SystemTimer(clock, tick_ms=10, wheel_size=8)
    task = RecordingTask(125, clock)
    timer.add(task)
    for _ in range(200):
        clock.advance(1)
        timer.advance_clock()
    # Kafka's wheel fires within the tick that holds the expiration
    assert len(task.fired_at) == 1 and 120 <= task.fired_at[0] <= 125
