"""A simulated broker's request handlers: service times from the model, and the queue.

In virtual time a request costs its broker the modelled service time on one of its
``num.io.threads`` handlers; requests that find every handler busy wait, and the wait is
their request-queue time in Kafka's breakdown. Real time is untouched (no pool).
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from broker.app import MiniKafka
from broker.config.broker_config import BrokerConfig
from broker.server.context import RequestContext
from broker.server.request_timing import RequestClock
from protocol.capture_files import CaptureWriter
from protocol.service_times import ServiceTimeModel
from simulation.request_handlers import SimulatedRequestHandlers, load_service_times
from testkit.raw_client import RawClient
from testkit.requests import API_VERSIONS_FIELDS, FETCH, FETCH_V, fetch_fields
from tests.helpers.captures import make_request
from virtual_time.loop import run_simulated
from virtual_time.network import LatencyModel

API_VERSIONS = 18
MS = 1_000_000
#: One latency for every write, so that requests written together arrive together.
FIXED = LatencyModel(base_s=0.0002, jitter_s=0.0)


def _model(service_ms: float) -> ServiceTimeModel:
    return ServiceTimeModel.from_table({"entries": [], "default": {"service_ms": service_ms}})


def test_requests_take_the_earliest_free_handler_in_arrival_order() -> None:
    pool = SimulatedRequestHandlers(2, _model(1.0), random.Random(0))
    assert [pool.occupy(API_VERSIONS, 10, 0) for _ in range(3)] == [
        (0, 1 * MS),
        (0, 1 * MS),
        (1 * MS, 2 * MS),
    ]
    assert pool.busy(1 * MS - 1) == 2 and pool.busy(1 * MS) == 1
    assert pool.occupy(API_VERSIONS, 10, 5 * MS) == (5 * MS, 6 * MS)  # idle handlers wait for none


def test_service_times_are_drawn_from_the_seed() -> None:
    spread = ServiceTimeModel.from_table(
        {"entries": [{"api": "ApiVersions", "quantiles_ms": [0.0, 1.0, 10.0]}]}
    )

    def draws(seed: int) -> list[tuple[int, int]]:
        pool = SimulatedRequestHandlers(1, spread, random.Random(seed))
        return [pool.occupy(API_VERSIONS, 10, 100 * MS * i) for i in range(20)]

    assert draws(1) == draws(1) != draws(2)


def test_a_pool_needs_a_handler() -> None:
    with pytest.raises(ValueError, match=r"num\.io\.threads"):
        SimulatedRequestHandlers(0, _model(1.0), random.Random(0))


class _Breakdowns:
    """An observer keeping each completed request's breakdown (ms)."""

    def __init__(self) -> None:
        self.seen: list[dict[str, float]] = []

    def request_received(self, ctx: RequestContext, request: Any, frame: bytes) -> None:
        pass

    def request_completed(self, ctx: RequestContext, response: Any, size: int) -> None:
        if ctx.header.api_key in (API_VERSIONS, FETCH):
            self.seen.append(ctx.timing.breakdown_ms())


async def _simultaneous_requests(threads: int | None, clients: int) -> list[dict[str, float]]:
    loop = asyncio.get_running_loop()
    observer = _Breakdowns()
    virtual = RequestClock(monotonic_ns=lambda: round(loop.time() * 1e9), wall_ms=lambda: 0.0)
    pools = None
    if threads is not None:

        def pools(broker_id: int, config: BrokerConfig) -> SimulatedRequestHandlers:
            return SimulatedRequestHandlers(threads, _model(5.0), random.Random(broker_id))

    app = MiniKafka(port=0, observers=[observer], request_clock=virtual, handler_pools=pools)
    await app.start()
    try:
        raw = [await RawClient.connect("127.0.0.1", app.brokers[0].port) for _ in range(clients)]
        for client in raw:  # all written at one virtual instant: they arrive together
            client.send(API_VERSIONS, 0, "ApiVersionsRequest")
        for client in raw:
            assert (await client.response()).body.error_code == 0
            await client.close()
    finally:
        await app.stop()
    return observer.seen


def test_busy_handlers_make_requests_queue_in_virtual_time() -> None:
    seen = run_simulated(_simultaneous_requests(threads=1, clients=3), seed=3, latency=FIXED)
    assert sorted(b["request_queue_ms"] for b in seen) == [0.0, 5.0, 10.0]
    assert [b["local_ms"] for b in seen] == [5.0, 5.0, 5.0]
    assert sorted(b["total_ms"] - b["response_queue_ms"] - b["send_ms"] for b in seen) == [
        5.0,
        10.0,
        15.0,
    ]


def test_more_handlers_less_queue() -> None:
    seen = run_simulated(_simultaneous_requests(threads=2, clients=3), seed=3, latency=FIXED)
    assert sorted(b["request_queue_ms"] for b in seen) == [0.0, 0.0, 5.0]


def test_without_a_pool_a_simulated_request_costs_no_virtual_time() -> None:
    seen = run_simulated(_simultaneous_requests(threads=None, clients=3), seed=3, latency=FIXED)
    assert [b["request_queue_ms"] + b["local_ms"] for b in seen] == [0.0, 0.0, 0.0]


