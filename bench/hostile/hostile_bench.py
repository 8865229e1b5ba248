"""Hostile clients against a broker process: its memory, and how fast others are served.

Each case of issue 10 runs against a fresh ``python -m minikafka serve`` child while a
probe client sends an ApiVersions request every 20 ms on its own connection. Printed per
case: the broker's answer (error code or "closed"), the broker's RSS growth (peak during
the case, and after), the probe's worst and p99 round trip meanwhile, and the
``Traceback`` lines in the broker's log. It never asserts::

    .venv/bin/python -m bench.hostile.hostile_bench [--cases all] [--seconds 10]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
import struct
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench.lib.rss import rss_mb
from client_io import ClientShell, PeerClosed
from protocol.builders import request_builder
from protocol.client import ClientConnection
from protocol.compression import compress
from protocol.record_batch import compute_crc
from protocol.record_builder import build_record_batch
from testkit.broker_process import BrokerProcess
from testkit.requests import FETCH, FETCH_V, fetch_fields, produce_fields

API_VERSIONS, PRODUCE, METADATA, CREATE_TOPICS, CREATE_PARTITIONS = 18, 0, 3, 19, 37


class Probe:
    """An ApiVersions round trip every 20 ms on one connection, timed."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.rtts: list[float] = []
        self.failures = 0
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        shell = await ClientShell.open(self.host, self.port, client_id="probe")
        body = request_builder(API_VERSIONS, 3).ApiVersionsRequest(
            client_software_name="probe", client_software_version="1"
        )
        while True:
            start = time.perf_counter()
            try:
                await shell.request(API_VERSIONS, 3, body, timeout_s=10)
            except (TimeoutError, ConnectionError):
                self.failures += 1
                await shell.close()
                return
            self.rtts.append((time.perf_counter() - start) * 1000)
            await asyncio.sleep(0.02)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


async def _request(host: str, port: int, api_key: int, version: int, body: Any) -> str:
    shell = await ClientShell.open(host, port, client_id="hostile")
    try:
        return _errors((await shell.request(api_key, version, body, timeout_s=30)).body)
    except PeerClosed:
        return "closed"
    finally:
        await shell.close()


def _errors(body: Any) -> str:
    from protocol.error_codes import error_codes

    codes = sorted({c for c in error_codes(body) if c})
    return ",".join(str(c) for c in codes) or "NONE"


# -- the cases ------------------------------------------------------------------------


async def huge_create_topics(host: str, port: int, seconds: float) -> str:
    b = request_builder(CREATE_TOPICS, 7)
    topic = b.CreatableTopic(
        name="huge", num_partitions=2**31 - 1, replication_factor=1, assignments=(), configs=()
    )
    body = b.CreateTopicsRequest(topics=(topic,), timeout=5000, validate_only=True)
    return await _request(host, port, CREATE_TOPICS, 7, body)


async def many_create_partitions(host: str, port: int, seconds: float) -> str:
    b = request_builder(CREATE_TOPICS, 7)
    made = b.CreatableTopic(
        name="grow", num_partitions=1, replication_factor=1, assignments=(), configs=()
    )
    await _request(
        host, port, CREATE_TOPICS, 7, b.CreateTopicsRequest(topics=(made,), timeout=5000)
    )
    p = request_builder(CREATE_PARTITIONS, 3)
    body = p.CreatePartitionsRequest(
        topics=(p.CreatePartitionsTopic(name="grow", count=100_000, assignments=None),),
        timeout=5000,
        validate_only=False,
    )
    return await _request(host, port, CREATE_PARTITIONS, 3, body)


async def pipelined_long_polls(host: str, port: int, seconds: float) -> str:
    """Fetches at the log end with a 30 s wait, sent as fast as TCP takes them, never read."""
    await _request(host, port, METADATA, 9, _metadata("quiet"))
    body = request_builder(FETCH, FETCH_V).FetchRequest(**fetch_fields("quiet", 0, 30_000))
    frame = ClientConnection("hog").send(FETCH, FETCH_V, body).data
    sock = socket.create_connection((host, port))
    sock.setblocking(False)
    sent = 0
    deadline = time.monotonic() + seconds
    payload = frame * 1000
    while time.monotonic() < deadline:
        try:
            sent += sock.send(payload)
        except BlockingIOError:
            await asyncio.sleep(0.01)
    sock.close()
    return f"{sent // len(frame)} fetches accepted by TCP"


async def zstd_bomb(host: str, port: int, seconds: float) -> str:
    await _request(host, port, METADATA, 9, _metadata("bomb"))
    return await _produce_raw(host, port, "bomb", compress(4, bytes(1 << 30)))


