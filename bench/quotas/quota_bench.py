"""Client quotas: the rate each client achieves against its quota (figures, no verdict).

One minikafka in this process (its own event loop), and for each quota in ``--rates``
one aiokafka producer (client id ``bench-p-<rate>``, ``producer_byte_rate`` = rate) and
one aiokafka consumer (``bench-c-<rate>``, ``consumer_byte_rate`` = rate, reading a topic
filled beforehand by an unthrottled client) running side by side for ``--seconds``, plus
one producer with no quota (``bench-free``) as the control. The bytes are counted by the
broker (a request observer: produce request sizes, fetch response record bytes), so the
figures are what the quota managers saw.

Columns: the quota; bytes; the achieved rate over the whole run (which includes the burst
Kafka's windows allow: ``quota.window.num - 1`` windows of quota before any throttle),
and after the first ``--burst-s`` seconds; the highest and lowest rate over any
``--span-s`` interval after the burst (sampled every 100 ms); responses; how many
carried a throttle time; the mean throttle time in ms.

Read the steady figures against ``bench/quotas/quota_window_sim.py``, which runs Kafka's
algorithm alone on virtual time: a greedy client is held to the quota over a long run,
but in a sawtooth of period ``quota.window.num + 1`` windows (a window holding a burst
rolls off at once and lets the next burst in), so an interval shorter than the period
that starts just after a burst reads high — 1.22 x for the 9 s after an 11 s burst, at
most 1.10 x over any 10 s.

    .venv/bin/python -m bench.quotas.quota_bench [--rates 50000,200000] [--seconds 20]
        [--burst-s 11] [--span-s 10] [--size 1000]
"""

from __future__ import annotations

import argparse
import asyncio
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from broker.app import MiniKafka
from broker.config.broker_config import BrokerConfig
from broker.quota.client_quota_store import QuotaAlteration
from broker.server.context import RequestContext

PRODUCE, FETCH = 0, 1


@dataclass
class ClientFigures:
    events: list[tuple[float, int, int]] = field(default_factory=list)  # (t, bytes, throttle)


class Counter:
    """A request observer: each client's bytes and throttle times, on the loop's clock."""

    def __init__(self) -> None:
        self.clients: dict[str, ClientFigures] = {}

    def request_received(self, ctx: RequestContext, request: Any, frame: bytes) -> None:
        pass

    def request_completed(self, ctx: RequestContext, response: Any, size: int) -> None:
        key = ctx.header.api_key
        if key == PRODUCE:
            nbytes = ctx.request_size
        elif key == FETCH and response is not None:
            nbytes = sum(len(p.records or b"") for t in response.responses for p in t.partitions)
        else:
            return
        client = ctx.header.client_id or ""
        figures = self.clients.setdefault(client, ClientFigures())
        now = asyncio.get_running_loop().time()
        figures.events.append((now, nbytes, ctx.timing.throttle_time_ms))


async def _produce(bootstrap: str, client_id: str, topic: str, value: bytes, until: float) -> None:
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, client_id=client_id, max_batch_size=16384
    )
    await producer.start()
    loop = asyncio.get_running_loop()
    try:
        while loop.time() < until:
            batch = [await producer.send(topic, value, partition=0) for _ in range(16)]
            await asyncio.gather(*batch)
    finally:
        await producer.stop()


async def _consume(bootstrap: str, client_id: str, topic: str, until: float) -> None:
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        client_id=client_id,
        auto_offset_reset="earliest",
        max_partition_fetch_bytes=65536,
        fetch_max_bytes=65536,
    )
    await consumer.start()
    loop = asyncio.get_running_loop()
    try:
        while loop.time() < until:
            await consumer.getmany(timeout_ms=200)
    finally:
        await consumer.stop()


