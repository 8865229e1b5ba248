"""Kafka 4.4's decoder limits against ``minikafka serve``: frames that claim billions of
array elements, that really carry a million and one, or that carry ten thousand and one
tagged fields close their connection, and the broker's memory stays flat while they
come, again and again.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from protocol.body_guards import MAX_ARRAY_ELEMENTS, MAX_TAGGED_FIELDS
from protocol.varint import uvarint
from testkit.broker_process import BrokerProcess
from testkit.raw_client import RawClient

LIST_CONFIG_RESOURCES = 74
ROUNDS = 10
#: What the broker's resident memory may grow by over every round (each frame is read
#: whole, the largest is 1 MB; kio reserving 2**31-1 elements would be 16 GiB).
RSS_SLACK_BYTES = 48 * 2**20


def _frame(body: bytes) -> bytes:
    """A framed ListConfigResources v1 request (header v2, no client id) with ``body``."""
    payload = (
        LIST_CONFIG_RESOURCES.to_bytes(2, "big")
        + (1).to_bytes(2, "big")
        + (1).to_bytes(4, "big")
        + b"\xff\xff\x00"
        + body
    )
    return len(payload).to_bytes(4, "big") + payload


HOSTILE = {
    "claims 2**31-1 elements": _frame(uvarint(2**31) + b"\x00"),
    "carries 1000001 elements": _frame(
        uvarint(MAX_ARRAY_ELEMENTS + 2) + b"\x02" * (MAX_ARRAY_ELEMENTS + 1) + b"\x00"
    ),
    "carries 10001 tagged fields": _frame(
        b"\x01"
        + uvarint(MAX_TAGGED_FIELDS + 1)
        + b"".join(uvarint(i) + b"\x00" for i in range(MAX_TAGGED_FIELDS + 1))
    ),
}


def _rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


async def _closed_by(bootstrap: str, frame: bytes) -> bool:
    client = await RawClient.connect(bootstrap, timeout_s=10.0, client_id="limits")
    try:
        client.write(frame)
        return await client.closed_by_broker()
    finally:
        await client.close()


async def _served(bootstrap: str) -> bool:
    client = await RawClient.connect(bootstrap, timeout_s=10.0, client_id="limits")
    try:
        answer = await client.request(
            LIST_CONFIG_RESOURCES, 1, "ListConfigResourcesRequest", resource_types=(4,)
        )
        return [r.resource_name for r in answer.config_resources] == ["0"]
    finally:
        await client.close()


def test_frames_over_the_decoder_limits_close_and_memory_stays_flat(
    broker_process: type[BrokerProcess],
) -> None:
    proc = broker_process([])

    async def attack() -> tuple[list[str], int, int]:
        assert await _served(proc.bootstrap)
        before = _rss_bytes(proc.proc.pid)
        kept_open = []
        for _ in range(ROUNDS):
            for name, frame in HOSTILE.items():
                if not await _closed_by(proc.bootstrap, frame):
                    kept_open.append(name)
        assert await _served(proc.bootstrap)
        return kept_open, before, _rss_bytes(proc.proc.pid)

    kept_open, before, after = asyncio.run(attack())
    assert kept_open == []
    assert proc.proc.poll() is None, "the broker process died"
    print(f"broker RSS before {before // 2**20} MiB, after {after // 2**20} MiB")
    assert after - before < RSS_SLACK_BYTES, (before, after)
