"""A million fuzzed frames against a broker process: crashes, hangs, tracebacks, memory.

The generator is the test kit's (``testkit/fuzz_frames.py``: every advertised
API and version, well formed then mutated, seeded); here it runs at scale against
``python -m minikafka serve`` in a child process, over ``--connections`` raw TCP
connections at once. Each frame is followed by an ApiVersions probe; a probe neither
answered nor refused (closed connection) within ``--hang-s`` is a hang. At the end it
prints the outcome counts, frames/s, the broker's RSS at start and end, the tracebacks
in its log (``Traceback`` lines), whether it is still alive and answers a fresh client::

    .venv/bin/python -m bench.hostile.fuzz_bench [--frames 1000000] [--connections 8] [--seed 1]
"""

from __future__ import annotations

import argparse
import asyncio
import struct
import tempfile
import time
from collections import Counter
from pathlib import Path

from bench.lib.rss import rss_mb
from client_io import ClientShell
from protocol.api_registry import ApiSpec
from protocol.builders import request_builder
from protocol.client import ClientConnection
from testkit.broker_process import BrokerProcess
from testkit.fuzz_frames import fuzzed

API_VERSIONS = 18
PROBE_ID = 0x7FFF_FFF0


def _probe() -> bytes:
    body = request_builder(API_VERSIONS, 3).ApiVersionsRequest(
        client_software_name="fuzz", client_software_version="1"
    )
    frame = bytearray(ClientConnection("fuzz").send(API_VERSIONS, 3, body).data)
    struct.pack_into(">i", frame, 8, PROBE_ID)
    return bytes(frame)


async def _advertised(host: str, port: int) -> list[ApiSpec]:
    shell = await ClientShell.open(host, port, client_id="fuzz")
    body = request_builder(API_VERSIONS, 3).ApiVersionsRequest(
        client_software_name="fuzz", client_software_version="1"
    )
    answer = (await shell.request(API_VERSIONS, 3, body)).body
    await shell.close()
    return [
        ApiSpec(int(k.api_key), str(k.api_key), int(k.min_version), int(k.max_version))
        for k in answer.api_keys  # type: ignore[attr-defined]
    ]


async def _worker(
    host: str,
    port: int,
    frames: list[tuple[str, bytes]],
    probe: bytes,
    hang_s: float,
    outcomes: Counter[str],
) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    for how, frame in frames:
        if how == "length_lie":  # the broker rightly waits for the promised bytes
            writer.write(frame)
            writer.close()
            outcomes[f"{how}:abandoned"] += 1
            reader, writer = await asyncio.open_connection(host, port)
            continue
        writer.write(frame + probe)
        try:
            alive = await asyncio.wait_for(_until_probe(reader), hang_s)
        except TimeoutError:
            outcomes["HANG"] += 1
            alive = False
        outcomes[f"{how}:{'answered' if alive else 'closed'}"] += 1
        if not alive:
            writer.close()
            reader, writer = await asyncio.open_connection(host, port)
    writer.close()


async def _until_probe(reader: asyncio.StreamReader) -> bool:
    while True:
        try:
            (size,) = struct.unpack(">i", await reader.readexactly(4))
            payload = await reader.readexactly(size)
        except (asyncio.IncompleteReadError, ConnectionError):
            return False
        if struct.unpack_from(">i", payload, 0)[0] == PROBE_ID:
            return True


async def run(args: argparse.Namespace) -> None:
    log = Path(tempfile.mkstemp(prefix="fuzz-broker-", suffix=".log")[1])
    with log.open("w") as stderr:
        broker = BrokerProcess(
            ["--override", f"socket.request.max.bytes={1 << 20}"],
            stderr=stderr,
            log_level="WARNING",
        )
    host, port_text = broker.bootstrap.split(":")
    port = int(port_text)
    pid = broker.proc.pid
    try:
        specs = await _advertised(host, port)
        probe = _probe()
        rss_start = rss_mb(pid) or 0.0
        outcomes: Counter[str] = Counter()
        start = time.perf_counter()
        done = 0
        chunk = 20_000
        while done < args.frames:
            n = min(chunk, args.frames - done)
            frames = list(fuzzed(specs, args.seed * 1_000_003 + done, n))
            share = [frames[i :: args.connections] for i in range(args.connections)]
            await asyncio.gather(
                *(_worker(host, port, s, probe, args.hang_s, outcomes) for s in share)
            )
            done += n
            rate = done / (time.perf_counter() - start)
            print(f"{done} frames, {rate:.0f}/s, RSS {(rss_mb(pid) or 0.0):.0f} MB", flush=True)
        elapsed = time.perf_counter() - start
        rss_end = rss_mb(pid) or 0.0
        alive = broker.proc.poll() is None
        fresh = bool(await asyncio.wait_for(_advertised(host, port), 10)) if alive else False
    finally:
        code = broker.stop()
    tracebacks = log.read_text(errors="replace").count("Traceback")
    print(f"frames: {args.frames} in {elapsed:.0f} s ({args.frames / elapsed:.0f}/s)")
    print(f"hangs: {outcomes['HANG']}, tracebacks in the broker log: {tracebacks}")
    print(f"broker alive at the end: {alive}, answers a fresh client: {fresh}, exit {code}")
    print(f"broker RSS: {rss_start:.0f} MB at start, {rss_end:.0f} MB at the end")
    for key, count in sorted(outcomes.items()):
        print(f"  {key:<28} {count}")
    print(f"broker log: {log}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=1_000_000)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--hang-s", type=float, default=10.0)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
