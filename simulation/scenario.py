"""One simulated run: a cluster, the workload mix, a nemesis, the invariants, a digest.

`simulate(config)` runs the whole scenario on a fresh `SimulatedEventLoop`:

1. an N-broker `MiniKafka` (logs in memory; capture into ``--out`` when given, in the format
   ``serve --capture-dir`` writes, so ``report`` reads it), topics ``sim-events`` (3
   partitions), ``sim-out`` (2), ``sim-txn`` (2), ``sim-sasl`` (2) and
   ``sim-sasl-forbidden`` (1) with replication factor min(3, N); a PLAINTEXT and a
   SASL_PLAINTEXT listener, the StandardAuthorizer on (`sasl_app.broker_configs`);
2. the clients of `workload.run_clients` until 85% of the duration, the nemesis' faults
   between 10% and 75% of it, the zombie member frozen at 30%;
3. once the clients stop and the faults are healed, the final state read back
   (`workload.read_final_state`) and the invariants and Jepsen's checkers run
   (`invariants.check_all`).

The digest hashes the History and the virtual end time: the same seed (in a process with the
same ``PYTHONHASHSEED``, which `minikafka simulate` fixes) gives the same digest.

The seed also draws the brokers' flush policy (`flush_policy`: what a ``crash`` loses) and
which BUGGIFY points are on (`broker.buggify`; ``buggify=False`` turns them all off); every
broker reads its clocks through `SkewedClocks`, which only a ``skew`` fault moves.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from broker import real_clock
from broker.app import MiniKafka
from broker.buggify import Buggify
from broker.config.broker_config import BrokerConfig
from broker.coordinator.coordinator_loader import EventLoopLoadScheduler
from broker.ids import IdSource
from broker.server.request_timing import RequestClock
from protocol.service_times import ServiceTimeModel
from simulation import nemesis, workload
from simulation.broker_probes import watch_leader_starts
from simulation.clients import sasl_app
from simulation.clients.mix import broker_configs as protocol_client_configs
from simulation.clients.streams_app import STREAMS_BROKER_CONFIGS
from simulation.clients.tv2 import TXN_TOPIC
from simulation.faults.clock_skew import SkewedClocks
from simulation.history import History
from simulation.invariants import Verdict, check_all
from simulation.planted import planted
from simulation.request_handlers import (
    DEFAULT_IO_THREADS,
    SimulatedRequestHandlers,
    link_latency,
)
from virtual_time.determinism import DEFAULT_EPOCH_S
from virtual_time.loop import SimulatedEventLoop, SimulationLivelock, run_simulated

log = logging.getLogger("broker.simulation")  # the name its log lines have always carried


@dataclass(frozen=True, slots=True)
class SimulationConfig:
    brokers: int = 3
    seed: int = 0
    duration_s: float = 60.0
    faults: dict[str, int] = field(default_factory=dict)
    out: Path | None = None
    rate_per_s: float = 5.0
    # test-only: make the broker break a promise, to show the invariants catch it
    overrides: dict[str, str] = field(default_factory=dict)
    #: What each request costs its broker in virtual time (issue 24); None: nothing.
    service_times: ServiceTimeModel | None = None
    #: The request handlers each broker has when ``service_times`` is given.
    io_threads: int = DEFAULT_IO_THREADS
    #: A planted bug (`simulation.planted`) in for the run; None: the broker as it is.
    plant: str | None = None
    #: Tiered storage on (``--tiered``): ``sim-tiered`` in the mix, remote faults possible.
    tiered: bool = False
    #: BUGGIFY points drawn from the seed (``--no-buggify``: none).
    buggify: bool = True


@dataclass(slots=True)
class SimulationResult:
    seed: int
    digest: str
    verdicts: list[Verdict]
    virtual_s: float
    wall_s: float
    history: History

    @property
    def held(self) -> bool:
        return all(v.held for v in self.verdicts)


def simulate(config: SimulationConfig) -> SimulationResult:
    started = real_clock.monotonic_s()  # wall time spent, for the virtual/wall ratio
    history = History()
    livelock: SimulationLivelock | None = None
    with planted(config.plant), watch_leader_starts(history):
        try:
            virtual_s = run_simulated(
                _scenario(config, history),
                seed=config.seed,
                latency=link_latency(config.service_times),
                deadline_s=deadline_s(config.duration_s),
            )
        except SimulationLivelock as spun:
            livelock, virtual_s = spun, spun.virtual_s
    loop_messages = history.client_errors.pop("__messages__", 0)
    digest = history.digest(virtual_s, loop_messages)
    return SimulationResult(
        config.seed,
        digest,
        [_progress(livelock), *(check_all(history) if livelock is None else ())],
        virtual_s,
        real_clock.monotonic_s() - started,
        history,
    )


def deadline_s(duration_s: float) -> float:
    """The virtual time a run must end by: its clients stop at 85% of ``duration_s``, the
    faults heal by 75%, and the end -- drainers, the converged streams group, the final
    reads -- takes a minute or two. A run still going at three times its length plus five
    minutes waits for something that never comes (the planted follower-skips-truncation
    ran past three virtual hours)."""
    return 3 * duration_s + 300.0


def _progress(livelock: SimulationLivelock | None) -> Verdict:
    """Liveness: the run reached its end. A livelocked run's history stops part-way, so
    nothing else is judged on it (every end-of-run check would fail for that alone)."""
    name = "the cluster makes progress (no livelock)"
    if livelock is None:
        return Verdict(name, True, "the run reached its end")
    return Verdict(name, False, str(livelock), tuple(livelock.spinning))


def _broker_config(config: SimulationConfig) -> BrokerConfig:
    replication = min(3, config.brokers)
    return BrokerConfig.model_validate(
        {
            "default.replication.factor": str(replication),
            "offsets.topic.replication.factor": str(replication),
            # Kafka's 50 + 50 internal partitions make every follower fetch read 100 more
            # partitions: real cost, but no behaviour the scenario looks at needs them.
            "offsets.topic.num.partitions": "3",
            "transaction.state.log.num.partitions": "3",
            "transaction.state.log.replication.factor": str(replication),
            "transaction.state.log.min.isr": str(min(2, replication)),
            "min.insync.replicas": str(min(2, replication)),
            "group.initial.rebalance.delay.ms": "0",
            **STREAMS_BROKER_CONFIGS,
            **flush_policy(config.seed),
            **protocol_client_configs(config.brokers),
            **(TIERED_BROKER_CONFIGS if config.tiered else {}),
            **sasl_app.broker_configs(),
            **config.overrides,
        }
    )


#: The flush policies a seed draws from: Kafka's default (never: a crash loses everything
#: since the broker started), a flush by time, a flush by count.
FLUSH_POLICIES: tuple[dict[str, str], ...] = (
    {},
    {"log.flush.interval.ms": "1000", "log.flush.scheduler.interval.ms": "500"},
    {"log.flush.interval.messages": "20"},
)


def flush_policy(seed: int) -> dict[str, str]:
    """The broker configs of the seed's flush policy (`FLUSH_POLICIES`)."""
    return FLUSH_POLICIES[random.Random(f"{seed}/flush").randrange(len(FLUSH_POLICIES))]


