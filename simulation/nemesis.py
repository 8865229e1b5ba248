"""A seeded nemesis: the faults of a simulated run, drawn from the seed before it starts.

``--faults restart=2,partition=1,pause=2,delay=1`` asks for that many of each kind over the
run. Each fault picks a broker and a start time from the seed, lasts a few seconds to tens of
seconds, and heals itself; faults never overlap (one broker in trouble at a time — with RF 3
and ``min.insync.replicas=2`` acks=all stays available, which is what the invariants can then
demand). All of them end before the clients stop, and the run ends with the cluster whole.

- ``restart``: the broker stops as if its process died (`MiniKafka.stop_broker`: connections
  drop, the controller fails its leaders over) and comes back with its logs (kept in memory).
- ``partition``: nothing reaches the broker's listener or leaves through it — clients and the
  followers fetching from it wait (`SimNetwork.hold`) — while it keeps fetching from the
  others; healed, what waited is delivered.
- ``pause``: the broker's followers stop fetching (`MiniKafka.pause_replication`): its ISR
  memberships lapse after ``replica.lag.time.max.ms`` and acks=all waits on the others.
- ``delay``: its follower fetches at least 500 ms apart (`set_replication_delay_ms`).
- ``broker-partition``: the broker and the other brokers cannot reach each other (both ways:
  its followers and theirs wait, the share persister and marker sender too) while every
  client still reaches every broker — the controller (in process) still sees it alive, so it
  stays registered, leads what it led and shrinks its ISRs.
- ``one-way``: what the broker sends the other brokers waits; what they send it arrives. Its
  fetch requests and its answers to their fetches both stall: TCP's asymmetric partition.
- ``loss``: 5% of the messages to and from its listener are lost on the wire and arrive
  after TCP's retransmission timeout (200 ms, doubling).
- ``remote-slow`` (``--tiered``): every call to the remote tier takes 2 s more: remote
  fetches wait out ``remote.fetch.max.wait.ms`` and copies fall behind. The tier is one for
  the cluster; the broker drawn is only noted.
- ``remote-down`` (``--tiered``): the remote tier answers nothing until it heals (held calls
  then run): remote fetches expire empty, nothing is copied, so nothing more leaves the
  local logs.
- ``lagging-failover``: the two at once, as they meet in production — the broker's followers
  stop fetching, and while they lag (still in the ISR: less than ``replica.lag.time.max.ms``)
  the next broker dies; the controller may elect the lagging follower. A correct broker never
  let the high watermark (so no acks=all) pass it, so nothing acknowledged is lost; a broker
  that did is caught by the invariants.
- ``crash``: the broker's machine loses power (`MiniKafka.crash_broker`): it stops as
  ``restart`` does and its logs lose what they had not flushed (``flush.messages``,
  ``flush.ms``: the scenario draws a flush policy per seed), then it comes back. What it
  acknowledged alone may go (acks=1); an acks=all record is on the other in-sync replicas,
  which the controller elects, so it must survive (RF 3, min.insync 2, one crash at a time).
- ``swizzle`` (FoundationDB): a few links to and from the broker clogged one by one, then
  unclogged in another order (`simulation.faults.links`).
- ``hold`` (turmoil): every message between the broker and one other node held, those on
  the wire too, then released at one instant (`simulation.faults.links`).
- ``skew``: the broker's wall clock stepped up to `MAX_SKEW_S` either way and both its clocks
  drifting up to `MAX_DRIFT` (`simulation.faults.clock_skew`); healed, the step is undone.
"""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from broker.app import MiniKafka
from simulation.faults import links
from simulation.faults.clock_skew import MAX_DRIFT, SkewedClocks
from simulation.history import History
from virtual_time.network import SimNetwork

KINDS = (
    "restart",
    "partition",
    "pause",
    "delay",
    "lagging-failover",
    "broker-partition",
    "one-way",
    "loss",
    "remote-slow",
    "remote-down",
    "crash",
    "swizzle",
    "hold",
    "skew",
)
#: A ``remote-slow`` fault's extra time on every remote tier call.
REMOTE_SLOW_MS = 2000
#: The share of messages lost on a ``loss`` fault's listener.
LOSS_RATE = 0.05
#: A ``skew`` fault's largest step of the wall clock (well under the hour of
#: ``message.timestamp.after.max.ms``), and largest drift of both clocks.
MAX_SKEW_S = 120.0


