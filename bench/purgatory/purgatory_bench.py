"""Purgatory benchmark: a port of Kafka's TestPurgatoryPerformance, three timers.

Workload (as Kafka's tool): requests arrive as a Poisson process at ``--rate``; each one
is a delayed operation with timeout ``--timeout`` ms, watched on ``--keys`` keys drawn
from ``--key-space-size``; its time to completion is drawn from a log-normal
distribution fitted to ``--pct50`` and ``--pct75`` (ms). A request whose draw is below
the timeout is completed at that time; the others expire.

Differences from Kafka's tool, on purpose:

* Each request draws its own keys (Kafka's tool uses the same keys for all requests).
* Completion happens the way the broker does it: at the drawn time the driver calls
  ``check_and_complete`` on the request's keys (``--completion force`` calls
  ``force_complete`` on the request instead, as Kafka's tool does).
* Everything runs on one asyncio loop (uvloop when installed; ``--no-uvloop``).
* Defaults are smaller: ``--num 100000 --rate 10000`` (Kafka's tool has no defaults
  for these; its published runs used 1M requests).

The same workload (same seed: same arrivals, latencies and keys) runs against:

1. ``wheel``: our timing-wheel purgatory (SystemTimer + ExpirationReaper +
   DelayedOperationPurgatory);
2. ``heap``: a heap-based purgatory after Kafka's pre-0.9 RequestPurgatory: a delay
   queue (heapq) of operations and a reaper popping expired ones; completed operations
   stay in the heap and the watch lists until a periodic purge (0.8.2's rule: purge
   when more than ``purge_interval`` entries are satisfied);
3. ``call_later``: our purgatory's watch lists with one ``loop.call_later`` handle per
   operation, cancelled on completion.

Each implementation runs in its own subprocess (clean heap, GC and peak RSS), and the
driver code is the same for all three. ``--micro`` measures the bare timers instead.

Run: ``.venv/bin/python -m bench.purgatory.purgatory_bench --num 100000 --rate 20000``
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import heapq
import itertools
import json
import math
import random
import resource
import subprocess
import sys
import time
import tracemalloc
from array import array
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from bench.lib.rss import rss_mb
from bench.lib.stats import percentile
from purgatory import (
    DelayedOperation,
    DelayedOperationPurgatory,
    ExpirationReaper,
    LoopClock,
    SystemTimer,
    TimerTask,
)

IMPLS = ("wheel", "heap", "call_later")
Z75 = 0.6744897501960817  # 75th percentile of N(0, 1)
_MIN_SLEEP = 0.001


# ----------------------------------------------------------------------------------
# workload


@dataclass
class Workload:
    arrivals: array[float]  # seconds from start, cumulative
    latencies: array[int]  # ms to completion
    keys: array[int]  # num * keys_per_op key indexes
    keys_per_op: int
    key_names: list[str]

    @property
    def num(self) -> int:
        return len(self.arrivals)


def make_workload(args: argparse.Namespace) -> Workload:
    rng = random.Random(args.seed)
    mu = math.log(args.pct50)
    sigma = (math.log(args.pct75) - mu) / Z75
    lam = args.rate  # per second
    arrivals = array("d")
    latencies = array("l")
    keys = array("l")
    t = 0.0
    population = range(args.key_space_size)
    k = min(args.keys, args.key_space_size)
    for _ in range(args.num):
        t += rng.expovariate(lam)
        arrivals.append(t)
        latencies.append(int(math.exp(rng.gauss(mu, sigma))))
        keys.extend(rng.sample(population, k))
    return Workload(arrivals, latencies, keys, k, [f"fakeKey{i}" for i in population])


# ----------------------------------------------------------------------------------
# shared op bookkeeping


class Stats:
    __slots__ = ("done", "expired", "finished", "num")

    def __init__(self, num: int) -> None:
        self.num = num
        self.finished = 0
        self.expired = 0
        self.done: asyncio.Future[None] | None = None

    def on_complete(self) -> None:
        self.finished += 1
        if self.finished == self.num and self.done is not None and not self.done.done():
            self.done.set_result(None)


_now: Callable[[], float] = time.monotonic  # replaced by loop.time for a run


class Impl(Protocol):
    def make_op(
        self, timeout_ms: int, completes_at: float, keys: tuple[str, ...], stats: Stats
    ) -> Any: ...

    def try_complete_else_watch(self, op: Any, keys: Iterable[Hashable]) -> bool: ...

    def check_and_complete(self, key: Hashable) -> int: ...

    async def stop(self) -> None: ...

    def extra(self) -> dict[str, Any]: ...


# -- 1. the timing wheel ------------------------------------------------------------


class WheelOp(DelayedOperation):
    __slots__ = ("completes_at", "keys", "stats")

    def __init__(
        self, timeout_ms: int, completes_at: float, keys: tuple[str, ...], stats: Stats
    ) -> None:
        super().__init__(timeout_ms)
        self.completes_at = completes_at
        self.keys = keys
        self.stats = stats

    def try_complete(self) -> bool:
        if _now() >= self.completes_at:
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        self.stats.on_complete()

    def on_expiration(self) -> None:
        self.stats.expired += 1


class WheelImpl:
    op_class: type[WheelOp] = WheelOp

    def __init__(self, loop: asyncio.AbstractEventLoop, purge_interval: int) -> None:
        self.timer = SystemTimer(LoopClock(loop.time), name="bench")
        self.reaper = ExpirationReaper(self.timer)
        self.reaper.start()
        self.purgatory: DelayedOperationPurgatory[WheelOp] = DelayedOperationPurgatory(
            "bench", self.timer, purge_interval
        )
        self.try_complete_else_watch = self.purgatory.try_complete_else_watch
        self.check_and_complete = self.purgatory.check_and_complete

    def make_op(
        self, timeout_ms: int, completes_at: float, keys: tuple[str, ...], stats: Stats
    ) -> WheelOp:
        return self.op_class(timeout_ms, completes_at, keys, stats)

    async def stop(self) -> None:
        await self.reaper.stop()

    def extra(self) -> dict[str, Any]:
        return {
            "watched_at_end": self.purgatory.watched(),
            "purged": self.purgatory.purged_count,
        }


# -- 3. one call_later per operation --------------------------------------------------


class CallLaterOp(WheelOp):
    __slots__ = ("handle", "timer")

    def __init__(
        self, timeout_ms: int, completes_at: float, keys: tuple[str, ...], stats: Stats
    ) -> None:
        super().__init__(timeout_ms, completes_at, keys, stats)
        self.handle: asyncio.TimerHandle | None = None
        self.timer: CallLaterTimer | None = None

    def cancel(self) -> None:
        handle = self.handle
        if handle is not None:
            self.handle = None
            handle.cancel()
            assert self.timer is not None
            self.timer.count -= 1

    def expire(self) -> None:
        self.handle = None
        assert self.timer is not None
        self.timer.count -= 1
        self.run()


class CallLaterTimer:
    """Duck-types the purgatory's timer (add, size) with loop.call_later."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.count = 0

    def add(self, task: TimerTask) -> None:
        assert isinstance(task, CallLaterOp)
        task.timer = self
        task.handle = self.loop.call_later(task.delay_ms / 1000.0, task.expire)
        self.count += 1

    def size(self) -> int:
        return self.count


