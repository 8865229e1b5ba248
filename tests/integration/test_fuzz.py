"""Fuzzed requests for every advertised API and version: the broker stays up and sane.

Seeded and bounded (``FRAMES`` frames, a few seconds): each mutated frame goes to the
broker on a raw connection followed by an ApiVersions probe; the probe's answer (or the
connection's close) must come within ``HANG_S``. At the end the broker answers a fresh
client, logged no traceback, and its memory grew by less than ``MAX_GROWTH_MB``.
``bench/hostile/fuzz_bench.py`` runs the same generator for a million frames.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import struct
from collections import Counter

import pytest

from broker.app import MiniKafka
from protocol.builders import request_builder
from protocol.client import ClientConnection
from testkit.fuzz_frames import fuzzed
from testkit.raw_client import RawClient
from tests.integration.conftest import running_cluster

FRAMES = 4000
SEED = 20261122
HANG_S = 5.0
MAX_GROWTH_MB = 300
API_VERSIONS = 18
PROBE_CORRELATION_ID = 0x7FFF_FFF0


def _probe() -> bytes:
    body = request_builder(API_VERSIONS, 3).ApiVersionsRequest(
        client_software_name="fuzz", client_software_version="1"
    )
    frame = bytearray(ClientConnection("fuzz").send(API_VERSIONS, 3, body).data)
    struct.pack_into(">i", frame, 8, PROBE_CORRELATION_ID)
    return bytes(frame)


async def _exchange(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, frame: bytes, probe: bytes
) -> bool:
    """Send ``frame`` then the probe; True when the probe was answered (the connection
    lives on), False when the broker closed the connection."""
    writer.write(frame + probe)
    while True:
        try:
            size_bytes = await reader.readexactly(4)
            (size,) = struct.unpack(">i", size_bytes)
            payload = await reader.readexactly(size)
        except (asyncio.IncompleteReadError, ConnectionError):
            return False
        if struct.unpack_from(">i", payload, 0)[0] == PROBE_CORRELATION_ID:
            return True


def _rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize() / 2**20


@pytest.mark.timeout(120)
async def test_fuzzed_frames_for_every_api_and_version(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    async with running_cluster(1, **{"socket.request.max.bytes": str(1 << 20)}) as app:
        specs = list(app.brokers[0].services.api_specs)
        probe = _probe()
        host, port = app.bootstrap.split(":")
        outcomes: Counter[str] = Counter()
        rss_start = _rss_mb()
        reader, writer = await asyncio.open_connection(host, int(port))
        for how, frame in fuzzed(specs, SEED, FRAMES):
            if how == "length_lie":
                # A prefix promising more bytes than come: the broker waits for them (as
                # Kafka does, until connections.max.idle.ms); the client gives up.
                writer.write(frame)
                outcomes[f"{how}:abandoned"] += 1
                writer.close()
                reader, writer = await asyncio.open_connection(host, int(port))
                continue
            alive = await asyncio.wait_for(_exchange(reader, writer, frame, probe), HANG_S)
            outcomes[f"{how}:{'answered' if alive else 'closed'}"] += 1
            if not alive:
                writer.close()
                reader, writer = await asyncio.open_connection(host, int(port))
        writer.close()
        growth = _rss_mb() - rss_start
        await _a_fresh_client_is_served(app)
    tracebacks = [r for r in caplog.records if r.exc_info is not None or r.levelno >= 40]
    assert tracebacks == [], [r.getMessage() for r in tracebacks[:5]]
    assert growth < MAX_GROWTH_MB
    assert sum(outcomes.values()) == FRAMES
    # Both fates happen: the fuzz reaches handlers, not only the frame decoder.
    assert any(k.endswith(":answered") and not k.startswith("intact") for k in outcomes)
    assert any(k.endswith(":closed") for k in outcomes)


async def _a_fresh_client_is_served(app: MiniKafka) -> None:
    client = await RawClient.connect(app.bootstrap, timeout_s=5.0, client_id="after-fuzz")
    try:
        answer = await client.request(
            API_VERSIONS,
            3,
            "ApiVersionsRequest",
            client_software_name="t",
            client_software_version="1",
        )
    finally:
        await client.close()
    assert int(answer.error_code) == 0
