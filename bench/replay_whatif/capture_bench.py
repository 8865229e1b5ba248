"""Capture overhead and replay throughput. Prints figures; never fails a run.

    .venv/bin/python -m bench.replay_whatif.capture_bench [--requests 20000] [--rounds 5] [--replay]

1. Error-code extraction: microseconds per response (Produce with 10 partitions).
2. Capture overhead: produced messages/s of one in-process broker, without and with
   ``capture_dir``, in alternating rounds of one run (aiokafka, acks=1, 8 concurrent
   senders of ``--requests`` messages in all, one ``send_and_wait`` each; aiokafka puts
   what waits into one Produce request). Medians of the rounds, the median of the
   paired rounds' ratios (a round and the one after it see much the same machine), and
   the process's CPU per Produce request (every thread: the client, the broker, the
   capture thread): on a busy machine the CPU figure moves less than the throughput.
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
from dataclasses import dataclass
from pathlib import Path

from aiokafka import AIOKafkaProducer

from broker.app import MiniKafka
from broker.config.broker_config import BrokerConfig
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


@dataclass
class Round:
    """One run of the produce workload against a fresh in-process broker."""

    messages: int
    requests: int  # Produce requests the broker answered (aiokafka batches messages)
    seconds: float
    cpu_s: float  # process CPU (every thread: client, broker, capture thread)

    @property
    def rate(self) -> float:
        return self.messages / self.seconds

    @property
    def cpu_us_per_request(self) -> float:
        return self.cpu_s / max(self.requests, 1) * 1e6


async def _produce_round(capture_dir: Path | None, messages: int) -> Round:
    config = BrokerConfig.model_validate({"group.initial.rebalance.delay.ms": "0"})
    app = MiniKafka(config, port=0, capture_dir=capture_dir)
    await app.start()
    producer = AIOKafkaProducer(bootstrap_servers=app.bootstrap, acks=1, linger_ms=0)
    await producer.start()
    await producer.send_and_wait("bench", b"warmup")
    per_task = messages // 8
    metrics = app.request_metrics[0]
    produced_before = metrics.request_count("Produce")

    async def sender() -> None:
        for _ in range(per_task):
            await producer.send_and_wait("bench", b"x" * 100, partition=0)

    cpu = time.process_time()
    started = time.perf_counter()
    await asyncio.gather(*(sender() for _ in range(8)))
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu
    requests = metrics.request_count("Produce") - produced_before
    await producer.stop()
    await app.stop()
    return Round(per_task * 8, requests, elapsed, cpu)


def bench_capture(messages: int, rounds: int) -> Path:
    """Alternate rounds without and with capture; medians, and the overhead of each."""
    keep = Path(tempfile.mkdtemp(prefix="capture-bench-"))
    without: list[Round] = []
    with_capture: list[Round] = []
    for r in range(rounds):
        without.append(asyncio.run(_produce_round(None, messages)))
        with_capture.append(asyncio.run(_produce_round(keep / f"round{r}", messages)))
    for name, runs in (("without capture", without), ("with capture:   ", with_capture)):
        rate = statistics.median(x.rate for x in runs)
        cpu = statistics.median(x.cpu_us_per_request for x in runs)
        per_request = statistics.median(x.messages / max(x.requests, 1) for x in runs)
        print(
            f"produced messages/s {name} {rate:,.0f} (rounds {[round(x.rate) for x in runs]}); "
            f"process CPU {cpu:.0f} us per Produce request ({per_request:.1f} messages each)"
        )
    a = statistics.median(x.rate for x in without)
    b = statistics.median(x.rate for x in with_capture)
    ca = statistics.median(x.cpu_us_per_request for x in without)
    cb = statistics.median(x.cpu_us_per_request for x in with_capture)
    print(f"capture overhead: {(1 - b / a) * 100:.1f}% of throughput (medians)")
    paired = statistics.median(
        w.rate / c.rate - 1 for w, c in zip(without, with_capture, strict=True)
    )
    print(f"capture overhead, median of the {rounds} paired rounds: {paired * 100:.1f}%")
    print(f"capture CPU: {cb - ca:+.1f} us per request ({(cb / ca - 1) * 100:+.1f}%)")
    return keep / f"round{min(1, rounds - 1)}"


def bench_replay(capture: Path) -> None:
    import pyarrow.parquet as pq

    for master in ("local[1]", "local[2]"):
        server = subprocess.Popen(
            [sys.executable, "-m", "minikafka", "--log-level", "ERROR", "serve", "--port", "0"],
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
    parser.add_argument("--requests", type=int, default=20000, help="messages per round")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of each, alternating")
    parser.add_argument("--replay", action="store_true")
    args = parser.parse_args()
    bench_error_codes()
    capture = bench_capture(args.requests, args.rounds)
    if args.replay:
        bench_replay(capture)


if __name__ == "__main__":
    main()
