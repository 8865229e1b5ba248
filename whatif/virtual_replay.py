"""One capture replayed in virtual time: the replay client inside a simulated cluster.

`replay_virtual(rows, config)` runs, on a fresh `SimulatedEventLoop` seeded with
``config.seed``, an N-broker `MiniKafka` on the `SimNetwork` (requests timed on the
virtual clock, seeded ids, coordinator loads on virtual time, and -- with a service-time
model -- each broker's ``num.io.threads`` request handlers of
`simulation.request_handlers`) and the project's replay client
(`spark_jobs.replay_client.replay_rows_in_loop`) against it. The client is the real-time
replay's: each connection keeps its captured order and spacing (request *i* is sent at its
captured offset from the first client request), waits for what its client had been answered
(causality), and its ids are rewritten (``replay_rewrite``). Its ``time.time``/
``time.monotonic`` are the loop's while the run lasts (`determinism.pinned_process`), so its
send and response times are virtual milliseconds.

Where we differ from the real-time replay: one "task" holds every connection (no barrier,
no Spark inside the run: `whatif.grid` puts a whole run in one Spark task). The target runs
the configs the captured cluster ran with (the capture's header records them) plus the
cell's overrides, so a capture replays like for like; the simulated wall clock starts
where the capture starts, so produced records carry their captured timestamps.
The rows are `ReplayResult`s with ``run_kind`` virtual-time, and
`write_results` writes them as the real-time replay does (RESULT_SCHEMA Parquet and
``_replay.json``): ``minikafka report`` and ``compare`` read them unchanged.

Deterministic: the same rows, config and seed give the same `digest` (in a process with the
same ``PYTHONHASHSEED``, as ``minikafka simulate`` arranges).
"""

from __future__ import annotations

import asyncio
import hashlib
import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker import real_clock
from broker.app import MiniKafka
from broker.config.broker_config import BrokerConfig
from broker.coordinator.coordinator_loader import EventLoopLoadScheduler
from broker.ids import IdSource
from broker.server.request_timing import RequestClock
from protocol.capture import CaptureRequest
from protocol.capture_files import capture_files, read_capture
from protocol.codec import decode_request, parse_request_header
from protocol.service_times import ServiceTimeModel
from simulation.request_handlers import (
    DEFAULT_IO_THREADS,
    DEFAULT_NETWORK_THREADS,
    SimulatedRequestHandlers,
    link_latency,
)
from spark_jobs.replay_client import (
    REPLAY_COLUMNS,
    ReplaySchedule,
    replay_rows_in_loop,
)
from spark_jobs.replay_result import VIRTUAL_TIME, ReplayResult
from spark_jobs.traffic import REPLICA_ID_APIS, is_inter_broker, replica_id_of_frame
from virtual_time.determinism import DEFAULT_EPOCH_S
from virtual_time.loop import SimulatedEventLoop, run_simulated

__all__ = [
    "VirtualReplay",
    "VirtualReplayConfig",
    "capture_brokers",
    "captured_topics",
    "read_replay_rows",
    "replay_virtual",
    "result_digest",
    "target_config",
]

#: Virtual seconds between the cluster being up and the first captured request's offset.
START_MARGIN_S = 1.0


@dataclass(frozen=True, slots=True)
class VirtualReplayConfig:
    """One cell of a what-if: the target cluster, its configs, the seed."""

    brokers: int = 3
    seed: int = 0
    overrides: Mapping[str, str] = field(default_factory=dict)
    #: What each request costs its broker (None: nothing; requests take no virtual time).
    service_times: ServiceTimeModel | None = None
    io_threads: int = DEFAULT_IO_THREADS
    response_timeout_s: float = 60.0
    #: The configs the captured cluster ran with (``captured_cluster_config``).
    captured_configs: Mapping[str, str] = field(default_factory=dict)
    #: Where the target's brokers capture what they serve (None: nowhere).
    target_capture: Path | None = None
    #: Every broker's request handlers on one pool of this many threads, followers' work
    #: included (``minikafka serve`` runs all its brokers on one event loop: 1), instead of
    #: Kafka's ``num.io.threads`` per broker. None: Kafka's model.
    shared_threads: int | None = None


@dataclass(frozen=True, slots=True)
class VirtualReplay:
    """What one virtual replay gave: a result row per captured row, and how it ran."""

    results: list[ReplayResult]
    digest: str
    virtual_s: float
    wall_s: float

    @property
    def unanswered(self) -> int:
        """Client requests sent that expected an answer and got none (or an error)."""
        return sum(1 for r in self.results if r.replay_error is not None)


