"""Remote fetches beside local fetches, and produce throughput with tiering on and off.

One broker subprocess (``minikafka serve``, its own interpreter) with tiered storage on
and a data directory; two topics of one partition and 64 KiB segments (a fetch reads one
segment at most, in either tier: like for like): ``local`` (no tiering) and ``tiered``
(remote.storage.enable, local.retention.bytes 1: each segment leaves the local log once
copied). Then:

* ``produce``: the same batched acks=all load into each topic, messages/s and the
  broker's CPU seconds (utime + stime from /proc) per MB: the tiered topic's figure
  includes the copies the RLM makes while it runs (its segments roll every 64 KiB);
* after the tiered topic's local log has moved past 90% of it, ``fetch``: sequential
  raw Fetch requests (1 MiB max) from offset 0 to the end of each topic, so every
  tiered one is a remote read through the RemoteFetch purgatory: requests/s, MB/s, the
  round trip p50/p99, and the broker's CPU per fetch.

``--store-latency-ms`` sets the embedded store's modelled latency (rsm.config.latency.p50.ms
= p99): 0 measures the code path alone. Figures depend on the machine: compare runs made
side by side. This script asserts nothing.

Run: ``.venv/bin/python -m bench.tiered.tiered_bench --messages 20000 --size 1000``
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from bench.lib.stats import percentile
from bench.lib.tables import table_lines
from bench.request_cost.load import proc_cpu_s
from protocol.builders import request_builder
from testkit.broker_process import BrokerProcess
from testkit.raw_client import RawClient
from testkit.requests import fetch_fields

TIERED_TOPIC = {
    "remote.storage.enable": "true",
    "segment.bytes": str(64 * 1024),
    "local.retention.bytes": "1",
}


def _broker(data_dir: Path, store_latency_ms: int) -> BrokerProcess:
    overrides = {
        "remote.log.storage.system.enable": "true",
        "remote.log.manager.task.interval.ms": "200",
        "log.retention.check.interval.ms": "200",
        "rsm.config.latency.p50.ms": str(store_latency_ms),
        "rsm.config.latency.p99.ms": str(store_latency_ms),
    }
    args = ["--data-dir", str(data_dir)]
    for key, value in overrides.items():
        args += ["--override", f"{key}={value}"]
    return BrokerProcess(args)


async def _produce(bootstrap: str, topic: str, messages: int, size: int) -> float:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    await producer.start()
    value = b"x" * size
    try:
        start = time.perf_counter()
        for _ in range(messages):
            await producer.send(topic, value, partition=0)
        await producer.flush()
        return time.perf_counter() - start
    finally:
        await producer.stop()


async def _local_log_start(raw: RawClient, topic: str) -> int:
    b = request_builder(2, 7)
    response = await raw.request(
        2,
        7,
        "ListOffsetsRequest",
        replica_id=-1,
        isolation_level=0,
        topics=(
            b.ListOffsetsTopic(
                name=topic,
                partitions=(
                    b.ListOffsetsPartition(
                        partition_index=0, current_leader_epoch=-1, timestamp=-4
                    ),
                ),
            ),
        ),
    )
    return int(response.topics[0].partitions[0].offset)


async def _fetch_all(raw: RawClient, topic: str, end: int) -> tuple[list[float], int, int]:
    """Sequential fetches from 0 to ``end``: round trips (ms), bytes, requests."""
    latencies: list[float] = []
    offset = nbytes = 0
    while offset < end:
        start = time.perf_counter()
        response = await raw.request(1, 12, "FetchRequest", **fetch_fields(topic, offset, 500, 12))
        latencies.append((time.perf_counter() - start) * 1000)
        partition = response.responses[0].partitions[0]
        records = bytes(partition.records or b"")
        nbytes += len(records)
        offset = _next_offset(records, offset)
    return latencies, nbytes, len(latencies)


def _next_offset(records: bytes, offset: int) -> int:
    from protocol.record_batch import iter_batches

    for _, header in iter_batches(records, allow_partial_tail=True):
        offset = header.last_offset + 1
    return offset


async def run(messages: int, size: int, store_latency_ms: int) -> list[list[str]]:
    rows: list[list[str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        broker = _broker(Path(tmp), store_latency_ms)
        pid = broker.proc.pid
        try:
            admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
            await admin.start()
            await admin.create_topics(
                [
                    NewTopic("local", 1, 1, topic_configs={"segment.bytes": str(64 * 1024)}),
                    NewTopic("tiered", 1, 1, topic_configs=TIERED_TOPIC),
                ]
            )
            await admin.close()
            megabytes = messages * size / 1e6
            for topic in ("local", "tiered"):
                cpu0 = proc_cpu_s(pid) or 0.0
                elapsed = await _produce(broker.bootstrap, topic, messages, size)
                cpu = (proc_cpu_s(pid) or 0.0) - cpu0
                rows.append(
                    [
                        f"produce {topic}",
                        f"{messages / elapsed:,.0f} msg/s",
                        f"{megabytes / elapsed:.1f} MB/s",
                        "",
                        "",
                        f"{cpu / megabytes * 1000:.1f} ms CPU/MB",
                    ]
                )
            raw = await RawClient.connect(broker.bootstrap)
            try:
                deadline = time.monotonic() + 120
                while await _local_log_start(raw, "tiered") < 0.9 * messages:
                    if time.monotonic() > deadline:
                        raise RuntimeError("the tiered topic was not copied in 120 s")
                    await asyncio.sleep(0.2)
                for topic in ("local", "tiered"):
                    cpu0 = proc_cpu_s(pid) or 0.0
                    start = time.perf_counter()
                    latencies, nbytes, requests = await _fetch_all(raw, topic, messages)
                    elapsed = time.perf_counter() - start
                    cpu = (proc_cpu_s(pid) or 0.0) - cpu0
                    rows.append(
                        [
                            f"fetch {topic}",
                            f"{requests / elapsed:,.0f} req/s",
                            f"{nbytes / 1e6 / elapsed:.1f} MB/s",
                            f"{percentile(latencies, 50) or 0.0:.2f}",
                            f"{percentile(latencies, 99) or 0.0:.2f}",
                            f"{cpu / requests * 1000:.2f} ms CPU/fetch",
                        ]
                    )
            finally:
                await raw.close()
        finally:
            broker.stop()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=20000)
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--store-latency-ms", type=int, default=0)
    args = parser.parse_args()
    rows = asyncio.run(run(args.messages, args.size, args.store_latency_ms))
    header = ["run", "rate", "throughput", "p50 ms", "p99 ms", "broker CPU"]
    print("\n".join(table_lines(header, rows)))


if __name__ == "__main__":
    main()
