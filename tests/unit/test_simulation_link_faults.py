"""Clogs (FoundationDB's swizzle) and holds (turmoil's) on the in-memory network: nothing is
lost, nothing overtakes, nothing arrives while a link is stopped."""

from __future__ import annotations

import asyncio
import random

from virtual_time.loop import run_simulated
from virtual_time.network import LatencyModel, client_node

SENDERS = ("node-a", "node-b", "node-c")


async def _sink(received: list[tuple[float, bytes]]) -> int:
    loop = asyncio.get_running_loop()

    class Sink(asyncio.Protocol):
        def data_received(self, data: bytes) -> None:
            received.append((loop.time(), data))

    server = await loop.create_server(Sink, "127.0.0.1", 0)
    port = int(server.sockets[0].getsockname()[1])
    loop.network.name_port(port, "server")  # type: ignore[attr-defined]
    return port


async def _writers(port: int) -> dict[str, asyncio.StreamWriter]:
    writers = {}
    for node in SENDERS:
        with client_node(node):
            _, writers[node] = await asyncio.open_connection("127.0.0.1", port)
    return writers


def test_swizzled_links_deliver_nothing_while_clogged_then_everything_in_order() -> None:
    """Clog three links one by one, write on each throughout, unclog in another order: while
    a link is clogged nothing of it arrives; after, all of it, in the order written."""

    async def swizzle() -> tuple[list[tuple[float, bytes]], dict[str, tuple[float, float]]]:
        loop = asyncio.get_running_loop()
        network = loop.network  # type: ignore[attr-defined]
        received: list[tuple[float, bytes]] = []
        writers = await _writers(await _sink(received))
        clogged: dict[str, tuple[float, float]] = {}

        async def chatter() -> None:
            for i in range(40):
                for node, writer in writers.items():
                    writer.write(b"%s:%02d;" % (node[-1:].encode(), i))
                await asyncio.sleep(0.25)

        talking = asyncio.ensure_future(chatter())
        for node in SENDERS:  # clog one by one
            await asyncio.sleep(1)
            network.cut(node, "server")
            clogged[node] = (loop.time(), 0.0)
        order = list(SENDERS)
        random.Random(3).shuffle(order)
        assert order != list(SENDERS)
        for node in order:  # unclog in another order
            await asyncio.sleep(1)
            network.heal(node, "server")
            clogged[node] = (clogged[node][0], loop.time())
        await talking
        await asyncio.sleep(1)
        return received, clogged

    received, clogged = run_simulated(swizzle(), seed=12, latency=LatencyModel(0.001, 0.01))
    for node in SENDERS:
        tag = node[-1:].encode()
        mine = [(t, chunk) for t, chunk in received if chunk.startswith(tag)]
        start, end = clogged[node]
        assert not [t for t, _ in mine if start + 0.02 < t < end]  # silent while clogged
        assert b"".join(chunk for _, chunk in mine) == b"".join(
            b"%s:%02d;" % (tag, i) for i in range(40)
        )


def test_a_hold_takes_what_is_on_the_wire_and_a_release_lets_it_all_go_at_once() -> None:
    async def hold() -> tuple[list[tuple[float, bytes]], float, float]:
        loop = asyncio.get_running_loop()
        network = loop.network  # type: ignore[attr-defined]
        received: list[tuple[float, bytes]] = []
        writers = await _writers(await _sink(received))
        held = writers["node-a"]
        held.write(b"on-the-wire;")  # sent, not yet delivered when the hold starts
        network.hold_between("server", "node-a")
        for i in range(5):
            held.write(b"held-%d;" % i)
            writers["node-b"].write(b"free-%d;" % i)
            await asyncio.sleep(1)
        released_at = loop.time()
        network.release_between("node-a", "server")
        await asyncio.sleep(1)
        return received, released_at, loop.time()

    received, released_at, _ = run_simulated(hold(), seed=4, latency=LatencyModel(0.05, 0.05))
    from_a = [(t, chunk) for t, chunk in received if not chunk.startswith(b"free")]
    assert b"".join(c for _, c in from_a) == b"on-the-wire;" + b"".join(
        b"held-%d;" % i for i in range(5)
    )
    arrivals = {t for t, _ in from_a}
    assert len(arrivals) == 1 and arrivals.pop() > released_at  # one burst, after the release
    free = [t for t, chunk in received if chunk.startswith(b"free")]
    assert len(free) == 5 and max(free) < released_at  # the other link was never held


def test_a_released_hold_still_waits_for_a_cut_on_the_same_link() -> None:
    async def both() -> tuple[bytes, bytes]:
        loop = asyncio.get_running_loop()
        network = loop.network  # type: ignore[attr-defined]
        received: list[tuple[float, bytes]] = []
        writers = await _writers(await _sink(received))
        network.hold_between("node-a", "server")
        network.cut("node-a", "server")
        writers["node-a"].write(b"x")
        network.release_between("node-a", "server")
        await asyncio.sleep(1)
        while_cut = b"".join(c for _, c in received)
        network.heal("node-a", "server")
        await asyncio.sleep(1)
        return while_cut, b"".join(c for _, c in received)

    assert run_simulated(both(), seed=5) == (b"", b"x")
