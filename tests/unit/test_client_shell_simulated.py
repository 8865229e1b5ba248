"""`client_io.ClientShell` on the simulated network: it only calls the running loop's
``create_connection`` (through ``asyncio.open_connection``), so on a `SimulatedEventLoop` it
reaches a simulated broker with no socket and no real time."""

from __future__ import annotations

import asyncio

from broker.app import MiniKafka
from client_io import ClientShell
from protocol.builders import request_builder
from testkit.requests import API_VERSIONS_FIELDS, METADATA, METADATA_V, metadata_fields
from virtual_time.loop import SimulatedEventLoop, run_simulated

API_VERSIONS = 18


async def _both_ways() -> tuple[list[int], float]:
    loop = asyncio.get_running_loop()
    assert isinstance(loop, SimulatedEventLoop)
    app = MiniKafka(brokers=1, port=0)
    await app.start()
    try:
        shell = await ClientShell.open("127.0.0.1", app.brokers[0].port, client_id="sim")
        # named by the simulated transport's addresses, as a replay's rows need
        assert shell.name == f"127.0.0.1:{app.brokers[0].port}-127.0.0.1:50000"
        versions = request_builder(API_VERSIONS, 3).ApiVersionsRequest(**API_VERSIONS_FIELDS)
        answer = await shell.request(API_VERSIONS, 3, versions)
        ids = [answer.correlation_id]
        metadata = request_builder(METADATA, METADATA_V).MetadataRequest(**metadata_fields())
        futures = [await shell.submit(METADATA, METADATA_V, metadata) for _ in range(5)]
        ids += [(await f).correlation_id for f in futures if f is not None]
        await shell.close()
        return ids, loop.time()
    finally:
        await app.stop()


def test_one_at_a_time_and_pipelined_over_the_simulated_network() -> None:
    ids, virtual_s = run_simulated(_both_ways(), seed=5)
    assert ids == [0, 1, 2, 3, 4, 5]
    assert virtual_s > 0  # the network's latency passed on the virtual clock
