"""Share-group acquisition locks on the timing wheel (KIP-932): cost, lateness, memory.

The issue's workload: 100,000 in-flight acquired records with locks, most acknowledged
before their lock expires. ``SharePartition`` gives one acquisition lock (a
``TimerTask`` on a ``SystemTimer``) per run of offsets acquired together; an
acknowledgement that leaves nothing of a run held cancels it (O(1) unlink from its
bucket); an expiry releases what is still held.

Three figures:

1. ``cost``: on a ManualClock, ``--records`` records over ``--partitions`` share
   partitions acquired ``--run`` at a time (one lock per run) and all ACCEPTed:
   microseconds per record for acquire + acknowledge, and for the bare timer work
   (lock add + cancel) alone.
2. ``memory``: tracemalloc's bytes per in-flight acquired record (the per-offset state,
   its share of the lock and of the wheel's entry), all records held.
3. ``lateness``: on the event loop with the real reaper (LoopClock), the records are
   acquired with ``--lock-ms`` locks, ``--ack-fraction`` of them acknowledged before
   expiry (at random times in the lock's first half); for the rest, how late each
   lock's expiry ran after its deadline (p50/p99/max, ms).

Run: ``.venv/bin/python -m bench.purgatory.share_lock_bench [--records 100000] [--run 1]``
(figures only; never a pass/fail).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time
import tracemalloc
from typing import Any

from bench.lib.stats import percentile
from broker.share.share_partition import (
    AcknowledgementBatch,
    AcquisitionLockTimerTask,
    SharePartition,
    SharePartitionConfig,
    WriteDone,
)
from broker.share_coordinator.share_state_records import PersisterStateBatch
from purgatory import ExpirationReaper, LoopClock, ManualClock, SystemTimer

ACCEPT = 1


# --with-writes: each share partition hands its durable-state writes (the batches the
# share coordinator would get) to a sink, as on a broker; without, no persister.
WRITES: list[int] | None = None


def _sink(_start: int, batches: tuple[PersisterStateBatch, ...], done: WriteDone | None) -> None:
    if WRITES is not None:
        WRITES.append(len(batches))
    if done is not None:
        done(True)  # the share coordinator's answer: written


def _partitions(n: int, per: int, timer: SystemTimer, lock_ms: int) -> list[SharePartition]:
    config = SharePartitionConfig(lock_ms, 5, per)
    on_write = _sink if WRITES is not None else None
    return [SharePartition("g", "t", p, 0, config, timer, on_write=on_write) for p in range(n)]


def bench_cost(records: int, partitions: int, run: int) -> dict[str, float]:
    per = records // partitions
    clock = ManualClock()
    timer = SystemTimer(clock)
    sps = _partitions(partitions, per, timer, 30_000)
    start = time.perf_counter()
    for sp in sps:
        for first in range(0, per, run):
            sp.acquire("m", [(first, min(first + run, per) - 1)], run)
    acquired = time.perf_counter()
    for sp in sps:
        for first in range(0, per, run):
            sp.acknowledge("m", [AcknowledgementBatch(first, min(first + run, per) - 1, (ACCEPT,))])
    acked = time.perf_counter()
    assert timer.size() == 0 and all(sp.start_offset == per for sp in sps)
    # the bare timer work: one lock per run, added then cancelled
    locks = [AcquisitionLockTimerTask(sps[0], "m", 0, 0, 30_000) for _ in range(records // run)]
    t0 = time.perf_counter()
    for lock in locks:
        timer.add(lock)
    t1 = time.perf_counter()
    for lock in locks:
        lock.cancel()
    t2 = time.perf_counter()
    return {
        "acquire_us_per_record": (acquired - start) / records * 1e6,
        "acknowledge_us_per_record": (acked - acquired) / records * 1e6,
        "lock_add_us": (t1 - t0) / len(locks) * 1e6,
        "lock_cancel_us": (t2 - t1) / len(locks) * 1e6,
    }


def bench_memory(records: int, partitions: int, run: int) -> float:
    per = records // partitions
    timer = SystemTimer(ManualClock())
    sps = _partitions(partitions, per, timer, 30_000)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for sp in sps:
        for first in range(0, per, run):
            sp.acquire("m", [(first, min(first + run, per) - 1)], run)
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert sum(sp.acquired_count for sp in sps) == per * partitions
    return (after - before) / (per * partitions)


async def bench_lateness(
    records: int, partitions: int, run: int, lock_ms: int, ack_fraction: float, seed: int
) -> dict[str, float]:
    loop = asyncio.get_running_loop()
    clock = LoopClock(loop.time)
    timer = SystemTimer(clock)
    reaper = ExpirationReaper(timer, name="share-group-lock-timeout")
    per = records // partitions
    sps = _partitions(partitions, per, timer, lock_ms)
    deadlines: dict[int, float] = {}
    lateness: list[float] = []
    original = SharePartition._on_lock_expired

    def timed(self: SharePartition, lock: AcquisitionLockTimerTask) -> None:
        lateness.append(loop.time() * 1000 - deadlines[id(lock)])
        original(self, lock)

    SharePartition._on_lock_expired = timed  # type: ignore[method-assign]
    rng = random.Random(seed)
    reaper.start()
    try:
        acks: list[tuple[float, SharePartition, int]] = []
        for sp in sps:
            for first in range(0, per, run):
                sp.acquire("m", [(first, min(first + run, per) - 1)], run)
                if rng.random() < ack_fraction:
                    acks.append((rng.uniform(0, lock_ms * 0.5), sp, first))
            for record in sp._in_flight.values():
                lock = record.lock
                if lock is not None and id(lock) not in deadlines:
                    deadlines[id(lock)] = float(lock.deadline_ms or 0)
        acks.sort(key=lambda a: a[0])
        t0 = loop.time() * 1000
        for at, sp, first in acks:
            delay = t0 + at - loop.time() * 1000
            if delay > 0:
                await asyncio.sleep(delay / 1000)
            sp.acknowledge("m", [AcknowledgementBatch(first, min(first + run, per) - 1, (ACCEPT,))])
        expected = len(deadlines) - len(acks)
        while len(lateness) < expected:
            await asyncio.sleep(0.05)
    finally:
        await reaper.stop()
        SharePartition._on_lock_expired = original  # type: ignore[method-assign]
    lateness.sort()
    return {
        "locks": float(len(deadlines)),
        "expired": float(len(lateness)),
        "p50_ms": statistics.median(lateness) if lateness else 0.0,
        "p99_ms": percentile(lateness, 99) or 0.0,
        "max_ms": lateness[-1] if lateness else 0.0,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--run", type=int, default=1, help="records per lock")
    parser.add_argument("--lock-ms", type=int, default=10_000)
    parser.add_argument("--ack-fraction", type=float, default=0.9)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--with-writes", action="store_true", help="share partitions write durable state"
    )
    args = parser.parse_args(argv)
    global WRITES
    WRITES = [] if args.with_writes else None
    cost = bench_cost(args.records, args.partitions, args.run)
    memory = bench_memory(args.records, args.partitions, args.run)
    late: dict[str, Any] = asyncio.run(
        bench_lateness(
            args.records, args.partitions, args.run, args.lock_ms, args.ack_fraction, args.seed
        )
    )
    print(
        f"records={args.records} partitions={args.partitions} records/lock={args.run}"
        f" with_writes={args.with_writes}"
    )
    print(
        "cost: acquire {acquire_us_per_record:.2f} us/record, acknowledge "
        "{acknowledge_us_per_record:.2f} us/record; lock add {lock_add_us:.2f} us, "
        "cancel {lock_cancel_us:.2f} us".format(**cost)
    )
    print(f"memory: {memory:.0f} bytes per in-flight acquired record")
    print(
        "expiry lateness ({expired:.0f} of {locks:.0f} locks expired, lock {lock} ms): "
        "p50 {p50_ms:.2f} ms, p99 {p99_ms:.2f} ms, max {max_ms:.2f} ms".format(
            lock=args.lock_ms, **late
        )
    )


if __name__ == "__main__":
    main()