def parse_faults(text: str) -> dict[str, int]:
    """``restart=2,pause=1`` -> {"restart": 2, "pause": 1}; ``none`` or empty: no faults."""
    if text.strip() in ("", "none"):
        return {}
    counts: dict[str, int] = {}
    for part in text.split(","):
        kind, sep, count = part.strip().partition("=")
        if kind not in KINDS or not sep or not count.isdigit():
            raise ValueError(f"--faults: expected KIND=COUNT with KIND one of {KINDS}: {part!r}")
        counts[kind] = int(count)
    return counts


@dataclass(frozen=True, slots=True)
class Fault:
    kind: str
    broker: int
    start_s: float
    duration_s: float


def plan(
    counts: dict[str, int], brokers: int, start_s: float, end_s: float, rng: random.Random
) -> list[Fault]:
    """Non-overlapping faults between ``start_s`` and ``end_s``, in time order."""
    kinds = [kind for kind in KINDS for _ in range(counts.get(kind, 0))]
    rng.shuffle(kinds)
    if not kinds:
        return []
    slot = (end_s - start_s) / len(kinds)
    faults = []
    for i, kind in enumerate(kinds):
        duration = rng.uniform(0.2, 0.6) * slot
        begin = start_s + i * slot + rng.uniform(0, slot - duration)
        faults.append(Fault(kind, rng.randrange(brokers), begin, duration))
    return faults