async def _scenario(config: SimulationConfig, history: History) -> float:
    loop = asyncio.get_running_loop()
    assert isinstance(loop, SimulatedEventLoop)
    clocks = SkewedClocks(loop.time, DEFAULT_EPOCH_S)
    bugs = Buggify(random.Random(f"{config.seed}/buggify")) if config.buggify else None
    # Requests are timed on the virtual clock: a capture of a run shows its virtual waits.
    virtual = RequestClock(
        monotonic_ns=lambda: round(loop.now * 1e9),  # (`loop.time()` is `loop.now`)
        wall_ms=lambda: (DEFAULT_EPOCH_S + loop.time()) * 1000.0,
    )
    app = MiniKafka(
        _broker_config(config),
        brokers=config.brokers,
        port=0,
        capture_dir=config.out,
        request_clock=virtual,
        handler_pools=_handler_pools(config),
        # Coordinator loads sliced on virtual time: where a load yields is the seed's.
        load_scheduler=lambda: EventLoopLoadScheduler(clock_s=loop.time),
        ids=IdSource.seeded(config.seed),  # cluster, topic, member and fetch session ids
        broker_clocks=clocks.of_broker,
        buggify=bugs,
    )
    _note_setup(history, config.seed, bugs)
    history.leader_epoch = history.protocol.share.leader_epoch = _leader_epochs(app)
    await app.start()
    nemesis.name_brokers(app, loop.network)
    try:
        await _create_topics(app, config.tiered)
        duration = config.duration_s
        settings = workload.WorkloadSettings(
            bootstrap=app.bootstrap,
            stop_at_s=loop.time() + 0.85 * duration,
            rate_per_s=config.rate_per_s,
            freeze_at_s=loop.time() + 0.3 * duration,
            tiered=config.tiered,
            sasl_bootstrap=app.listener_bootstrap(sasl_app.LISTENER),
        )
        faults = nemesis.plan(
            config.faults,
            config.brokers,
            loop.time() + 0.1 * duration,
            loop.time() + 0.75 * duration,
            random.Random(f"{config.seed}/nemesis"),
        )
        rng = random.Random(f"{config.seed}/clients")
        await asyncio.gather(
            workload.run_clients(settings, history, rng),
            nemesis.Nemesis(
                app, loop.network, history, random.Random(f"{config.seed}/faults"), clocks
            ).run(faults),
        )
        # Transaction markers are written after EndTxn is answered: let them land (virtual
        # time costs nothing) so that what is committed is also readable.
        await asyncio.sleep(10)
        await workload.read_final_state(app.bootstrap, history, tiered=config.tiered)
        history.client_errors["__messages__"] = loop.network.messages_delivered
        if bugs is not None and bugs.enabled:
            fired = ", ".join(f"{point} {n}x" for point, n in bugs.fired.items())
            history.faults.append(f"{loop.time():.3f}s buggify fired: {fired}")
        return loop.time()
    finally:
        await app.stop()


