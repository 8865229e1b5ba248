"""When replay tasks start: one shared instant, agreed only once every task is warmed up.

Spark releases a barrier's tasks up to a second after the last one arrives (each polls
once a second), so a start closer than that to the last ready instant made one task
begin its schedule ~0.5 s late. No sleeping here: the fake broker answers at once and
every agreed start lies in the past.
"""

from __future__ import annotations

import asyncio
import struct
import time
from typing import Any

import pytest

from protocol.builders import request_builder, response_builder
from protocol.codec import encode_request, encode_response, parse_request_header
from spark_jobs.replay import BARRIER_RELEASE_S, shared_start_unix_s
from spark_jobs.replay_client import ReplaySchedule, replay_rows

API_VERSIONS = 18


def test_start_is_the_delay_after_the_barrier_can_have_released_the_last_task() -> None:
    ready = [1000.25, 1002.0, 1001.5]
    start = shared_start_unix_s(ready, start_delay_s=0.5)
    assert start == 1002.0 + BARRIER_RELEASE_S + 0.5
    # Every task computes it from the gathered list, in whatever order it arrives.
    assert shared_start_unix_s(reversed(ready), 0.5) == start
    assert shared_start_unix_s(ready, 0.5, barrier_release_s=0.0) == 1002.5


def test_start_is_never_within_a_barrier_poll_of_the_last_ready_task() -> None:
    """The old rule (last ready + delay) gave 0.5 s: less than Spark's 1 s poll."""
    assert shared_start_unix_s([50.0], start_delay_s=0.5) - 50.0 > 1.0


def test_nothing_to_agree_on_is_an_error() -> None:
    with pytest.raises(ValueError):
        shared_start_unix_s([], 0.5)
    with pytest.raises(ValueError):
        shared_start_unix_s([1.0], -0.1)


class _Broker:
    """Answers ApiVersions at once; counts the connections it has accepted."""

    def __init__(self) -> None:
        self.connections = 0
        self.changed = asyncio.Event()

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.changed.set()
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                header, _ = parse_request_header(await reader.readexactly(size))
                answer = response_builder(API_VERSIONS, 0).ApiVersionsResponse(
                    error_code=0, api_keys=()
                )
                writer.write(encode_response(API_VERSIONS, 0, header.correlation_id, answer))
        except asyncio.IncompleteReadError:
            writer.close()

    async def wait_for(self, connections: int) -> None:
        while self.connections < connections:
            self.changed.clear()
            await self.changed.wait()


def _row(connection: str, at_ms: float) -> dict[str, Any]:
    request = request_builder(API_VERSIONS, 0).ApiVersionsRequest()
    frame = encode_request(API_VERSIONS, 0, 7, connection, request)[4:]
    return {
        "broker_id": 0,
        "connection_id": connection,
        "sequence": 0,
        "api_key": API_VERSIONS,
        "api_name": "ApiVersions",
        "api_version": 0,
        "client_id": connection,
        "request": frame,
        "received_unix_us": int(at_ms * 1000),
        "total_time_ms": 0.5,
        "remote_time_ms": 0.0,
        "purgatory": None,
        "purgatory_outcome": None,
    }


async def test_every_connection_is_open_before_the_task_says_it_is_ready() -> None:
    broker = _Broker()
    server = await asyncio.start_server(broker.serve, "127.0.0.1", 0)
    loop = asyncio.get_running_loop()
    rows = [_row("a", 0.0), _row("b", 5.0)]
    schedule = ReplaySchedule(
        addresses={0: server.sockets[0].getsockname()[:2]},
        start_unix_s=time.time(),  # ignored: agree_start decides
        first_received_us=0,
        response_timeout_s=10.0,
    )
    agreed: list[tuple[float, int]] = []
    ago_s = 3600.0

    def agree_start(ready_unix_s: float) -> float:
        # Blocks the replay like a barrier would. Both connections must already be up:
        # had they been left for the schedule, this would wait in vain and time out.
        asyncio.run_coroutine_threadsafe(broker.wait_for(2), loop).result(timeout=10)
        agreed.append((ready_unix_s, broker.connections))
        return ready_unix_s - ago_s  # a start in the past: no waiting

    try:
        results = await asyncio.to_thread(lambda: list(replay_rows(rows, schedule, agree_start)))
    finally:
        server.close()
    assert [count for _, count in agreed] == [2]
    assert broker.connections == 2  # the schedule reused them, opened none of its own
    assert [(r[3], r[12], r[13]) for r in results] == [("a", [0], None), ("b", [0], None)]
    # The schedule runs from the agreed start, not from the schedule's own start_unix_s.
    assert all(r[10] >= ago_s * 1000.0 for r in results)


def test_a_task_without_rows_still_takes_part_in_the_agreement() -> None:
    """Every barrier task must call allGather, or the others wait for ever."""
    calls: list[float] = []

    def agree_start(ready_unix_s: float) -> float:
        calls.append(ready_unix_s)
        return ready_unix_s

    schedule = ReplaySchedule(addresses={}, start_unix_s=0.0, first_received_us=0)
    assert list(replay_rows([], schedule, agree_start)) == []
    assert len(calls) == 1