class CallLaterImpl(WheelImpl):
    op_class = CallLaterOp

    def __init__(self, loop: asyncio.AbstractEventLoop, purge_interval: int) -> None:
        self.timer_cl = CallLaterTimer(loop)
        self.purgatory = DelayedOperationPurgatory("bench", self.timer_cl, purge_interval)
        self.try_complete_else_watch = self.purgatory.try_complete_else_watch
        self.check_and_complete = self.purgatory.check_and_complete

    async def stop(self) -> None:
        pass


# -- 2. pre-0.9 RequestPurgatory: a heap of operations ----------------------------------


class HeapOp:
    __slots__ = ("completed", "completes_at", "deadline", "keys", "purgatory", "stats")

    def __init__(
        self, timeout_ms: int, completes_at: float, keys: tuple[str, ...], stats: Stats
    ) -> None:
        self.completed = False
        self.completes_at = completes_at
        self.deadline = _now() + timeout_ms / 1000.0
        self.keys = keys
        self.stats = stats
        self.purgatory: HeapPurgatory | None = None

    def try_complete(self) -> bool:
        if _now() >= self.completes_at:
            return self.force_complete()
        return False

    def force_complete(self) -> bool:
        if self.completed:
            return False
        self.completed = True
        purgatory = self.purgatory
        if purgatory is not None:
            purgatory.unsatisfied -= 1
        self.stats.on_complete()
        return True


