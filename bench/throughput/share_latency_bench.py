"""Produce-to-delivery latency: a share consumer beside a classic consumer, same run.

One broker in this process, a one-partition topic, one producer sending ``--records``
records at ``--rate`` per second (acks=1, linger 0), each carrying its send time; a
confluent-kafka ``ShareConsumer`` (its ShareFetch parks in the ShareFetch purgatory
until an append completes it: DelayedShareFetch) and a classic ``Consumer`` (its Fetch
long-polls in the Fetch purgatory: DelayedFetch) read the same records. Prints p50, p99
and max of send-to-delivery, per consumer. Figures only; never a pass/fail.

Run: ``.venv/bin/python -m bench.throughput.share_latency_bench [--records 1000] [--rate 200]``
"""

from __future__ import annotations

import argparse
import asyncio
import struct
import threading
import time
import uuid
from typing import Any

from confluent_kafka import Consumer, Producer, ShareConsumer

from bench.lib.stats import percentile
from broker.app import MiniKafka
from broker.config.broker_config import BrokerConfig

_QUIET = {"log_level": 3}


def _summary(values: list[float]) -> str:
    if not values:
        return "no records"
    p50, p99 = percentile(values, 50), percentile(values, 99)
    return f"n={len(values)} p50 {p50:.2f} ms, p99 {p99:.2f} ms, max {max(values):.2f} ms"


def _share_reader(
    bootstrap: str, topic: str, stop: threading.Event, out: list[float], ready: threading.Event
) -> None:
    consumer = ShareConsumer(
        {"bootstrap.servers": bootstrap, "group.id": f"share-{uuid.uuid4().hex[:6]}", **_QUIET}
    )
    consumer.subscribe([topic])
    try:
        while not stop.is_set():
            for msg in consumer.poll(0.1) or ():
                ready.set()
                if msg.error() is None and msg.value() != b"warm":
                    (sent,) = struct.unpack(">d", msg.value())
                    out.append((time.monotonic() - sent) * 1000)
    finally:
        consumer.close()


def _classic_reader(
    bootstrap: str, topic: str, stop: threading.Event, out: list[float], ready: threading.Event
) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"classic-{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": "latest",
            **_QUIET,
        }
    )
    consumer.subscribe([topic])
    try:
        while not stop.is_set():
            msg = consumer.poll(0.1)
            if consumer.assignment():
                ready.set()
            if msg is not None and msg.error() is None and msg.value() != b"warm":
                (sent,) = struct.unpack(">d", msg.value())
                out.append((time.monotonic() - sent) * 1000)
    finally:
        consumer.close()


def _produce(bootstrap: str, topic: str, records: int, rate: float, warm: threading.Event) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": 1, **_QUIET})
    while not warm.is_set():  # until the share partition exists and reads
        producer.produce(topic, b"warm")
        producer.flush(5)
        time.sleep(0.1)
    interval = 1.0 / rate
    start = time.monotonic()
    for i in range(records):
        delay = start + i * interval - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        producer.produce(topic, struct.pack(">d", time.monotonic()))
        producer.poll(0)
    producer.flush(30)


async def run(records: int, rate: float) -> tuple[list[float], list[float]]:
    app = MiniKafka(BrokerConfig.model_validate({"group.initial.rebalance.delay.ms": "0"}), port=0)
    await app.start()
    topic = "latency"
    app.cluster.create_topic(topic, 1, 1, {})
    stop = threading.Event()
    share: list[float] = []
    classic: list[float] = []
    share_ready, classic_ready = threading.Event(), threading.Event()
    try:
        readers: list[Any] = [
            asyncio.to_thread(_share_reader, app.bootstrap, topic, stop, share, share_ready),
            asyncio.to_thread(_classic_reader, app.bootstrap, topic, stop, classic, classic_ready),
        ]
        tasks = [asyncio.ensure_future(r) for r in readers]
        while not classic_ready.is_set():
            await asyncio.sleep(0.05)
        await asyncio.to_thread(_produce, app.bootstrap, topic, records, rate, share_ready)
        deadline = time.monotonic() + 30
        while (len(share) < records or len(classic) < records) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        stop.set()
        await asyncio.gather(*tasks)
    finally:
        await app.stop()
    return share, classic


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=200.0)
    args = parser.parse_args(argv)
    share, classic = asyncio.run(run(args.records, args.rate))
    print(f"records={args.records} rate={args.rate}/s, one partition, acks=1")
    print(f"share consumer (ShareFetch, DelayedShareFetch):  {_summary(share)}")
    print(f"classic consumer (Fetch long-poll, DelayedFetch): {_summary(classic)}")


if __name__ == "__main__":
    main()