async def _one_request(
    model: ServiceTimeModel, ask: Callable[[MiniKafka, RawClient], Awaitable[None]]
) -> dict[str, float]:
    """The breakdown of the one request ``ask`` sends to a broker with one handler."""
    loop = asyncio.get_running_loop()
    observer = _Breakdowns()
    virtual = RequestClock(monotonic_ns=lambda: round(loop.time() * 1e9), wall_ms=lambda: 0.0)

    def pools(broker_id: int, config: BrokerConfig) -> SimulatedRequestHandlers:
        return SimulatedRequestHandlers(1, model, random.Random(broker_id))

    app = MiniKafka(port=0, observers=[observer], request_clock=virtual, handler_pools=pools)
    await app.start()
    try:
        raw = await RawClient.connect("127.0.0.1", app.brokers[0].port)
        await ask(app, raw)
        await raw.close()
    finally:
        await app.stop()
    (seen,) = observer.seen
    return seen


async def _long_poll_on_an_empty_partition(app: MiniKafka, raw: RawClient) -> None:
    app.cluster.create_topic("empty", 1, 1, {})
    fields = fetch_fields("empty", 0, max_wait_ms=200)
    assert (await raw.request(FETCH, FETCH_V, "FetchRequest", **fields)).error_code == 0


def test_a_parked_request_waits_in_its_purgatory_after_its_service_time() -> None:
    fetch = run_simulated(
        _one_request(_model(5.0), _long_poll_on_an_empty_partition), seed=5, latency=FIXED
    )
    assert fetch["local_ms"] == 5.0
    # parked when its handler ran (at the end of its service time), expired 200 ms on
    assert fetch["remote_ms"] == pytest.approx(200.0, abs=1.0)
    assert fetch["request_queue_ms"] == 0.0


def test_service_times_load_from_a_table_or_a_capture(tmp_path: Path) -> None:
    table = tmp_path / "times.json"
    table.write_text(json.dumps({"entries": [{"api": "Produce", "service_ms": 0.7}]}))
    assert load_service_times(table).service_ms(0, 100, 0.5) == 0.7
    capture = tmp_path / "capture"
    with CaptureWriter(capture, broker_id=0) as writer:
        for i in range(30):
            writer.write(make_request(sequence=i, local_time_ms=0.3))
    assert load_service_times(capture).service_ms(0, 6, 0.5) == pytest.approx(0.3)


@pytest.mark.parametrize(
    ("content", "says"),
    [("[1, 2]", "JSON object"), ("{not json", "cannot read"), ('{"format": "x/9"}', "format")],
)
def test_a_bad_service_time_table_is_a_clear_error(tmp_path: Path, content: str, says: str) -> None:
    table = tmp_path / "times.json"
    table.write_text(content)
    with pytest.raises(ValueError, match=says):
        load_service_times(table)


def test_an_empty_capture_gives_no_service_times(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no served request"):
        load_service_times(tmp_path)
    with pytest.raises(ValueError, match="no service-time table"):
        load_service_times(tmp_path / "missing")


def _with_sends(service_ms: float, send_ms: float) -> ServiceTimeModel:
    return ServiceTimeModel.from_table(
        {
            "entries": [],
            "default": {"service_ms": service_ms},
            "send": {"entries": [], "default": {"service_ms": send_ms}},
        }
    )


def test_a_connections_answers_wait_for_its_network_thread() -> None:
    pool = SimulatedRequestHandlers(8, _with_sends(1.0, 2.0), random.Random(0), 1)
    # one network thread: the second answer queues behind the first one's send
    assert pool.send("a", API_VERSIONS, 100, 0) == (0, 2 * MS)
    assert pool.send("b", API_VERSIONS, 100, 1 * MS) == (2 * MS, 4 * MS)
    spread = SimulatedRequestHandlers(8, _with_sends(1.0, 2.0), random.Random(0), 2)
    # two: connections are dealt round robin, and the second one's thread is free
    assert spread.send("a", API_VERSIONS, 100, 0) == (0, 2 * MS)
    assert spread.send("b", API_VERSIONS, 100, 1 * MS) == (1 * MS, 3 * MS)
    assert spread.send("a", API_VERSIONS, 100, 1 * MS) == (2 * MS, 4 * MS)


async def _api_versions(app: MiniKafka, raw: RawClient) -> None:
    body = await raw.request(API_VERSIONS, 3, "ApiVersionsRequest", **API_VERSIONS_FIELDS)
    assert body.error_code == 0


def test_the_send_time_is_kafkas_response_send_time() -> None:
    seen = run_simulated(_one_request(_with_sends(5.0, 3.0), _api_versions), seed=1, latency=FIXED)
    assert (seen["local_ms"], seen["send_ms"], seen["response_queue_ms"]) == (5.0, 3.0, 0.0)
    assert seen["total_ms"] == pytest.approx(8.0)


def test_follower_work_is_drawn_or_taken_on_a_shared_pool() -> None:
    table = {
        "entries": [{"api": "ReplicaFetcherWork", "service_ms": 0.5}],
        "default": {"service_ms": 1.0},
    }
    model = ServiceTimeModel.from_table(table)
    assert SimulatedRequestHandlers(1, _model(1.0), random.Random(0)).follower_work() == 0.0
    assert SimulatedRequestHandlers(1, model, random.Random(0)).follower_work() == 0.0005
    now = [0]
    shared = SimulatedRequestHandlers(1, model, random.Random(0), now_ns=lambda: now[0])
    shared.occupy(API_VERSIONS, 10, 0)  # the one thread is busy for 1 ms
    assert shared.follower_work() == pytest.approx(0.0015)  # waits for it, then works
