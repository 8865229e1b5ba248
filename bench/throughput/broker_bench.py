"""Broker benchmark: produce, consume and end-to-end latency, measured with aiokafka.

What a user of the broker feels, from a real client in its own process:

* ``produce sync``: one ``send_and_wait`` per message (a round trip each), acks 1 and all;
  per-message latency percentiles come with it.
* ``produce batched``: ``send`` without waiting, ``linger_ms`` batching, then ``flush``;
  acks 1 and all.
* ``consume``: read back the batched topic from the beginning: messages/s and MB/s.
* ``end-to-end``: ping-pong of one message at a time: the producer sends, a consumer
  long-polling with ``fetch_min_bytes=1`` and ``fetch_max_wait_ms=500`` receives; the
  time from send to receipt, p50/p99. This is the DelayedFetch path: each fetch is
  parked in the Fetch purgatory and completed by the append.

By default a minikafka broker is started as a subprocess (``python -m minikafka serve
--port 0``), so that broker and client do not share an interpreter or a GIL. With
``--bootstrap HOST:PORT`` the same run goes against any Kafka-compatible broker, so two
brokers can be compared figure by figure. With ``--profile FILE`` the broker subprocess
runs under cProfile; when the run ends it is stopped with SIGTERM, the profile is written
to FILE and the top functions by cumulative time are printed.

Topics are created fresh for each run (one partition, replication factor 1) with the
admin client, so a real Kafka with auto-creation disabled works too.

Figures depend on the machine and on what else runs on it: compare runs made side by
side, never against a number written down elsewhere. This script asserts nothing.

Run: ``.venv/bin/python -m bench.throughput.broker_bench --messages 20000 --size 100``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import pstats
import statistics
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from bench.lib.stats import percentile
from bench.lib.tables import table_lines
from testkit.broker_process import BrokerProcess

ROOT = Path(__file__).resolve().parents[2]
# end-to-end round trips not measured: the first ones pay for the consumer's fetch that
# was already in flight from before the seek, and for connection setup
E2E_WARMUP = 20


@dataclass
class Figure:
    """One line of the result table."""

    name: str
    messages: int
    seconds: float
    bytes: int
    latencies_ms: list[float] = field(default_factory=list, repr=False)

    @property
    def msgs_per_s(self) -> float:
        return self.messages / self.seconds if self.seconds > 0 else 0.0

    @property
    def mb_per_s(self) -> float:
        return self.bytes / self.seconds / 1e6 if self.seconds > 0 else 0.0

    def row(self) -> dict[str, object]:
        return {
            "name": self.name,
            "messages": self.messages,
            "seconds": round(self.seconds, 3),
            "msgs_per_s": round(self.msgs_per_s),
            "mb_per_s": round(self.mb_per_s, 2),
            "p50_ms": _round(percentile(self.latencies_ms, 50)),
            "p99_ms": _round(percentile(self.latencies_ms, 99)),
            "mean_ms": _round(statistics.fmean(self.latencies_ms) if self.latencies_ms else None),
            "max_ms": _round(max(self.latencies_ms) if self.latencies_ms else None),
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


# ---------------------------------------------------------------------------- broker


@contextmanager
def broker_under_test(args: argparse.Namespace) -> Iterator[str]:
    if args.bootstrap:
        yield args.bootstrap
        return
    extra: list[str] = ["--brokers", str(args.brokers)]
    if args.data_dir:
        extra += ["--data-dir", str(args.data_dir)]
    broker = BrokerProcess(
        extra, profile=args.profile, cwd=args.broker_cwd, stderr=None, log_level="WARNING"
    )
    try:
        yield broker.bootstrap
    finally:
        code = broker.stop()
        if code != 0:
            print(f"warning: broker exited with {code}", file=sys.stderr)


# ---------------------------------------------------------------------------- phases


async def create_topics(bootstrap: str, names: list[str], replication_factor: int = 1) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics(
            [NewTopic(n, num_partitions=1, replication_factor=replication_factor) for n in names]
        )
    finally:
        await admin.close()


async def produce_sync(bootstrap: str, topic: str, acks: int | str, n: int, size: int) -> Figure:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks=acks, linger_ms=0)
    await producer.start()
    payload = b"x" * size
    latencies: list[float] = []
    try:
        await producer.send_and_wait(topic, payload, partition=0)  # warm-up: metadata
        start = time.perf_counter()
        for _ in range(n):
            t0 = time.perf_counter_ns()
            await producer.send_and_wait(topic, payload, partition=0)
            latencies.append((time.perf_counter_ns() - t0) / 1e6)
        seconds = time.perf_counter() - start
    finally:
        await producer.stop()
    return Figure(f"produce sync acks={acks}", n, seconds, n * size, latencies)


async def produce_batched(
    bootstrap: str, topic: str, acks: int | str, n: int, size: int, linger_ms: int
) -> Figure:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks=acks, linger_ms=linger_ms)
    await producer.start()
    payload = b"x" * size
    try:
        await producer.send_and_wait(topic, payload, partition=0)
        start = time.perf_counter()
        futures = [await producer.send(topic, payload, partition=0) for _ in range(n)]
        await producer.flush()
        for future in futures:
            await future  # raises if any failed
        seconds = time.perf_counter() - start
    finally:
        await producer.stop()
    return Figure(f"produce batched acks={acks} linger={linger_ms}ms", n, seconds, n * size)


async def consume(bootstrap: str, topic: str, n: int) -> Figure:
    """Read ``n`` records (after the warm-up one) from the beginning of ``topic``."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=100
    )
    await consumer.start()
    tp = TopicPartition(topic, 0)
    try:
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        count = 0
        total_bytes = 0
        start = time.perf_counter()
        while count < n + 1:
            batch = await consumer.getmany(tp, timeout_ms=5000, max_records=10_000)
            if not batch:
                raise RuntimeError(f"consume stalled after {count} records")
            for records in batch.values():
                count += len(records)
                total_bytes += sum(len(r.value or b"") for r in records)
        seconds = time.perf_counter() - start
    finally:
        await consumer.stop()
    return Figure("consume", count, seconds, total_bytes)