class Nemesis:
    """Applies a plan to a running cluster and its network, noting each step in the history."""

    def __init__(
        self,
        app: MiniKafka,
        network: SimNetwork,
        history: History,
        rng: random.Random | None = None,
        clocks: SkewedClocks | None = None,
    ) -> None:
        self._app = app
        self._network = network
        self._history = history
        # What a fault draws while it runs (links, skews): apart from the plan's dice.
        self._rng = rng or random.Random(0)
        self._clocks = clocks

    async def run(self, faults: list[Fault]) -> None:
        loop = asyncio.get_running_loop()
        custom = {
            "lagging-failover": self._lagging_failover,
            "crash": self._crash,
            "swizzle": self._links,
            "hold": self._links,
            "skew": self._skew,
        }
        for fault in faults:
            await asyncio.sleep(max(0.0, fault.start_s - loop.time()))
            if fault.kind in custom:
                await custom[fault.kind](fault)
                continue
            begin, end = self._actions(fault)
            self._note(f"{fault.kind} broker {fault.broker} for {fault.duration_s:.1f}s")
            await begin()
            await asyncio.sleep(fault.duration_s)
            await end()
            self._note(f"healed {fault.kind} broker {fault.broker}")

    async def _lagging_failover(self, fault: Fault) -> None:
        app, lagging = self._app, fault.broker
        victim = self._leader_followed_by(lagging)
        lag_s = min(fault.duration_s, 0.5 * app.config.replica_lag_time_max_ms / 1000)
        self._note(f"lagging-failover: broker {lagging} lags, broker {victim} dies")
        app.pause_replication(lagging)
        await asyncio.sleep(lag_s / 3)
        await app.stop_broker(victim)
        await asyncio.sleep(lag_s / 3)
        app.resume_replication(lagging)
        await asyncio.sleep(lag_s / 3)
        await app.start_broker(victim)
        self._note(f"healed lagging-failover broker {lagging}, broker {victim}")

    async def _crash(self, fault: Fault) -> None:
        lost = await self._app.crash_broker(fault.broker)
        self._note(
            f"crash broker {fault.broker} for {fault.duration_s:.1f}s "
            f"({lost} unflushed offsets lost)"
        )
        await asyncio.sleep(fault.duration_s)
        await self._app.start_broker(fault.broker)
        self._note(f"healed crash broker {fault.broker}")

    async def _links(self, fault: Fault) -> None:
        run = links.swizzle if fault.kind == "swizzle" else links.hold
        await run(self._network, broker_node(fault.broker), fault.duration_s, self._rng, self._note)

    async def _skew(self, fault: Fault) -> None:
        rng, broker = self._rng, fault.broker
        offset_s = rng.uniform(-MAX_SKEW_S, MAX_SKEW_S)
        drift = rng.uniform(-MAX_DRIFT, MAX_DRIFT)
        loop = asyncio.get_running_loop()
        skew = self._clocks.skew(broker) if self._clocks is not None else None
        self._note(
            f"skew broker {broker}: wall clock {offset_s:+.1f}s, drift {drift * 100:+.1f}% "
            f"for {fault.duration_s:.1f}s"
        )
        if skew is not None:
            skew.start(loop.time(), offset_s, drift)
        await asyncio.sleep(fault.duration_s)
        if skew is not None:
            skew.stop(loop.time())
        self._note(f"healed skew broker {broker}")

    def _leader_followed_by(self, lagging: int) -> int:
        """A broker leading a partition whose next replica is ``lagging``: when it dies, the
        controller elects the lagging follower there (the first live ISR member in replica
        order). Any other broker if none does."""
        for topic in sorted(self._app.cluster.topics):
            for state in self._app.cluster.topics[topic].partitions:
                others = [r for r in state.replicas if r != state.leader]
                if state.leader != lagging and others and others[0] == lagging:
                    return state.leader
        return (lagging + 1) % len(self._app.brokers)

    def _note(self, what: str) -> None:
        self._history.faults.append(f"{asyncio.get_running_loop().time():.3f}s {what}")

    def _actions(
        self, fault: Fault
    ) -> tuple[Callable[[], Awaitable[None]], Callable[[], Awaitable[None]]]:
        app, broker = self._app, fault.broker
        port = app.brokers[broker].port

        async def stop() -> None:
            await app.stop_broker(broker)

        async def start() -> None:
            await app.start_broker(broker)

        async def hold() -> None:
            self._network.hold(port)

        async def release() -> None:
            self._network.release(port)

        async def pause() -> None:
            app.pause_replication(broker)

        async def resume() -> None:
            app.resume_replication(broker)

        async def slow() -> None:
            app.set_replication_delay_ms(broker, 500)

        async def lossy() -> None:
            self._network.faults(port).loss_rate = LOSS_RATE

        async def lossless() -> None:
            self._network.faults(port).loss_rate = 0.0

        remote = app.remote_storage  # None without --tiered: the faults do nothing

        async def remote_slow() -> None:
            if remote is not None:
                remote.set_slow(REMOTE_SLOW_MS)

        async def remote_fast() -> None:
            if remote is not None:
                remote.set_slow(0)

        async def remote_down() -> None:
            if remote is not None:
                remote.set_down(True)

        async def remote_up() -> None:
            if remote is not None:
                remote.set_down(False)

        actions = {
            "restart": (stop, start),
            "partition": (hold, release),
            "pause": (pause, resume),
            "delay": (slow, resume),
            "broker-partition": self._cuts(broker, both_ways=True),
            "one-way": self._cuts(broker, both_ways=False),
            "loss": (lossy, lossless),
            "remote-slow": (remote_slow, remote_fast),
            "remote-down": (remote_down, remote_up),
        }
        return actions[fault.kind]

    def _cuts(
        self, broker: int, both_ways: bool
    ) -> tuple[Callable[[], Awaitable[None]], Callable[[], Awaitable[None]]]:
        """Cut ``broker`` from the other brokers (not from the clients)."""
        node = broker_node(broker)
        pairs = [(node, broker_node(b)) for b in range(len(self._app.brokers)) if b != broker]
        if both_ways:
            pairs += [(other, me) for me, other in pairs]

        async def cut() -> None:
            for src, dst in pairs:
                self._network.cut(src, dst)

        async def heal() -> None:
            for src, dst in pairs:
                self._network.heal(src, dst)

        return cut, heal


#: A broker's own connections name it in their client ids (``ReplicaFetcher``,
#: ``InterBrokerMarkerSender``, ``NetworkStatePersister``).
_BROKER_CLIENT_ID = re.compile(r"(?:replica-fetcher|txn-marker-channel|share-persister)-(\d+)")


def broker_node(broker_id: int) -> str:
    return f"broker-{broker_id}"


def name_brokers(app: MiniKafka, network: SimNetwork) -> None:
    """Tell the network which node each listener and each broker's own connection is, so
    that faults can cut brokers from each other."""
    for broker in app.brokers:
        network.name_port(broker.port, broker_node(broker.broker_id))
        for port in broker.listener_ports.values():  # the SASL listener's too
            network.name_port(port, broker_node(broker.broker_id))

    def node_of(client_id: str) -> str | None:
        match = _BROKER_CLIENT_ID.fullmatch(client_id)
        return broker_node(int(match.group(1))) if match else None

    network.name_client_ids(node_of)
