"""Group coordinator benchmark: how long a consumer group takes to form and to heal,
measured with aiokafka from its own process.

* ``first record``: from ``consumer.start()`` to its first record, topic pre-filled,
  a fresh group each time. With ``group.initial.rebalance.delay.ms`` 0 and 3000: the
  delay (Kafka's InitialDelayedJoin) is paid by every brand-new group, on purpose.
* ``death -> reassigned``: three members on six partitions; one is frozen (heartbeat and
  fetch tasks cancelled, no LeaveGroup). From the freeze until the two survivors hold all
  six partitions in one new generation. Bounded below by ``session.timeout.ms`` (6000):
  the DelayedHeartbeat of the frozen member has to expire first.
* ``close -> reassigned``: the same, but the member closes cleanly (LeaveGroup), so the
  rebalance starts at once.
* ``rebalance N members``: N consumers on N partitions, all started at once; from the
  last ``start()`` issued until every member holds one partition in the same generation.
  The generation reached is printed too (each rebalance the storm causes adds one).

Each scenario gets its own broker subprocess (``python -m minikafka serve --port 0
--override group.initial.rebalance.delay.ms=N``), so broker and clients do not share an
interpreter. With ``--bootstrap`` it runs against an existing broker instead (then the
initial delay is whatever that broker has, and the table says so).

Figures depend on the machine: compare runs made side by side. This asserts nothing.

Run: ``.venv/bin/python -m bench.groups.group_bench`` (about two minutes; ``--quick`` for less)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from testkit.broker_process import BrokerProcess

ROOT = Path(__file__).resolve().parents[2]
POLL_S = 0.005  # how often the waits look at the consumers' state
SESSION_TIMEOUT_MS = 6000
HEARTBEAT_INTERVAL_MS = 300


@dataclass
class Figure:
    """One row: a scenario and its repetitions in milliseconds."""

    scenario: str
    delay_ms: str
    samples_ms: list[float] = field(default_factory=list)
    note: str = ""

    def cells(self) -> list[str]:
        s = self.samples_ms
        if not s:
            return [self.scenario, self.delay_ms, "0", "-", "-", "-", self.note]
        return [
            self.scenario,
            self.delay_ms,
            str(len(s)),
            f"{min(s):.0f}",
            f"{statistics.median(s):.0f}",
            f"{max(s):.0f}",
            self.note,
        ]


# ---------------------------------------------------------------------------- broker


@contextlib.asynccontextmanager
async def broker(args: argparse.Namespace, delay_ms: int) -> AsyncIterator[str]:
    if args.bootstrap:
        yield args.bootstrap
        return
    process = await asyncio.to_thread(
        BrokerProcess,
        ["--override", f"group.initial.rebalance.delay.ms={delay_ms}"],
        stderr=subprocess.DEVNULL,  # member-failure warnings are expected here
        log_level="WARNING",
    )
    try:
        yield process.bootstrap
    finally:
        await asyncio.to_thread(process.stop)


# --------------------------------------------------------------------------- helpers


async def create_topic(bootstrap: str, partitions: int) -> str:
    name = f"bench-{uuid.uuid4().hex[:8]}"
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
    finally:
        await admin.close()
    return name


async def fill(bootstrap: str, topic: str, partitions: int, per_partition: int) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    await producer.start()
    try:
        for p in range(partitions):
            for i in range(per_partition):
                await producer.send(topic, f"{p}-{i}".encode(), partition=p)
        await producer.flush()
    finally:
        await producer.stop()


def new_consumer(bootstrap: str, topic: str, group: str) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=SESSION_TIMEOUT_MS,
        heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
    )


def settled(consumers: list[AIOKafkaConsumer], partitions: int) -> bool:
    """Every consumer holds partitions, all in one generation, covering the topic once."""
    if any(c._coordinator is None for c in consumers):
        return False  # not started yet
    assigned = [c.assignment() for c in consumers]
    generations = {c._coordinator.generation for c in consumers}
    return (
        all(assigned)
        and len(generations) == 1
        and sum(len(a) for a in assigned) == partitions
        and len(set().union(*assigned)) == partitions
    )


def settles(
    consumers: list[AIOKafkaConsumer], partitions: int, after_generation: int = 0
) -> Callable[[], bool]:
    """The condition :func:`settled`, in a generation later than ``after_generation``."""

    def condition() -> bool:
        return (
            settled(consumers, partitions)
            and consumers[0]._coordinator.generation > after_generation
        )

    return condition


async def wait_until(condition: Callable[[], bool], timeout_s: float) -> float:
    """Poll ``condition``; return the monotonic time it first held."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return time.monotonic()
        await asyncio.sleep(POLL_S)
    raise TimeoutError(f"condition not met within {timeout_s}s")


