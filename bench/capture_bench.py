"""Capture overhead and replay throughput. Prints figures; never fails a run.

    .venv/bin/python bench/capture_bench.py [--requests 3000] [--replay]

1. Error-code extraction: microseconds per response (Produce with 10 partitions, Fetch).
2. Capture overhead: produce requests/s of one in-process broker, without and with
   ``capture_dir``, alternating rounds in one run (aiokafka, acks=1, 8 concurrent
   senders, one request per message).
3. ``--replay``: the capture of round 2 replayed at ``--speed 1000`` (as fast as the
   schedule allows) with Spark ``local[1]`` and ``local[2]``: requests/s of the replay
   stage and schedule lag p99 (from the results).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
from pathlib import Path

from aiokafka import AIOKafkaProducer

from broker.app import MiniKafka
from broker.config import BrokerConfig
from protocol.builders import response_builder
from protocol.error_codes import error_codes


def bench_error_codes() -> None:
    b = response_builder(0, 9)
    partitions = tuple(
        b.PartitionProduceResponse(
            index=i,
            error_code=0,
            base_offset=i,
            log_append_time=None,
            log_start_offset=0,
            record_errors=(),
            error_message=None,
        )
        for i in range(10)
    )
    response = b.ProduceResponse(
        responses=(b.TopicProduceResponse(name="t", partition_responses=partitions),),
        throttle_time=0,
    )
    n = 20000
    us = timeit.timeit(lambda: error_codes(response), number=n) / n * 1e6
    print(f"error_codes(Produce response, 10 partitions): {us:.2f} us")


async def _produce_rate(capture_dir: Path | None, requests: int) -> float:
    config = BrokerConfig.model_validate({"group.initial.rebalance.delay.ms": "0"})
    app = MiniKafka(config, port=0, capture_dir=capture_dir)
    await app.start()
    producer = AIOKafkaProducer(bootstrap_servers=app.bootstrap, acks=1, linger_ms=0)
    await producer.start()
    await producer.send_and_wait("bench", b"warmup")
    per_task = requests // 8

    async def sender() -> None:
        for _ in range(per_task):
            await producer.send_and_wait("bench", b"x" * 100, partition=0)

    started = time.perf_counter()
    await asyncio.gather(*(sender() for _ in range(8)))
    elapsed = time.perf_counter() - started
    await producer.stop()
    await app.stop()
    return per_task * 8 / elapsed


def bench_capture(requests: int, rounds: int = 3) -> Path:
    keep = Path(tempfile.mkdtemp(prefix="capture-bench-"))
    without: list[float] = []
    with_capture: list[float] = []
    for r in range(rounds):
        without.append(asyncio.run(_produce_rate(None, requests)))
        with_capture.append(asyncio.run(_produce_rate(keep / f"round{r}", requests)))
    a, b = statistics.median(without), statistics.median(with_capture)
    print(f"produced messages/s without capture: {a:,.0f} (rounds {[round(x) for x in without]})")
    print(
        f"produced messages/s with capture:    {b:,.0f} (rounds {[round(x) for x in with_capture]})"
    )
    print(f"capture overhead: {(1 - b / a) * 100:.1f}% of throughput")
    return keep / "round1"


def bench_replay(capture: Path) -> None:
    import pyarrow.parquet as pq

    for master in ("local[1]", "local[2]"):
        server = subprocess.Popen(
            [sys.executable, "-m", "broker", "--log-level", "ERROR", "serve", "--port", "0"],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert server.stdout is not None
        bootstrap = server.stdout.readline().split("bootstrap=", 1)[1].split()[0]
        out = Path(tempfile.mkdtemp(prefix="replay-bench-")) / "results"
        try:
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "spark_jobs.replay",
                    "--capture",
                    str(capture),
                    "--bootstrap",
                    bootstrap,
                    "--out",
                    str(out),
                    "--speed",
                    "1000",
                    "--master",
                    master,
                ],
                check=True,
                capture_output=True,
            )
        finally:
            server.terminate()
            server.wait()
        rows = pq.read_table(out).to_pylist()
        sent = [r for r in rows if r["actual_send_ms"] is not None]
        span_s = (max(r["actual_send_ms"] + (r["response_ms"] or 0) for r in sent)) / 1000
        lags = sorted(r["actual_send_ms"] - r["planned_send_ms"] for r in sent)
        p99 = lags[min(len(lags) - 1, int(len(lags) * 0.99))]
        print(
            f"replay {master}: {len(sent)} requests in {span_s:.2f} s = "
            f"{len(sent) / span_s:,.0f} req/s; schedule lag p99 {p99:.1f} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--replay", action="store_true")
    args = parser.parse_args()
    bench_error_codes()
    capture = bench_capture(args.requests)
    if args.replay:
        bench_replay(capture)


if __name__ == "__main__":
    main()
