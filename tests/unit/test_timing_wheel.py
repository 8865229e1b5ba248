"""TimingWheel and TimerTaskList: placement, overflow levels, Kafka's add rules."""

from __future__ import annotations

from purgatory.clock import ManualClock
from purgatory.timer_task import TimerTaskEntry
from purgatory.timing_wheel import BucketQueue, TaskCounter, TimerTaskList, TimingWheel
from tests.helpers.timers import RecordingTask


def _wheel(start_ms: int = 0, tick_ms: int = 1, size: int = 20) -> tuple[TimingWheel, BucketQueue]:
    queue = BucketQueue()
    return TimingWheel(tick_ms, size, start_ms, queue), queue


def _entry(expiration_ms: int) -> TimerTaskEntry:
    return TimerTaskEntry(RecordingTask(0, ManualClock()), expiration_ms)


def test_current_time_is_rounded_down_to_a_tick() -> None:
    wheel, _ = _wheel(start_ms=1234, tick_ms=10)
    assert wheel.current_time == 1230
    wheel.advance_clock(1239)  # less than a tick further: no move
    assert wheel.current_time == 1230
    wheel.advance_clock(1257)
    assert wheel.current_time == 1250


def test_entry_before_current_time_plus_tick_is_expired() -> None:
    wheel, queue = _wheel(start_ms=100)
    assert wheel.add(_entry(100)) is False
    assert wheel.add(_entry(50)) is False
    assert wheel.add(_entry(101)) is True
    assert len(queue) == 1


def test_cancelled_entry_is_not_added() -> None:
    wheel, _ = _wheel()
    entry = _entry(10)
    entry.timer_task.cancel()
    assert entry.cancelled
    assert wheel.add(entry) is False


def test_bucket_expiration_and_queueing_only_on_change() -> None:
    wheel, queue = _wheel(tick_ms=5, size=10)  # interval 50
    first, second = _entry(12), _entry(14)  # same virtual id 2 -> bucket expiration 10
    assert wheel.add(first) and wheel.add(second)
    assert first.list is second.list
    assert first.list is not None and first.list.expiration == 10
    assert len(queue) == 1  # second add did not change the expiration: not queued again
    assert wheel.add(_entry(17))  # virtual id 3
    assert len(queue) == 2


def test_overflow_levels_follow_kafkas_example() -> None:
    # tick 1, size 20: levels of 20 ms, 400 ms, 8 s.
    wheel, _ = _wheel()
    near, mid, far = _entry(15), _entry(350), _entry(450)
    assert wheel.add(near) and wheel.add(mid) and wheel.add(far)
    levels = wheel.levels()
    assert [level.interval for level in levels] == [20, 400, 8000]
    assert [level.tick_ms for level in levels] == [1, 20, 400]
    assert levels[0].bucket_for(near) is not None
    mid_bucket, far_bucket = levels[1].bucket_for(mid), levels[2].bucket_for(far)
    assert mid_bucket is not None and mid_bucket.expiration == 340
    assert far_bucket is not None and far_bucket.expiration == 400


def test_overflow_wheel_starts_at_parent_current_time() -> None:
    wheel, _ = _wheel(start_ms=7)
    wheel.advance_clock(33)
    assert wheel.add(_entry(100))
    overflow = wheel.overflow_wheel
    assert overflow is not None
    assert overflow.start_ms == 33 and overflow.current_time == 20


def test_task_list_set_expiration_reports_change_and_flush_resets() -> None:
    counter = TaskCounter()
    bucket = TimerTaskList(counter)
    assert bucket.set_expiration(40) is True
    assert bucket.set_expiration(40) is False
    entries = [_entry(40), _entry(41)]
    for entry in entries:
        bucket.add(entry)
    assert counter.value == 2 and len(bucket) == 2
    bucket.remove(entries[0])
    assert counter.value == 1 and entries[0].list is None
    flushed = bucket.flush()
    assert flushed == [entries[1]]
    assert counter.value == 0 and bucket.expiration == -1 and entries[1].list is None
    assert bucket.set_expiration(40) is True


def test_new_entry_for_a_task_unlinks_the_old_one() -> None:
    counter = TaskCounter()
    a, b = TimerTaskList(counter), TimerTaskList(counter)
    task = RecordingTask(0, ManualClock())
    old = TimerTaskEntry(task, 5)
    a.add(old)
    new = TimerTaskEntry(task, 9)
    b.add(new)
    assert old.cancelled and not new.cancelled
    assert len(a) == 0 and len(b) == 1 and counter.value == 1
