"""`client_io.ClientShell` against a real broker over TCP: one at a time, pipelined, and
what a broker closing the connection does to requests in flight.

TLS is the same code with an ``SSLContext`` passed through (the followers' `LeaderEndpoint`
over an SSL inter-broker listener: tests/integration/test_security_inter_broker.py); the
simulated network is tests/unit/test_client_shell_simulated.py.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import pytest

from broker.app import MiniKafka
from client_io import ClientShell, PeerClosed
from protocol.builders import request_builder
from testkit.polling import wait_until
from testkit.requests import (
    API_VERSIONS_FIELDS,
    METADATA,
    METADATA_V,
    PRODUCE,
    PRODUCE_V,
    batch,
    metadata_fields,
    produce_fields,
)

API_VERSIONS = 18
TIMEOUT_S = 60  # generous: the machine is shared


def _api_versions() -> Any:
    return request_builder(API_VERSIONS, 3).ApiVersionsRequest(**API_VERSIONS_FIELDS)


async def _open(app: MiniKafka) -> ClientShell:
    host, port = app.bootstrap.split(",")[0].rsplit(":", 1)
    return await ClientShell.open(host, int(port), client_id="shell-test", timeout_s=TIMEOUT_S)


async def test_one_at_a_time_then_pipelined_answers_in_request_order(kafka: MiniKafka) -> None:
    shell = await _open(kafka)
    try:
        first = await shell.request(API_VERSIONS, 3, _api_versions(), timeout_s=TIMEOUT_S)
        assert first.correlation_id == 0 and int(first.body.error_code) == 0  # type: ignore[attr-defined]
        metadata = request_builder(METADATA, METADATA_V).MetadataRequest(**metadata_fields())
        futures = [await shell.submit(METADATA, METADATA_V, metadata) for _ in range(20)]
        async with asyncio.timeout(TIMEOUT_S):
            answers = [await f for f in futures if f is not None]
        assert [a.correlation_id for a in answers] == list(range(1, 21))
        assert all(len(a.body.brokers) == 1 for a in answers)  # type: ignore[attr-defined]
    finally:
        await shell.close()
    assert shell.closed


async def test_an_acks0_produce_has_no_future_and_later_answers_still_pair(
    kafka: MiniKafka,
) -> None:
    kafka.cluster.create_topic("shell", 1, 1, kafka.config.default_topic_configs())
    shell = await _open(kafka)
    try:
        produce = request_builder(PRODUCE, PRODUCE_V).ProduceRequest(
            **produce_fields("shell", batch(), acks=0)
        )
        assert await shell.submit(PRODUCE, PRODUCE_V, produce) is None
        after = await shell.submit(API_VERSIONS, 3, _api_versions())
        assert after is not None
        async with asyncio.timeout(TIMEOUT_S):
            answer = await after
        assert answer.correlation_id == 1 and shell.client.in_flight == 0
    finally:
        await shell.close()


async def test_a_broker_that_closes_fails_the_requests_in_flight(kafka: MiniKafka) -> None:
    shell = await _open(kafka)
    try:
        answered = await shell.submit(API_VERSIONS, 3, _api_versions())
        assert answered is not None
        async with asyncio.timeout(TIMEOUT_S):
            await answered  # the reader task runs
            # A length prefix past socket.request.max.bytes: the broker closes the
            # connection (with a reset when our next request is still unread), so the
            # request behind it is never answered.
            shell.write(struct.pack(">i", 0x7FFF_FFFF))
            with pytest.raises(ConnectionError):
                pending = await shell.submit(API_VERSIONS, 3, _api_versions())
                assert pending is not None
                await pending
        assert shell.closed
    finally:
        await shell.close()


async def test_one_at_a_time_sees_the_close_as_a_connection_error(kafka: MiniKafka) -> None:
    shell = await _open(kafka)
    try:
        shell.write(struct.pack(">i", 0x7FFF_FFFF))
        with pytest.raises(ConnectionError):
            await shell.request(API_VERSIONS, 3, _api_versions(), timeout_s=TIMEOUT_S)
        assert shell.closed
    finally:
        await shell.close()


async def test_end_of_file_is_peer_closed(kafka: MiniKafka) -> None:
    """Nothing unread on the broker's side: a clean close, seen as `PeerClosed`."""
    shell = await _open(kafka)
    try:
        shell.write(struct.pack(">i", 0x7FFF_FFFF))
        await shell.drain()
        with pytest.raises(PeerClosed):
            await shell.read_responses(TIMEOUT_S)
    finally:
        await shell.close()


class _Arrivals:
    def __init__(self) -> None:
        self.ids: list[int] = []
        self.lost: list[ConnectionError] = []

    def on_response(self, response: Any) -> None:
        self.ids.append(response.correlation_id)

    def on_connection_lost(self, error: ConnectionError) -> None:
        self.lost.append(error)


async def test_a_handler_sees_every_response_and_the_modes_do_not_mix(kafka: MiniKafka) -> None:
    kafka.cluster.create_topic("shell", 1, 1, kafka.config.default_topic_configs())
    shell = await _open(kafka)
    try:
        produce = request_builder(PRODUCE, PRODUCE_V).ProduceRequest(
            **produce_fields("shell", batch(), acks=0)
        )
        with pytest.raises(ValueError, match="acks=0"):
            await shell.request(PRODUCE, PRODUCE_V, produce)  # sent, never answered
        arrivals = _Arrivals()
        shell.start_reading(arrivals)
        for _ in range(3):
            shell.send(API_VERSIONS, 3, _api_versions())
        await shell.drain()
        with pytest.raises(RuntimeError):
            await shell.submit(API_VERSIONS, 3, _api_versions())
        with pytest.raises(RuntimeError):
            await shell.read_responses(TIMEOUT_S)
        await wait_until(lambda: len(arrivals.ids) >= 3, "three answers", step_s=0.01)
        assert arrivals.ids == [1, 2, 3] and not arrivals.lost
    finally:
        await shell.close()
    assert not arrivals.lost  # closing it ourselves is not news to the handler