def read_replay_rows(capture: str | Path) -> list[dict[str, Any]]:
    """The capture's requests as the replay client takes them (``REPLAY_COLUMNS``), each
    connection's rows together and in sequence order, without Spark."""
    rows: list[dict[str, Any]] = []
    for path in capture_files(capture):
        for record in read_capture(path, requests_only=True):
            if isinstance(record, CaptureRequest):
                row = {name: getattr(record, name) for name in REPLAY_COLUMNS}
                if row["replica_id"] is None and record.api_key in REPLICA_ID_APIS:
                    row["replica_id"] = replica_id_of_frame(record.api_key, record.request)
                rows.append(row)
    rows.sort(key=lambda r: (int(r["broker_id"]), str(r["connection_id"]), int(r["sequence"])))
    return rows


def capture_brokers(rows: Iterable[Mapping[str, Any]]) -> int:
    """How many brokers the target needs: one per captured broker id (ids 0..N-1)."""
    return max((int(r["broker_id"]) for r in rows), default=0) + 1


#: Requests that name topics and partitions: Produce, Fetch (by name up to v12), ListOffsets.
_TOPIC_APIS = {0: ("topic_data", "name", "partition_data", "index"),
               1: ("topics", "topic", "partitions", "partition"),
               2: ("topics", "name", "partitions", "partition_index")}  # fmt: skip
#: Topics the cluster creates for itself.
_INTERNAL = frozenset(
    {"__consumer_offsets", "__transaction_state", "__share_group_state", "__remote_log_metadata"}
)
#: CreateTopics: a topic it names is created by the replay itself, as when captured.
_CREATE_TOPICS = 19