async def garbage_compressed(host: str, port: int, seconds: float) -> str:
    await _request(host, port, METADATA, 9, _metadata("garbage"))
    return await _produce_raw(host, port, "garbage", b"\x28\xb5\x2f\xfd" + b"junk" * 100)


async def slowloris(host: str, port: int, seconds: float) -> str:
    """500 connections, each sending one byte of a frame a second."""
    writers = []
    for _ in range(500):
        _reader, writer = await asyncio.open_connection(host, port)
        writer.write(b"\x00")
        writers.append(writer)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for writer in writers:
            writer.write(b"\x00")
        await asyncio.sleep(1)
    for writer in writers:
        writer.close()
    return "500 connections held"


async def connect_storm(host: str, port: int, seconds: float) -> str:
    """5,000 clients connecting at once, each asking ApiVersions."""
    body = request_builder(API_VERSIONS, 3).ApiVersionsRequest(
        client_software_name="storm", client_software_version="1"
    )
    times: list[float] = []

    async def one() -> None:
        start = time.perf_counter()
        shell = await ClientShell.open(host, port, client_id="storm")
        await shell.request(API_VERSIONS, 3, body)
        times.append((time.perf_counter() - start) * 1000)
        await shell.close()

    await asyncio.gather(*(one() for _ in range(5000)), return_exceptions=True)
    times.sort()
    if not times:
        return "no client served"
    p50, p99 = times[len(times) // 2], times[-max(1, len(times) // 100)]
    return f"{len(times)} served, p50 {p50:.0f} ms, p99 {p99:.0f} ms"


def _metadata(topic: str) -> Any:
    b = request_builder(METADATA, 9)
    return b.MetadataRequest(
        topics=(b.MetadataRequestTopic(name=topic),),
        allow_auto_topic_creation=True,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )


async def _produce_raw(host: str, port: int, topic: str, payload: bytes) -> str:
    template = bytearray(build_record_batch([(None, b"x", ())], timestamp_ms=1_700_000_000_000))
    header = template[:61]
    struct.pack_into(">h", header, 21, 4)  # zstd
    forged = header + payload
    struct.pack_into(">i", forged, 8, len(forged) - 12)
    struct.pack_into(">I", forged, 17, compute_crc(forged))
    body = request_builder(PRODUCE, 9).ProduceRequest(**produce_fields(topic, bytes(forged)))
    return await _request(host, port, PRODUCE, 9, body)


CASES: dict[str, Callable[[str, int, float], Awaitable[str]]] = {
    "create-topics-2^31": huge_create_topics,
    "create-partitions-100k": many_create_partitions,
    "pipelined-long-polls": pipelined_long_polls,
    "zstd-bomb-1GiB": zstd_bomb,
    "garbage-compressed": garbage_compressed,
    "slowloris-500": slowloris,
    "connect-storm-5000": connect_storm,
}


async def run_case(name: str, seconds: float, overrides: list[str]) -> None:
    log = Path(tempfile.mkstemp(prefix=f"hostile-{name}-", suffix=".log")[1])
    extra = [arg for override in overrides for arg in ("--override", override)]
    with log.open("w") as stderr:
        broker = BrokerProcess(extra, stderr=stderr, log_level="WARNING")
    host, port_text = broker.bootstrap.split(":")
    port = int(port_text)
    pid = broker.proc.pid
    try:
        start_rss = rss_mb(pid) or 0.0
        peak = start_rss
        probe = Probe(host, port)
        probe.start()
        case = asyncio.get_running_loop().create_task(CASES[name](host, port, seconds))
        while not case.done():
            peak = max(peak, (rss_mb(pid) or 0.0))
            await asyncio.sleep(0.05)
        answer = case.result()
        await asyncio.sleep(1.0)
        after = rss_mb(pid) or 0.0
        await probe.stop()
    finally:
        broker.stop()
    rtts = sorted(probe.rtts) or [float("nan")]
    tracebacks = log.read_text(errors="replace").count("Traceback")
    print(
        f"{name:<24} {answer:<46} RSS +{peak - start_rss:>6.0f} MB peak, "
        f"+{after - start_rss:>5.0f} after | probe max {rtts[-1]:>7.1f} ms "
        f"p99 {rtts[max(0, len(rtts) - 1 - len(rtts) // 100)]:>6.1f} ms "
        f"fails {probe.failures} | tracebacks {tracebacks}"
    )


async def main_async(args: argparse.Namespace) -> None:
    names = list(CASES) if args.cases == "all" else args.cases.split(",")
    for name in names:
        await run_case(name, args.seconds, args.override)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="all", help=f"comma list of: {', '.join(CASES)}")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument(
        "--override", action="append", default=[], help="broker config key=value (repeatable)"
    )
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