async def end_to_end(bootstrap: str, topic: str, samples: int, size: int) -> Figure:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        fetch_min_bytes=1,
        fetch_max_wait_ms=500,
    )
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=0)
    await consumer.start()
    await producer.start()
    tp = TopicPartition(topic, 0)
    payload = b"x" * size
    latencies: list[float] = []
    try:
        consumer.assign([tp])
        await producer.send_and_wait(topic, payload, partition=0)
        await consumer.seek_to_end(tp)
        await consumer.position(tp)
        start = time.perf_counter()
        for i in range(E2E_WARMUP + samples):
            if i == E2E_WARMUP:
                start = time.perf_counter()
            t0 = time.perf_counter_ns()
            await producer.send(topic, payload, partition=0)
            await asyncio.wait_for(consumer.getone(tp), timeout=10)
            if i >= E2E_WARMUP:
                latencies.append((time.perf_counter_ns() - t0) / 1e6)
        seconds = time.perf_counter() - start
    finally:
        await producer.stop()
        await consumer.stop()
    return Figure("end-to-end (fetch_min_bytes=1)", samples, seconds, samples * size, latencies)


async def run(bootstrap: str, args: argparse.Namespace) -> list[Figure]:
    run_id = uuid.uuid4().hex[:8]
    topics = {
        key: f"bench-{run_id}-{key}" for key in ("sync1", "syncall", "batch1", "batchall", "e2e")
    }
    await create_topics(bootstrap, list(topics.values()), args.replication_factor)
    n, size = args.messages, args.size
    sync_n = args.sync_messages if args.sync_messages is not None else max(1, n // 4)
    figures = [
        await produce_sync(bootstrap, topics["sync1"], 1, sync_n, size),
        await produce_sync(bootstrap, topics["syncall"], "all", sync_n, size),
        await produce_batched(bootstrap, topics["batch1"], 1, n, size, args.linger_ms),
        await produce_batched(bootstrap, topics["batchall"], "all", n, size, args.linger_ms),
        await consume(bootstrap, topics["batch1"], n),
        await end_to_end(bootstrap, topics["e2e"], args.latency_samples, size),
    ]
    return figures


# ---------------------------------------------------------------------------- output


COLUMNS = (
    "name",
    "messages",
    "seconds",
    "msgs_per_s",
    "mb_per_s",
    "p50_ms",
    "p99_ms",
    "mean_ms",
    "max_ms",
)


def print_table(figures: list[Figure], target: str) -> None:
    rows = [f.row() for f in figures]
    print(f"broker: {target}")
    for line in table_lines(COLUMNS, [[r[c] for c in COLUMNS] for r in rows]):
        print(line)


def print_profile(path: Path, top: int) -> None:
    stats = pstats.Stats(str(path))
    print(f"\nbroker profile ({path}), top {top} by cumulative time:")
    stats.sort_stats(pstats.SortKey.CUMULATIVE).print_stats(top)
    print(f"top {top} by own time:")
    stats.sort_stats(pstats.SortKey.TIME).print_stats(top)


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--bootstrap", help="an existing broker (default: start minikafka)")
    p.add_argument("--messages", type=int, default=20_000, help="messages per batched run")
    p.add_argument(
        "--sync-messages",
        type=int,
        default=None,
        help="messages per send_and_wait run (default: messages / 4)",
    )
    p.add_argument("--size", type=int, default=100, help="value size in bytes (100)")
    p.add_argument("--linger-ms", type=int, default=5, help="linger for batched sends (5)")
    p.add_argument("--latency-samples", type=int, default=1000, help="end-to-end samples")
    p.add_argument("--brokers", type=int, default=1, help="minikafka brokers to start (1)")
    p.add_argument(
        "--replication-factor",
        type=int,
        default=1,
        help="of the bench topics; 3 with --brokers 3 makes acks=all wait for followers",
    )
    p.add_argument("--data-dir", type=Path, default=None, help="minikafka on disk, not memory")
    p.add_argument(
        "--broker-cwd",
        type=Path,
        default=None,
        help="checkout whose broker runs (this one), e.g. another for a before/after",
    )
    p.add_argument("--profile", type=Path, default=None, help="cProfile the broker to FILE")
    p.add_argument("--profile-top", type=int, default=25, help="functions to print (25)")
    p.add_argument("--json", action="store_true", help="also print the rows as JSON lines")
    args = p.parse_args(argv)
    if args.profile is not None and args.bootstrap:
        p.error("--profile profiles the minikafka it starts; drop --bootstrap")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    with broker_under_test(args) as bootstrap:
        target = args.bootstrap or f"minikafka subprocess at {bootstrap}"
        figures = asyncio.run(run(bootstrap, args))
    print_table(figures, target)
    if args.json:
        for f in figures:
            print(json.dumps({**f.row(), "broker": target}))
    if args.profile is not None:
        print_profile(args.profile, args.profile_top)


if __name__ == "__main__":
    main()