def captured_topics(rows: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Topic -> partitions (the highest partition named + 1) of every topic the captured
    requests read or write and no captured CreateTopics creates: the topics that existed
    before the capture (``simulate`` creates its topics without a request; a real cluster's
    topics may predate the capture), which the target must hold before the replay starts."""
    topics: dict[str, int] = {}
    created: set[str] = set()
    for row in rows:
        api_key = int(row["api_key"])
        if api_key not in _TOPIC_APIS and api_key != _CREATE_TOPICS:
            continue
        try:
            frame = bytes(row["request"])
            header, offset = parse_request_header(frame)
            request = decode_request(header, frame, offset)
        except Exception:  # an undecodable request names no topic; the replay reports it
            continue
        if api_key == _CREATE_TOPICS:
            created.update(str(t.name) for t in getattr(request, "topics", ()))
            continue
        many, name, parts, index = _TOPIC_APIS[api_key]
        for topic in getattr(request, many):
            title = getattr(topic, name, None)
            if title and title not in _INTERNAL:
                highest = max((int(getattr(p, index)) for p in getattr(topic, parts)), default=0)
                topics[title] = max(topics.get(title, 1), highest + 1)
    return {t: n for t, n in sorted(topics.items()) if t not in created}


def target_config(config: VirtualReplayConfig) -> BrokerConfig:
    """The captured cluster's configs (``VirtualReplayConfig.captured_configs``), then the
    cell's overrides: the target runs as the cluster that served the capture, so that
    its groups meet their coordinators on the same brokers and its acks=all produces wait
    for the same replicas. A capture that does not record its configs replays against
    Kafka's defaults, as the real-time replay's ``--target-brokers`` cluster runs."""
    return BrokerConfig.model_validate({**config.captured_configs, **config.overrides})


def replay_virtual(rows: list[dict[str, Any]], config: VirtualReplayConfig) -> VirtualReplay:
    """Replay ``rows`` (``read_replay_rows``) in a simulated cluster; see the module doc."""
    started = real_clock.monotonic_s()
    box: list[ReplayResult] = []
    epoch_s = capture_epoch_s(rows)
    virtual_s = run_simulated(
        _run(rows, config, box, epoch_s),
        seed=config.seed,
        latency=link_latency(config.service_times),
        epoch_s=epoch_s,
    )
    return VirtualReplay(
        box, result_digest(box, virtual_s), virtual_s, real_clock.monotonic_s() - started
    )


def result_digest(results: Iterable[ReplayResult], virtual_s: float) -> str:
    """A hash of every row's outcome and the virtual end: the run's fingerprint."""
    digest = hashlib.sha256(f"{virtual_s:.6f}".encode())
    for r in results:
        outcome = (
            r.broker_id,
            r.connection_id,
            r.sequence,
            r.actual_send_ms,
            r.response_ms,
            r.error_codes,
            r.replay_error,
            r.replay_skip,
        )
        digest.update(repr(outcome).encode())
    return digest.hexdigest()[:16]


def capture_epoch_s(rows: list[dict[str, Any]]) -> float:
    """The simulated wall clock's zero: `START_MARGIN_S` before the capture's first client
    request, so the records the replay produces carry timestamps as close to their
    captured ones as in a real-time replay (a broker refuses records more than
    ``log.message.timestamp.after.max.ms``, an hour, ahead of its clock: with a fixed epoch
    every Produce of a capture taken later than it was INVALID_TIMESTAMP)."""
    if not rows:
        return DEFAULT_EPOCH_S
    return _first_client_request_us(rows) / 1e6 - START_MARGIN_S


async def _run(
    rows: list[dict[str, Any]],
    config: VirtualReplayConfig,
    out: list[ReplayResult],
    epoch_s: float,
) -> float:
    loop = asyncio.get_running_loop()
    assert isinstance(loop, SimulatedEventLoop)
    app = MiniKafka(
        target_config(config),
        brokers=config.brokers,
        port=0,
        request_clock=RequestClock(  # read `now` itself: the brokers ask it ~20x a request
            monotonic_ns=lambda: round(loop.now * 1e9),
            wall_ms=lambda: (epoch_s + loop.now) * 1000.0,
        ),
        handler_pools=_handler_pools(config, lambda: round(loop.time() * 1e9)),
        load_scheduler=lambda: EventLoopLoadScheduler(clock_s=loop.time),
        ids=IdSource.seeded(config.seed),
        capture_dir=config.target_capture,
    )
    await app.start()
    try:
        replication = min(3, config.brokers)
        for topic, partitions in captured_topics(rows).items():
            app.cluster.create_topic(topic, partitions, replication, {})
        schedule = ReplaySchedule(
            addresses={b.broker_id: (b.advertised_host, b.port) for b in app.brokers},
            start_unix_s=epoch_s + loop.time() + START_MARGIN_S,
            first_received_us=_first_client_request_us(rows),
            response_timeout_s=config.response_timeout_s,
        )
        ordered = sorted(rows, key=_client_order)
        out.extend(await replay_rows_in_loop(ordered, schedule, run_kind=VIRTUAL_TIME))
        return loop.time()
    finally:
        await app.stop()


def _client_order(row: Mapping[str, Any]) -> tuple[int, str, int]:
    return (int(row["broker_id"]), str(row["connection_id"]), int(row["sequence"]))


def _first_client_request_us(rows: list[dict[str, Any]]) -> int:
    """Where the schedule starts: the first client request (as the real-time replay)."""
    client = [
        int(r["received_unix_us"])
        for r in rows
        if not is_inter_broker(
            int(r["api_key"]), _opt_int(r.get("replica_id")), _opt_int(r.get("api_version"))
        )
    ]
    return min(client or [int(r["received_unix_us"]) for r in rows] or [0])


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _handler_pools(
    config: VirtualReplayConfig, now_ns: Callable[[], int]
) -> Callable[[int, BrokerConfig], SimulatedRequestHandlers] | None:
    """Each broker's request handlers, drawing service times from the cell's seed; the
    thread count is the cell's ``num.io.threads`` override when it has one, the network
    threads the target's ``num.network.threads``. With ``shared_threads`` one pool of that
    many handlers serves every broker, the followers' work on fetch answers included (one
    event loop's CPU), while the answers keep Kafka's network threads, three a broker: a
    captured minikafka's answers do not wait for one another (its ResponseQueueTimeMs is
    ~0), and one send thread for the cluster made acks=all answers queue 0.2 ms behind the
    consumers' fetch answers the same append woke."""
    model = config.service_times
    if model is None:
        return None
    if config.shared_threads is not None:
        n = config.shared_threads
        shared = SimulatedRequestHandlers(
            n,
            model,
            random.Random(f"{config.seed}/handlers"),
            DEFAULT_NETWORK_THREADS * config.brokers,
            now_ns=now_ns,
        )
        return lambda broker_id, broker_config: shared

    def pool(broker_id: int, broker_config: BrokerConfig) -> SimulatedRequestHandlers:
        rng = random.Random(f"{config.seed}/handlers/{broker_id}")
        threads = int(config.overrides.get("num.io.threads", config.io_threads))
        return SimulatedRequestHandlers(threads, model, rng, broker_config.num_network_threads)

    return pool