async def _fill(bootstrap: str, topic: str, nbytes: int, value: bytes) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, client_id="bench-filler")
    await producer.start()
    try:
        futures = [
            await producer.send(topic, value, partition=0) for _ in range(nbytes // len(value) + 1)
        ]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


def _span_rates(
    events: list[tuple[float, int, int]], begin: float, end: float, span_s: float
) -> tuple[float, float]:
    """(highest, lowest) rate over any ``span_s`` interval in [begin, end]."""
    rates = []
    t = begin
    while t + span_s <= end:
        rates.append(sum(n for when, n, _ in events if t <= when < t + span_s) / span_s)
        t += 0.1
    return (max(rates), min(rates)) if rates else (0.0, 0.0)


def _row(
    name: str,
    quota: int | None,
    figures: ClientFigures | None,
    start: float,
    burst_s: float,
    span_s: float,
) -> str:
    events = figures.events if figures is not None else []
    if not events:
        return f"{name:<16} {quota or '-':>9}  (no requests)"
    total = sum(n for _, n, _ in events)
    elapsed = max(events[-1][0] - start, 1e-9)
    steady = [(t, n) for t, n, _ in events if t >= start + burst_s]
    steady_rate = (
        sum(n for _, n in steady) / max(events[-1][0] - (start + burst_s), 1e-9) if steady else 0
    )
    throttled = [th for _, _, th in events if th > 0]
    mean = sum(throttled) / len(throttled) if throttled else 0
    high, low = _span_rates(events, start + burst_s, events[-1][0], span_s)
    return (
        f"{name:<16} {quota or '-':>9} {total:>11} {total / elapsed:>11.0f} "
        f"{steady_rate:>12.0f} {high:>11.0f} {low:>11.0f} {len(events):>6} "
        f"{len(throttled):>9} {mean:>10.0f}"
    )


async def main(args: argparse.Namespace) -> None:
    counter = Counter()
    app = MiniKafka(BrokerConfig.model_validate({}), brokers=1, port=0, observers=[counter])
    await app.start()
    try:
        rates = [int(r) for r in args.rates.split(",") if r]
        value = b"q" * args.size
        largest = max(rates)
        await _fill(app.bootstrap, "bench-quota-read", int(largest * (args.seconds + 12)), value)
        for rate in rates:
            for prefix, key in (
                ("bench-p", "producer_byte_rate"),
                ("bench-c", "consumer_byte_rate"),
            ):
                alteration = QuotaAlteration(
                    (("client-id", f"{prefix}-{rate}"),), ((key, float(rate)),)
                )
                (result,) = app.client_quotas.alter([alteration], False)
                assert not result.failed, result.message
        loop = asyncio.get_running_loop()
        start = loop.time()
        until = start + args.seconds
        tasks = [_produce(app.bootstrap, "bench-free", "bench-free", value, until)]
        for rate in rates:
            tasks.append(
                _produce(app.bootstrap, f"bench-p-{rate}", f"bench-p-{rate}", value, until)
            )
            tasks.append(_consume(app.bootstrap, f"bench-c-{rate}", "bench-quota-read", until))
        await asyncio.gather(*tasks)
        print(
            f"# {args.seconds} s, values of {args.size} B, quota.window.num 11 x 1 s; "
            f"steady = after the first {args.burst_s} s"
        )
        print(
            f"{'client':<16} {'quota B/s':>9} {'bytes':>11} {'B/s all':>11} "
            f"{'B/s steady':>12} {'max ' + str(int(args.span_s)) + ' s':>11} "
            f"{'min ' + str(int(args.span_s)) + ' s':>11} {'resp':>6} {'throttled':>9} "
            f"{'mean ms':>10}"
        )
        free = counter.clients.get("bench-free")
        print(_row("bench-free", None, free, start, args.burst_s, args.span_s))
        for rate in rates:
            for prefix in ("bench-p", "bench-c"):
                name = f"{prefix}-{rate}"
                figures = counter.clients.get(name)
                print(_row(name, rate, figures, start, args.burst_s, args.span_s))
    finally:
        await app.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", default="50000,200000", help="comma list of quotas, B/s")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--burst-s", type=float, default=11.0)
    parser.add_argument("--span-s", type=float, default=10.0)
    parser.add_argument("--size", type=int, default=1000, help="value bytes")
    asyncio.run(main(parser.parse_args()))
