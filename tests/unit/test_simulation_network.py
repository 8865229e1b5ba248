"""The in-memory network: streams over it keep TCP's order, refusals, pauses and faults."""

from __future__ import annotations

import asyncio
import struct

import pytest

from virtual_time.loop import run_simulated
from virtual_time.network import RTO_S, LatencyModel, client_node


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


def test_a_reset_held_for_an_isolated_client_reaches_it_when_it_rejoins() -> None:
    """A broker dies while a client is isolated: the close waits on the link like any other
    message and arrives when the client rejoins -- it used to be dropped with the dead
    side's links, leaving the client a connection nobody answers (issue 33: aiokafka's
    zombie member then waited out its 40 s request timeout)."""

    async def reset_while_isolated() -> bytes:
        loop = asyncio.get_running_loop()
        port = await _echo_server()
        with client_node("frozen"):
            reader, _writer = await asyncio.open_connection("127.0.0.1", port)
        loop.network.isolate("frozen")  # type: ignore[attr-defined]
        loop.network.reset_connections(port)  # type: ignore[attr-defined]
        await asyncio.sleep(1)
        loop.network.rejoin("frozen")  # type: ignore[attr-defined]
        try:
            return await asyncio.wait_for(reader.read(100), timeout=10)
        except ConnectionResetError:
            return b"reset"
        except TimeoutError:
            return b"never told"

    assert run_simulated(reset_while_isolated(), seed=4) == b"reset"


def _kafka_frame(client_id: str) -> bytes:
    """A request frame's first bytes: size, api key, version, correlation id, client id."""
    name = client_id.encode()
    body = struct.pack(">hhih", 18, 3, 0, len(name)) + name
    return struct.pack(">i", len(body)) + body


def test_bandwidth_makes_a_large_write_hold_up_what_follows() -> None:
    async def transfer() -> tuple[float, float]:
        loop = asyncio.get_running_loop()
        port = await _echo_server()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        started = loop.time()
        writer.write(b"x" * 1000)
        writer.write(b"!")
        await reader.readexactly(1001)
        return started, loop.time()

    slow = LatencyModel(base_s=0.001, jitter_s=0.0, bandwidth_bytes_per_s=1000.0)
    started, done = run_simulated(transfer(), seed=2, latency=slow)
    # 1001 bytes each way at 1000 B/s: two seconds, plus the two latencies.
    assert done - started == pytest.approx(2.002 + 0.002, abs=1e-3)


def test_a_one_way_cut_holds_one_direction_only() -> None:
    async def one_way() -> tuple[bool, bytes, bytes]:
        loop = asyncio.get_running_loop()
        network = loop.network  # type: ignore[attr-defined]
        received: list[bytes] = []

        class Sink(asyncio.Protocol):
            def data_received(self, data: bytes) -> None:
                received.append(data)

        server = await loop.create_server(Sink, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        network.name_port(port, "broker-0")
        network.cut("broker-1", "broker-0")
        with client_node("broker-1"):
            _, cut_writer = await asyncio.open_connection("127.0.0.1", port)
        with client_node("app"):
            _, app_writer = await asyncio.open_connection("127.0.0.1", port)
        cut_writer.write(b"held")
        app_writer.write(b"free")
        await asyncio.sleep(5)
        delivered_while_cut = b"held" in received
        network.heal("broker-1", "broker-0")
        await asyncio.sleep(1)
        return delivered_while_cut, b"".join(sorted(received)), b""

    assert run_simulated(one_way(), seed=6) == (False, b"freeheld", b"")


def test_a_connection_is_named_by_its_first_client_id() -> None:
    async def named() -> tuple[bool, bool]:
        loop = asyncio.get_running_loop()
        network = loop.network  # type: ignore[attr-defined]
        port = await _echo_server()
        network.name_port(port, "broker-0")
        network.name_client_ids(lambda cid: "broker-2" if cid == "replica-fetcher-2" else None)
        network.cut("broker-0", "broker-2")  # the answers to broker 2 wait
        follower_reader, follower_writer = await asyncio.open_connection("127.0.0.1", port)
        client_reader, client_writer = await asyncio.open_connection("127.0.0.1", port)
        follower_writer.write(_kafka_frame("replica-fetcher-2"))
        client_writer.write(_kafka_frame("aiokafka-1"))
        client_answered = bool(await client_reader.read(100))
        try:
            await asyncio.wait_for(follower_reader.read(100), timeout=5)
            follower_answered = True
        except TimeoutError:
            follower_answered = False
        return client_answered, follower_answered

    assert run_simulated(named(), seed=8) == (True, False)


def test_a_lossy_link_delivers_late_in_order() -> None:
    async def lossy() -> tuple[bytes, float]:
        loop = asyncio.get_running_loop()
        port = await _echo_server()
        loop.network.faults(port).loss_rate = 0.5  # type: ignore[attr-defined]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        started = loop.time()
        for i in range(20):
            writer.write(b"%02d" % i)
        received = await reader.readexactly(40)
        return received, loop.time() - started

    received, took = run_simulated(lossy(), seed=11)
    assert received == b"".join(b"%02d" % i for i in range(20))
    assert took >= RTO_S  # some message was retransmitted
