"""Transactions with aiokafka: what a transaction costs against plain produce.

For 1 and 3 brokers (each a ``python -m minikafka serve`` child process, RF = brokers) it
runs, on fresh topics:

- ``produce plain``: ``--messages`` sends, acks=all, idempotent, flushed in batches of
  ``--per-txn`` (the same batching as the transactional row, without the transaction);
- ``produce txn``: the same messages in transactions of ``--per-txn`` records each,
  with the commit latency (``commit_transaction`` call to return) as p50/p99;
- ``consume read_committed`` / ``read_uncommitted``: the whole topic read back.

It prints msgs/s and latencies; it never asserts::

    .venv/bin/python -m bench.throughput.txn_bench [--messages 20000] [--per-txn 100] [--size 100]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from bench.lib.stats import percentile
from testkit.broker_process import BrokerProcess


async def _topic(bootstrap: str, name: str, rf: int) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, 1, rf)])
    finally:
        await admin.close()


async def _plain(bootstrap: str, topic: str, n: int, per: int, value: bytes) -> float:
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, linger_ms=5
    )
    await producer.start()
    try:
        start = time.perf_counter()
        for i in range(0, n, per):
            for _ in range(min(per, n - i)):
                await producer.send(topic, value)
            await producer.flush()
        return n / (time.perf_counter() - start)
    finally:
        await producer.stop()


async def _txn(
    bootstrap: str, topic: str, n: int, per: int, value: bytes
) -> tuple[float, list[float]]:
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, transactional_id=f"bench-{uuid.uuid4()}", linger_ms=5
    )
    await producer.start()
    commits: list[float] = []
    try:
        start = time.perf_counter()
        for i in range(0, n, per):
            await producer.begin_transaction()
            for _ in range(min(per, n - i)):
                await producer.send(topic, value)
            t0 = time.perf_counter()
            await producer.commit_transaction()
            commits.append((time.perf_counter() - t0) * 1000)
        return n / (time.perf_counter() - start), commits
    finally:
        await producer.stop()


async def _consume(bootstrap: str, topic: str, n: int, isolation: str) -> float:
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        isolation_level=isolation,
        enable_auto_commit=False,
    )
    await consumer.start()
    try:
        got = 0
        start = time.perf_counter()
        while got < n:
            batch = await consumer.getmany(timeout_ms=1000)
            got += sum(len(records) for records in batch.values())
            if not batch and time.perf_counter() - start > 60:
                break
        return got / (time.perf_counter() - start)
    finally:
        await consumer.stop()


async def run_for(brokers: int, args: argparse.Namespace) -> None:
    extra = ["--brokers", str(brokers), "--override", "group.initial.rebalance.delay.ms=0"]
    extra += ["--override", f"transaction.state.log.replication.factor={brokers}"]
    broker = BrokerProcess(extra, stderr=None, log_level="WARNING")
    try:
        bootstrap = broker.bootstrap
        value = b"x" * args.size
        run = uuid.uuid4().hex[:8]
        plain_topic, txn_topic = f"plain-{run}", f"txn-{run}"
        await _topic(bootstrap, plain_topic, brokers)
        await _topic(bootstrap, txn_topic, brokers)
        plain = await _plain(bootstrap, plain_topic, args.messages, args.per_txn, value)
        txn, commits = await _txn(bootstrap, txn_topic, args.messages, args.per_txn, value)
        committed = await _consume(bootstrap, txn_topic, args.messages, "read_committed")
        uncommitted = await _consume(bootstrap, txn_topic, args.messages, "read_uncommitted")
    finally:
        broker.stop()
    print(f"brokers={brokers} messages={args.messages} per_txn={args.per_txn} size={args.size}")
    print(f"  produce plain (idempotent, acks=all)  {plain:>9.0f} msgs/s")
    p99 = percentile(commits, 99) or 0.0
    print(
        f"  produce txn                           {txn:>9.0f} msgs/s  ({txn / plain:.2f}x plain)"
        f"  commit p50 {statistics.median(commits):.2f} ms  p99 {p99:.2f} ms"
    )
    print(f"  consume read_committed                {committed:>9.0f} msgs/s")
    print(f"  consume read_uncommitted              {uncommitted:>9.0f} msgs/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20000)
    parser.add_argument("--per-txn", type=int, default=100)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--brokers", default="1,3")
    args = parser.parse_args()
    for brokers in (int(b) for b in args.brokers.split(",")):
        asyncio.run(run_for(brokers, args))


if __name__ == "__main__":
    main()
