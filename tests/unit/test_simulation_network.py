"""The in-memory network: streams over it keep TCP's order, refusals, pauses and faults."""

from __future__ import annotations

import asyncio

import pytest

from broker.simulation.loop import run_simulated
from broker.simulation.network import LatencyModel, client_node


async def _echo_server() -> int:
    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(1000):
            writer.write(data)
        writer.close()

    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    return int(server.sockets[0].getsockname()[1])


def test_bytes_arrive_in_order_whatever_latency_each_write_draws() -> None:
    async def stream() -> bytes:
        port = await _echo_server()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        for i in range(200):
            writer.write(b"%03d," % i)
        received = await reader.readexactly(800)
        writer.close()
        return received

    jittery = LatencyModel(base_s=0.001, jitter_s=0.01)
    received = run_simulated(stream(), seed=5, latency=jittery)
    assert received == b"".join(b"%03d," % i for i in range(200))


def test_a_round_trip_takes_the_latency_in_virtual_time() -> None:
    async def round_trip() -> float:
        loop = asyncio.get_running_loop()
        port = await _echo_server()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        started = loop.time()
        writer.write(b"ping")
        await reader.readexactly(4)
        writer.close()
        return loop.time() - started

    fixed = LatencyModel(base_s=0.005, jitter_s=0.0)
    assert run_simulated(round_trip(), seed=1, latency=fixed) == pytest.approx(0.010)


def test_nobody_listening_refuses_the_connection() -> None:
    async def connect() -> None:
        await asyncio.open_connection("127.0.0.1", 1)

    with pytest.raises(ConnectionRefusedError):
        run_simulated(connect(), seed=1)


def test_a_paused_reader_gets_what_arrived_when_it_resumes() -> None:
    async def paused() -> tuple[int, bytes]:
        accepted: list[asyncio.Transport] = []
        received: list[bytes] = []

        class Holder(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                assert isinstance(transport, asyncio.Transport)
                transport.pause_reading()
                accepted.append(transport)

            def data_received(self, data: bytes) -> None:
                received.append(data)

        server = await asyncio.get_running_loop().create_server(Holder, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"abc")
        writer.write(b"def")
        await asyncio.sleep(1)
        while_paused = len(received)
        accepted[0].resume_reading()
        await asyncio.sleep(0)
        return while_paused, b"".join(received)

    assert run_simulated(paused(), seed=2) == (0, b"abcdef")


def test_a_held_listener_delivers_late_not_never() -> None:
    async def partitioned() -> tuple[bool, bytes, float]:
        loop = asyncio.get_running_loop()
        port = await _echo_server()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        loop.network.hold(port)  # type: ignore[attr-defined]
        writer.write(b"through the partition")
        try:
            await asyncio.wait_for(reader.read(100), timeout=30)
            answered_while_held = True
        except TimeoutError:
            answered_while_held = False
        loop.network.release(port)  # type: ignore[attr-defined]
        echoed = await reader.read(100)
        return answered_while_held, echoed, loop.time()

    answered, echoed, finished = run_simulated(partitioned(), seed=3)
    assert not answered
    assert echoed == b"through the partition"
    assert finished > 30


def test_a_reset_reaches_the_client_as_a_closed_stream() -> None:
    async def reset() -> bytes:
        loop = asyncio.get_running_loop()
        port = await _echo_server()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"x")
        await reader.readexactly(1)
        loop.network.reset_connections(port)  # type: ignore[attr-defined]
        try:
            return await reader.read(100)
        except ConnectionResetError:
            return b"reset"

    assert run_simulated(reset(), seed=4) == b"reset"


def test_an_isolated_client_is_cut_off_and_others_are_not() -> None:
    async def isolated() -> tuple[bool, bytes, bytes]:
        loop = asyncio.get_running_loop()
        port = await _echo_server()
        with client_node("frozen"):
            frozen_reader, frozen_writer = await asyncio.open_connection("127.0.0.1", port)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        loop.network.isolate("frozen")  # type: ignore[attr-defined]
        frozen_writer.write(b"lost?")
        writer.write(b"fine")
        other = await reader.readexactly(4)
        try:
            await asyncio.wait_for(frozen_reader.read(100), timeout=10)
            answered = True
        except TimeoutError:
            answered = False
        loop.network.rejoin("frozen")  # type: ignore[attr-defined]
        return answered, other, await frozen_reader.read(100)

    assert run_simulated(isolated(), seed=9) == (False, b"fine", b"lost?")