def _leader_epochs(app: MiniKafka) -> Callable[[str, int], int]:
    """A partition's leader epoch as the controller has it now (-1: no such partition):
    what the checks read to tell a leader change from a broker's mistake."""

    def leader_epoch(topic: str, partition: int) -> int:
        state = app.cluster.topics.get(topic)
        if state is None or not 0 <= partition < len(state.partitions):
            return -1
        return state.partitions[partition].leader_epoch

    return leader_epoch


def _note_setup(history: History, seed: int, bugs: Buggify | None) -> None:
    """The seed's flush policy and BUGGIFY points, first in the run's fault lines."""
    policy = ", ".join(f"{k}={v}" for k, v in flush_policy(seed).items()) or "never (Kafka's)"
    history.faults.append(f"0.000s flush policy: {policy}")
    if bugs is not None:
        points = ", ".join(sorted(bugs.enabled)) or "none"
        history.faults.append(f"0.000s buggify on: {points}")


def _handler_pools(
    config: SimulationConfig,
) -> Callable[[int, BrokerConfig], SimulatedRequestHandlers] | None:
    """Each broker's request handlers, drawing service times from the run's seed."""
    model = config.service_times
    if model is None:
        return None

    def pool(broker_id: int, _: BrokerConfig) -> SimulatedRequestHandlers:
        rng = random.Random(f"{config.seed}/handlers/{broker_id}")
        return SimulatedRequestHandlers(config.io_threads, model, rng)

    return pool


async def _create_topics(app: MiniKafka, tiered: bool) -> None:
    replication = min(3, app.num_brokers)
    for name, partitions in (
        (workload.EVENTS, 3),
        (workload.OUTPUT, 2),
        (TXN_TOPIC, 2),
        (sasl_app.TOPIC, 2),
        (sasl_app.FORBIDDEN, 1),
    ):
        app.cluster.create_topic(name, partitions, replication, {})
    if tiered:
        await workload.create_tiered_topic(app.bootstrap, 2, replication)


#: ``--tiered``: the remote tier on, its tasks every second, each remote call ~20 ms
#: (p99 200 ms) drawn from the run's seed.
TIERED_BROKER_CONFIGS = {
    "remote.log.storage.system.enable": "true",
    "remote.log.manager.task.interval.ms": "1000",
    "log.retention.check.interval.ms": "1000",
    "rsm.config.latency.p50.ms": "20",
    "rsm.config.latency.p99.ms": "200",
    # __remote_log_metadata: 3 partitions, not Kafka's 50 (as the offsets topic above)
    "rlmm.config.remote.log.metadata.topic.num.partitions": "3",
}