class HeapPurgatory:
    """Watch lists + a delay queue of operations; completed ones linger until purged."""

    def __init__(self, loop: asyncio.AbstractEventLoop, purge_interval: int) -> None:
        self.loop = loop
        self.purge_interval = purge_interval
        self.watchers: dict[Hashable, list[HeapOp]] = {}
        self.delayed: list[tuple[float, int, HeapOp]] = []
        self.seq = itertools.count()
        self.unsatisfied = 0
        self.enqueued_since_check = 0
        self.purged = 0
        self.peak_heap = 0
        self.waiter: asyncio.Future[None] | None = None
        self.handle: asyncio.TimerHandle | None = None
        self.armed_at: float | None = None
        self.task = loop.create_task(self.reaper())

    def make_op(
        self, timeout_ms: int, completes_at: float, keys: tuple[str, ...], stats: Stats
    ) -> HeapOp:
        return HeapOp(timeout_ms, completes_at, keys, stats)

    def try_complete_else_watch(self, op: HeapOp, keys: Iterable[Hashable]) -> bool:
        if op.try_complete():
            return True
        watchers = self.watchers
        for key in keys:
            lst = watchers.get(key)
            if lst is None:
                lst = watchers[key] = []
            lst.append(op)
        if op.try_complete():
            return True
        op.purgatory = self
        self.unsatisfied += 1
        delayed = self.delayed
        earlier = not delayed or op.deadline < delayed[0][0]
        heapq.heappush(delayed, (op.deadline, next(self.seq), op))
        if len(delayed) > self.peak_heap:
            self.peak_heap = len(delayed)
        if earlier and (self.armed_at is None or op.deadline < self.armed_at):
            self.arm()
        self.enqueued_since_check += 1
        if self.enqueued_since_check >= self.purge_interval:
            self.enqueued_since_check = 0
            self.maybe_purge()
        return False

    def check_and_complete(self, key: Hashable) -> int:
        lst = self.watchers.get(key)
        if lst is None:
            return 0
        completed = 0
        keep: list[HeapOp] = []
        for op in tuple(lst):
            if op.completed:
                continue
            if op.try_complete():
                completed += 1
            else:
                keep.append(op)
        if keep:
            self.watchers[key] = keep
        else:
            del self.watchers[key]
        return completed

    def maybe_purge(self) -> None:
        # 0.8.2: purge the delay queue, and the watch lists, once more than
        # purge_interval of their entries are satisfied.
        if len(self.delayed) - self.unsatisfied > self.purge_interval:
            kept = [item for item in self.delayed if not item[2].completed]
            self.purged += len(self.delayed) - len(kept)
            heapq.heapify(kept)
            self.delayed = kept
        watched = sum(len(lst) for lst in self.watchers.values())
        if watched - self.unsatisfied > self.purge_interval:
            for key, lst in list(self.watchers.items()):
                kept_ops = [op for op in lst if not op.completed]
                if kept_ops:
                    self.watchers[key] = kept_ops
                else:
                    del self.watchers[key]

    def arm(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None
        if not self.delayed:
            self.armed_at = None
            return
        deadline = self.delayed[0][0]
        self.armed_at = deadline
        self.handle = self.loop.call_at(deadline, self.wake)

    def wake(self) -> None:
        self.handle = None
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    async def reaper(self) -> None:
        while True:
            now = self.loop.time()
            delayed = self.delayed
            while delayed and delayed[0][0] <= now:
                op = heapq.heappop(delayed)[2]
                if op.force_complete():
                    op.stats.expired += 1
            self.maybe_purge()
            self.waiter = self.loop.create_future()
            self.arm()
            await self.waiter

    async def stop(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task

    def extra(self) -> dict[str, Any]:
        return {"peak_heap": self.peak_heap, "purged": self.purged}


# ----------------------------------------------------------------------------------
# the driver: identical for every implementation


async def drive(impl_name: str, wl: Workload, args: argparse.Namespace) -> dict[str, Any]:
    global _now
    loop = asyncio.get_running_loop()
    _now = loop.time
    now_fn = loop.time
    impl: Impl
    if impl_name == "wheel":
        impl = WheelImpl(loop, args.purge_interval)
    elif impl_name == "heap":
        impl = HeapPurgatory(loop, args.purge_interval)
    else:
        impl = CallLaterImpl(loop, args.purge_interval)
    n = wl.num
    stats = Stats(n)
    stats.done = loop.create_future()
    timeout_ms = args.timeout
    arrivals, latencies, key_idx, kpo, names = (
        wl.arrivals,
        wl.latencies,
        wl.keys,
        wl.keys_per_op,
        wl.key_names,
    )
    force = args.completion == "force"
    make_op = impl.make_op
    watch = impl.try_complete_else_watch
    check = impl.check_and_complete
    comp: list[tuple[float, int, Any]] = []
    heappush, heappop = heapq.heappush, heapq.heappop
    batch = args.batch

    def complete_due(now: float) -> None:
        while comp and comp[0][0] <= now:
            op = heappop(comp)[2]
            if force:
                op.force_complete()
            else:
                for key in op.keys:
                    check(key)

    gc.collect()
    rss0 = int((rss_mb() or 0.0) * 1024)
    cpu0 = time.process_time()
    start = now_fn()
    i = 0
    while i < n:
        now = now_fn()
        complete_due(now)
        k = 0
        while i < n and k < batch and start + arrivals[i] <= now:
            latency = latencies[i]
            base = i * kpo
            keys = tuple(names[j] for j in key_idx[base : base + kpo])
            op: Any = make_op(timeout_ms, now + latency / 1000.0, keys, stats)
            if latency < timeout_ms:
                heappush(comp, (now + latency / 1000.0, i, op))
            watch(op, keys)
            i += 1
            k += 1
        if i >= n:
            break
        nxt = start + arrivals[i]
        if comp and comp[0][0] < nxt:
            nxt = comp[0][0]
        # Sleep in whole milliseconds, as Kafka's generator does: a sub-ms sleep on
        # uvloop rounds to 0 and the driver would spin, burying the timers' cost.
        delay = nxt - now_fn()
        await asyncio.sleep(_MIN_SLEEP if 0 < delay < _MIN_SLEEP else max(delay, 0))
    end_enqueue = now_fn()
    while comp:
        complete_due(now_fn())
        if comp:
            delay = comp[0][0] - now_fn()
            await asyncio.sleep(_MIN_SLEEP if 0 < delay < _MIN_SLEEP else max(delay, 0))
    await stats.done
    done = now_fn()
    cpu = time.process_time() - cpu0
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    extra = impl.extra()
    await impl.stop()
    return {
        "impl": impl_name,
        "num": n,
        "target_rate": n / arrivals[-1],
        "actual_rate": n / (end_enqueue - start),
        "elapsed_ms": (done - start) * 1000.0,
        "cpu_ms": cpu * 1000.0,
        "peak_rss_mb": peak_kb / 1024.0,
        "rss_growth_mb": max(0, peak_kb - rss0) / 1024.0,
        "completed": stats.finished - stats.expired,
        "expired": stats.expired,
        **extra,
    }


def new_loop(use_uvloop: bool) -> asyncio.AbstractEventLoop:
    if use_uvloop:
        try:
            import uvloop

            return uvloop.new_event_loop()
        except ImportError:
            pass
    return asyncio.new_event_loop()


def run_one(args: argparse.Namespace) -> dict[str, Any]:
    wl = make_workload(args)
    loop = new_loop(not args.no_uvloop)
    try:
        result = loop.run_until_complete(drive(args.impl, wl, args))
    finally:
        loop.close()
    result["loop"] = type(loop).__module__.split(".")[0]
    return result


def _without_option(argv: list[str], name: str) -> list[str]:
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == name:
            skip = True
        elif not arg.startswith(name + "="):
            out.append(arg)
    return out


def run_all(args: argparse.Namespace, argv: list[str]) -> None:
    impls = IMPLS if args.impl == "all" else (args.impl,)
    wl = make_workload(args)
    lat = sorted(wl.latencies)
    print(
        f"# workload: num={args.num} rate={args.rate}/s timeout={args.timeout}ms "
        f"pct50={args.pct50} pct75={args.pct75} keys={args.keys}/{args.key_space_size} "
        f"completion={args.completion} seed={args.seed}"
    )
    print(
        f"# latency samples: p50={percentile(lat, 50)} p75={percentile(lat, 75)} "
        f"max={lat[-1]} ms; below timeout: "
        f"{sum(1 for x in wl.latencies if x < args.timeout)}"
    )
    del wl, lat
    results: dict[str, dict[str, Any]] = {}
    for impl in impls:
        child = _without_option(argv, "--impl")
        cmd = [sys.executable, "-m", "bench.purgatory.purgatory_bench", *child]
        cmd += ["--impl", impl, "--child"]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        results[impl] = json.loads(out.strip().splitlines()[-1])
    cols = [
        ("target_rate", "target/s", "{:.0f}"),
        ("actual_rate", "actual/s", "{:.0f}"),
        ("elapsed_ms", "elapsed ms", "{:.0f}"),
        ("cpu_ms", "cpu ms", "{:.0f}"),
        ("peak_rss_mb", "peak RSS MB", "{:.1f}"),
        ("rss_growth_mb", "RSS growth MB", "{:.1f}"),
        ("completed", "completed", "{}"),
        ("expired", "expired", "{}"),
    ]
    loop_name = next(iter(results.values()))["loop"]
    print(f"# loop: {loop_name}")
    print("impl        " + "".join(f"{title:>15}" for _, title, _ in cols))
    for impl, r in results.items():
        print(f"{impl:<12}" + "".join(f"{fmt.format(r[key]):>15}" for key, _, fmt in cols))
    if "wheel" in results and len(results) > 1:
        w = results["wheel"]
        for other in results:
            if other == "wheel":
                continue
            o = results[other]
            print(
                f"# {other}/wheel: cpu x{o['cpu_ms'] / w['cpu_ms']:.2f}, "
                f"actual rate x{o['actual_rate'] / w['actual_rate']:.2f}, "
                f"RSS growth x{(o['rss_growth_mb'] or 0.01) / (w['rss_growth_mb'] or 0.01):.2f}"
            )
    for impl, r in results.items():
        extra = {k: v for k, v in r.items() if k in ("peak_heap", "purged", "watched_at_end")}
        if extra:
            print(f"# {impl}: {extra}")


# ----------------------------------------------------------------------------------
# --micro: the bare timers


class MicroTask(TimerTask):
    __slots__ = ("counter",)

    def __init__(self, delay_ms: int, counter: list[int]) -> None:
        super().__init__(delay_ms)
        self.counter = counter

    def run(self) -> None:
        self.counter[0] += 1


class HeapTimer:
    """The pre-0.9 delay queue alone: heapq of (deadline, seq, task), lazy cancel."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.heap: list[tuple[float, int, MicroTask]] = []
        self.seq = itertools.count()
        self.cancelled: set[int] = set()

    def add(self, task: MicroTask) -> None:
        heapq.heappush(self.heap, (self.loop.time() + task.delay_ms / 1000.0, next(self.seq), task))

    def cancel(self, task: MicroTask) -> None:
        # pre-0.9: mark satisfied; the entry stays in the queue until it is due
        task.delay_ms = -1

    async def reap_until(self, counter: list[int], target: int) -> None:
        heap = self.heap
        while counter[0] < target:
            now = self.loop.time()
            while heap and heap[0][0] <= now:
                task = heapq.heappop(heap)[2]
                if task.delay_ms >= 0:
                    task.run()
            if counter[0] >= target:
                break
            delay = heap[0][0] - self.loop.time() if heap else _MIN_SLEEP
            await asyncio.sleep(_MIN_SLEEP if 0 < delay < _MIN_SLEEP else max(delay, 0))


def micro_one(
    impl: str, n: int, ops: int, rng: random.Random, use_uvloop: bool
) -> tuple[float, float, float]:
    """(add+cancel us/op, add+expire us/op, bytes per outstanding timer) for one timer."""
    gc.collect()
    loop = new_loop(use_uvloop)
    asyncio.set_event_loop(loop)
    counter = [0]
    far = 3_600_000  # the outstanding timers never fire during the measurement
    wheel_timer = SystemTimer(LoopClock(loop.time))
    heap_timer = HeapTimer(loop)
    # memory per outstanding timer (tracemalloc; the task object included)
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    keep: list[Any] = []
    for _ in range(n):
        task = MicroTask(far + rng.randrange(1000), counter)
        if impl == "wheel":
            wheel_timer.add(task)
            keep.append(task)
        elif impl == "heap":
            heap_timer.add(task)
            keep.append(task)
        else:
            keep.append(loop.call_later(task.delay_ms / 1000.0, task.run))
    per_timer = (tracemalloc.get_traced_memory()[0] - base - sys.getsizeof(keep)) / n
    tracemalloc.stop()

    delays = [1 + rng.randrange(999) for _ in range(ops)]
    cpu0 = time.process_time()
    if impl == "wheel":
        add = wheel_timer.add
        for d in delays:
            task = MicroTask(d, counter)
            add(task)
            task.cancel()
    elif impl == "heap":
        add_h, cancel_h = heap_timer.add, heap_timer.cancel
        for d in delays:
            task = MicroTask(d, counter)
            add_h(task)
            cancel_h(task)
    else:
        call_later = loop.call_later
        for d in delays:
            task = MicroTask(d, counter)
            call_later(d / 1000.0, task.run).cancel()
    add_cancel = (time.process_time() - cpu0) / ops * 1e6

    short = [1 + rng.randrange(50) for _ in range(ops)]  # 1..50 ms, all expire

    async def expire_all() -> None:
        if impl == "wheel":
            reaper = ExpirationReaper(wheel_timer)
            reaper.start()
            for d in short:
                wheel_timer.add(MicroTask(d, counter))
            while counter[0] < ops:
                await asyncio.sleep(0.01)
            await reaper.stop()
        elif impl == "heap":
            for d in short:
                heap_timer.add(MicroTask(d, counter))
            await heap_timer.reap_until(counter, ops)
        else:
            for d in short:
                loop.call_later(d / 1000.0, MicroTask(d, counter).run)
            while counter[0] < ops:
                await asyncio.sleep(0.01)

    counter[0] = 0
    cpu0 = time.process_time()
    loop.run_until_complete(expire_all())
    add_expire = (time.process_time() - cpu0) / ops * 1e6
    del keep
    loop.close()
    asyncio.set_event_loop(None)
    return add_cancel, add_expire, per_timer


def micro(args: argparse.Namespace) -> None:
    sizes = [int(x) for x in args.micro_sizes.split(",")]
    rng = random.Random(args.seed)
    loop_name = "asyncio" if args.no_uvloop else "uvloop"
    print(f"# micro: {args.micro_ops} ops per measurement, CPU time; loop={loop_name}")
    print(
        f"{'outstanding':>12} {'impl':<11} {'add+cancel us/op':>17} "
        f"{'add+expire us/op':>17} {'bytes/timer':>12}"
    )
    for n in sizes:
        for impl in IMPLS:
            add_cancel, add_expire, per_timer = micro_one(
                impl, n, args.micro_ops, rng, not args.no_uvloop
            )
            print(f"{n:>12} {impl:<11} {add_cancel:>17.2f} {add_expire:>17.2f} {per_timer:>12.0f}")
            sys.stdout.flush()


# ----------------------------------------------------------------------------------


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--num", type=int, default=100_000, help="number of requests")
    p.add_argument("--rate", type=float, default=10_000, help="target requests per second")
    p.add_argument("--pct50", type=float, default=20.0, help="median completion time, ms")
    p.add_argument("--pct75", type=float, default=60.0, help="75th pct completion time, ms")
    p.add_argument("--timeout", type=int, default=200, help="request timeout, ms")
    p.add_argument("--keys", type=int, default=3, help="keys watched per request")
    p.add_argument("--key-space-size", type=int, default=100, help="possible keys")
    p.add_argument("--size", type=int, default=0, help="ignored (Kafka's request size)")
    p.add_argument("--purge-interval", type=int, default=1000)
    p.add_argument("--completion", choices=("check", "force"), default="check")
    p.add_argument("--batch", type=int, default=1000, help="max arrivals per loop turn")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--impl", choices=(*IMPLS, "all"), default="all")
    p.add_argument("--no-uvloop", action="store_true")
    p.add_argument("--micro", action="store_true", help="bare-timer micro-benchmark")
    p.add_argument("--micro-sizes", default="10000,100000,1000000")
    p.add_argument("--micro-ops", type=int, default=100_000)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.micro:
        micro(args)
    elif args.child:
        print(json.dumps(run_one(args)))
    else:
        run_all(args, argv)


if __name__ == "__main__":
    main()
