"""Produce/consume throughput and small-request broker CPU over SASL_SSL beside PLAINTEXT.

One broker (``python -m minikafka serve --port 0 --security sasl_ssl``, its own process)
serves both listeners; the same aiokafka clients run against each, in the same run:

* ``produce``: ``--messages`` of ``--size`` bytes, batched (``linger_ms=5``), acks=1;
* ``consume``: the same topic read from the beginning with ``getmany``;
* ``small requests``: ``--small`` sequential ``send_and_wait`` of 10-byte messages; the
  broker's CPU time per request (user + system, from ``/proc/<pid>/stat``) and the
  client's mean round trip.

SASL_SSL uses SCRAM-SHA-512 with the user ``--security`` creates. The two listeners
alternate ``--rounds`` times (the first round also warms the broker up). Figures, not
assertions: compare the rows of one run, on one machine.

    .venv/bin/python -m bench.security.security_bench [--messages 20000] [--size 100] [--small 2000]
        [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.helpers import create_ssl_context

from broker.config.broker_config import parse_properties
from testkit.broker_process import BrokerProcess

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


async def produce(bootstrap: str, topic: str, count: int, size: int, **kw: Any) -> float:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, acks=1, **kw)
    await producer.start()
    payload = b"x" * size
    try:
        await producer.send_and_wait(topic, b"warm-up")
        start = time.perf_counter()
        for _ in range(count):
            await producer.send(topic, payload)
        await producer.flush()
        return time.perf_counter() - start
    finally:
        await producer.stop()


async def consume(bootstrap: str, topic: str, count: int, **kw: Any) -> float:
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", **kw
    )
    await consumer.start()
    try:
        seen = 0
        start = time.perf_counter()
        while seen < count + 1:
            batches = await consumer.getmany(timeout_ms=1000)
            seen += sum(len(records) for records in batches.values())
        return time.perf_counter() - start
    finally:
        await consumer.stop()


async def small_requests(
    bootstrap: str, topic: str, count: int, pid: int, **kw: Any
) -> tuple[float, float]:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks=1, **kw)
    await producer.start()
    try:
        await producer.send_and_wait(topic, b"warm-up")
        cpu0, start = cpu_seconds(pid), time.perf_counter()
        for _ in range(count):
            await producer.send_and_wait(topic, b"0123456789")
        elapsed, cpu = time.perf_counter() - start, cpu_seconds(pid) - cpu0
        return cpu / count * 1e6, elapsed / count * 1e6
    finally:
        await producer.stop()


async def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess(
            ["--security", "sasl_ssl", "--security-dir", tmp], stderr=None, log_level="WARNING"
        )
        try:
            props = parse_properties((Path(tmp) / "client.properties").read_text())
            jaas = re.search(r'username="([^"]+)" password="([^"]+)"', props["sasl.jaas.config"])
            assert jaas is not None
            secure: dict[str, Any] = {
                "security_protocol": "SASL_SSL",
                "ssl_context": create_ssl_context(cafile=props["ssl.truststore.location"]),
                "sasl_mechanism": props["sasl.mechanism"],
                "sasl_plain_username": jaas.group(1),
                "sasl_plain_password": jaas.group(2),
            }
            runs = [
                ("PLAINTEXT", broker.bootstrap, {}),
                ("SASL_SSL", props["bootstrap.servers"], secure),
            ]
            print(
                f"{'listener':<10} {'produce msg/s':>14} {'consume msg/s':>14} "
                f"{'small req: broker CPU us':>25} {'round trip us':>14}"
            )
            for name, bootstrap, kw in runs * args.rounds:
                topic = f"bench-{uuid.uuid4().hex[:8]}-{name.lower()}"
                p = await produce(bootstrap, topic, args.messages, args.size, **kw)
                c = await consume(bootstrap, topic, args.messages, **kw)
                cpu_us, rtt_us = await small_requests(
                    bootstrap, topic + "-small", args.small, broker.proc.pid, **kw
                )
                print(
                    f"{name:<10} {args.messages / p:>14,.0f} {args.messages / c:>14,.0f} "
                    f"{cpu_us:>25,.0f} {rtt_us:>14,.0f}"
                )
        finally:
            broker.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--small", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=2, help="both listeners, this many times")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