async def stop_quietly(consumers: list[AIOKafkaConsumer]) -> None:
    async def one(c: AIOKafkaConsumer) -> None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(c.stop(), 15)

    await asyncio.gather(*(one(c) for c in consumers))


# ------------------------------------------------------------------------- scenarios


async def first_record(bootstrap: str, delay: str, reps: int) -> Figure:
    figure = Figure("start -> first record", delay, note="fresh group, 6 partitions filled")
    topic = await create_topic(bootstrap, 6)
    await fill(bootstrap, topic, 6, 100)
    for _ in range(reps):
        c = new_consumer(bootstrap, topic, f"first-{uuid.uuid4().hex[:8]}")
        t0 = time.monotonic()
        try:
            await c.start()
            await asyncio.wait_for(c.getone(), 60)
            figure.samples_ms.append((time.monotonic() - t0) * 1000)
        finally:
            await stop_quietly([c])
    return figure


async def member_gone(bootstrap: str, delay: str, reps: int, *, clean: bool) -> Figure:
    name = "close -> reassigned" if clean else "death -> reassigned"
    note = "LeaveGroup" if clean else f"no LeaveGroup, session {SESSION_TIMEOUT_MS} ms"
    figure = Figure(name, delay, note=note + "; 3 members, 6 partitions")
    topic = await create_topic(bootstrap, 6)
    for _ in range(reps):
        group = f"gone-{uuid.uuid4().hex[:8]}"
        members = [new_consumer(bootstrap, topic, group) for _ in range(3)]
        try:
            await asyncio.gather(*(c.start() for c in members))
            await wait_until(settles(members, 6), 60)
            leaving, survivors = members[0], members[1:]
            before = survivors[0]._coordinator.generation
            t0 = time.monotonic()
            if clean:
                await leaving.stop()
            else:
                # Freeze it: no more heartbeats or fetches, and no LeaveGroup.
                leaving._coordinator._heartbeat_task.cancel()
                leaving._fetcher._fetch_task.cancel()
            t1 = await wait_until(
                settles(survivors, 6, after_generation=before),
                SESSION_TIMEOUT_MS / 1000 + 60,
            )
            figure.samples_ms.append((t1 - t0) * 1000)
        finally:
            await stop_quietly(members)
    return figure


async def rebalance(bootstrap: str, delay: str, reps: int, size: int) -> Figure:
    figure = Figure(f"rebalance {size} members", delay)
    topic = await create_topic(bootstrap, size)
    generations: list[int] = []
    for _ in range(reps):
        group = f"storm-{uuid.uuid4().hex[:8]}"
        members = [new_consumer(bootstrap, topic, group) for _ in range(size)]
        starting: list[asyncio.Task[None]] = []
        try:
            starting = [asyncio.create_task(c.start()) for c in members]
            t0 = time.monotonic()  # the last start() has been issued
            t1 = await wait_until(settles(members, size), 120)
            figure.samples_ms.append((t1 - t0) * 1000)
            generations.append(members[0]._coordinator.generation)
            await asyncio.gather(*starting)
        finally:
            for task in starting:
                task.cancel()
            await stop_quietly(members)
    figure.note = f"{size} partitions; generation reached: {generations}"
    return figure


# ------------------------------------------------------------------------------- run


async def run(args: argparse.Namespace) -> list[Figure]:
    reps = 1 if args.quick else args.reps
    figures: list[Figure] = []
    label = "as set" if args.bootstrap else None
    for delay in (0, 3000):
        async with broker(args, delay) as bootstrap:
            figures.append(await first_record(bootstrap, label or str(delay), reps))
            print(f"done: first record, delay {delay}", file=sys.stderr)
    async with broker(args, 0) as bootstrap:
        d = label or "0"
        figures.append(await member_gone(bootstrap, d, 1 if args.quick else 2, clean=False))
        print("done: death", file=sys.stderr)
        figures.append(await member_gone(bootstrap, d, reps, clean=True))
        print("done: close", file=sys.stderr)
        for size in (10, 50):
            figures.append(await rebalance(bootstrap, d, reps, size))
            print(f"done: rebalance {size}", file=sys.stderr)
    return figures


def print_table(figures: list[Figure], target: str) -> None:
    header = ["scenario", "initial delay ms", "reps", "min ms", "median ms", "max ms", "notes"]
    rows = [header, *(f.cells() for f in figures)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    print(f"group benchmark against {target}")
    for i, row in enumerate(rows):
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths))


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--bootstrap", help="an existing broker (default: start minikafka)")
    p.add_argument("--reps", type=int, default=3, help="repetitions per scenario (3)")
    p.add_argument("--quick", action="store_true", help="one repetition of everything")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    figures = asyncio.run(run(args))
    print_table(figures, args.bootstrap or "minikafka subprocesses")


if __name__ == "__main__":
    main()
