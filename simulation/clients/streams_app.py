"""A Kafka Streams application in the simulated workload: a streams group (KIP-1071) of
three members, driven by the project's ``StreamsMember`` over the simulated network.

The topology reads ``sim-events`` (subtopology ``0``), repartitions by key into an internal
repartition topic, and counts in subtopology ``1``, a stateful one with a changelog: the
group's first heartbeat makes the coordinator create both internal topics. Six active
tasks (two subtopologies by three partitions) and, with the broker's
``group.streams.num.standby.replicas=1``, a standby of each stateful task
(`STREAMS_BROKER_CONFIGS`, which also shortens the session to 10 s).

Members come and go while the nemesis works on the brokers (the streams coordinator's
failover included):

- ``streams-a`` runs all along;
- ``streams-b`` leaves at half time (its tasks closed first, then the leave heartbeat)
  and rejoins with the same member id a little later, as a restarted consumer does;
- ``streams-c`` dies at 35% (it stops heartbeating with its connections open: a paused
  process) and stays dead past its session, so the coordinator expires it; then its
  process starts again, with a new member id and the same process id (Kafka Streams
  keeps it in its state directory).

Every reconciled assignment of every member, with its member epoch, goes into the History
(`History.streams`, in the digest); so do each member's fencing, leave and death. Once the
clients stop (the faults healed by then) the app waits for the group to converge -- every
member STABLE at one epoch, every task active on exactly one member, each stateful task's
standby on another member -- and records each live member's tasks (`History.streams_final`)
for the checkers (`simulation/streams_invariants.py`).
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field

from kafka_tools.client import KafkaClient
from kafka_tools.client.cluster import AdminError
from kafka_tools.client.streams_member import (
    MemberState,
    StreamsMember,
    SubtopologySpec,
    TopologySpec,
)
from simulation.history import History, StreamsAssignment, Task
from virtual_time.network import client_node

__all__ = ["STREAMS_BROKER_CONFIGS", "STREAMS_GROUP", "TOPOLOGY", "run_streams_app"]

STREAMS_GROUP = "sim-streams"
SOURCE = "sim-events"  # workload.EVENTS (not imported: workload registers this module)
REPARTITION = "sim-streams-by-key-repartition"
CHANGELOG = "sim-streams-counts-changelog"
TOPOLOGY = TopologySpec(
    1,
    (
        SubtopologySpec("0", source_topics=(SOURCE,), repartition_sink_topics=(REPARTITION,)),
        SubtopologySpec(
            "1", repartition_source_topics=((REPARTITION, 0),), changelog_topics=(CHANGELOG,)
        ),
    ),
)
STATEFUL = frozenset(s.subtopology_id for s in TOPOLOGY.subtopologies if s.changelog_topics)
#: How long a dead member keeps its tasks: the group's session, 10 s as the workload's
#: classic group has (Kafka's 45 s default would let a paused broker expire nobody), with
#: heartbeats every 2 s.
SESSION_S = 10.0
#: The broker configs (`scenario`) that give the streams group that session.
STREAMS_BROKER_CONFIGS = {
    "group.streams.num.standby.replicas": "1",
    "group.streams.session.timeout.ms": str(int(SESSION_S * 1000)),
    "group.streams.min.session.timeout.ms": str(int(SESSION_S * 1000)),
    "group.streams.heartbeat.interval.ms": "2000",
    "group.streams.min.heartbeat.interval.ms": "2000",
}
#: After the clients stop, how long the group has to converge before the checkers say no.
CONVERGE_WITHIN_S = 90.0
RETRY_S = 1.0


@dataclass
class _Instance:
    """One running member: its client node, client, driver and heartbeat task."""

    node: str
    member: StreamsMember
    client: KafkaClient
    runner: asyncio.Task[None]
    alive: bool = True


@dataclass
class _StreamsApp:
    bootstrap: str
    history: History
    rng: random.Random
    instances: dict[str, _Instance] = field(default_factory=dict)
    retired: list[_Instance] = field(default_factory=list)  # dead or left, restarted since
    _last: dict[str, tuple[object, ...]] = field(default_factory=dict)
    _gone: set[StreamsMember] = field(default_factory=set)  # dead or left: heard no more

    # ------------------------------------------------------------------ members
    def start(self, node: str, member_id: str | None = None) -> _Instance:
        """Start (or restart) the member on client node ``node``; its process id is the
        node's, its member id ``member_id`` or a new seeded one."""
        member_id = member_id or f"{node}-{self.rng.getrandbits(32):08x}"
        client = KafkaClient(self.bootstrap, client_id=node)
        member = StreamsMember(
            client,
            STREAMS_GROUP,
            TOPOLOGY,
            member_id=member_id,
            process_id=f"process-{node}",
            on_change=self._on_change,
        )
        with client_node(node):
            runner = asyncio.get_running_loop().create_task(
                self._run(node, member, client), name=f"sim-{node}"
            )
        instance = _Instance(node, member, client, runner)
        if node in self.instances:
            self.retired.append(self.instances[node])
        self.instances[node] = instance
        return instance

    async def _run(self, node: str, member: StreamsMember, client: KafkaClient) -> None:
        """Heartbeat until stopped; a coordinator not found or a cluster not reached is
        counted and tried again, as Kafka Streams' heartbeat manager retries."""
        connected = False
        while True:
            try:
                if not connected:
                    await client.connect()
                    connected = True
                await member.run()
            except (AdminError, OSError, ConnectionError) as exc:
                self.history.client_errors[f"{node} {type(exc).__name__}"] += 1
                await asyncio.sleep(RETRY_S)
                continue
            if member.state is MemberState.FATAL and member.error is not None:
                self.history.client_errors[f"{node} fatal {member.error.name}"] += 1
            return

    async def die(self, node: str) -> None:
        instance = self.instances[node]
        instance.member.pause()
        instance.alive = False
        self._gone.add(instance.member)  # an answer still on its way changes nothing
        self._note(instance.member, "died", empty=True)
        self._fault(f"streams member {instance.member.member_id} dies")

    async def leave(self, node: str) -> str:
        """Close its tasks, then send the leave heartbeat (one heartbeat in flight at a
        time, as Kafka Streams has)."""
        instance = self.instances[node]
        instance.member.stop()
        await instance.runner
        instance.alive = False
        self._gone.add(instance.member)
        self._note(instance.member, "left", empty=True)
        self._fault(f"streams member {instance.member.member_id} leaves")
        await instance.member.leave()
        instance.client.close()
        return instance.member.member_id

    # ------------------------------------------------------------------ history
    def _on_change(self, event: str, member: StreamsMember) -> None:
        if member not in self._gone:
            self._note(member, event)

    def _note(self, member: StreamsMember, event: str, *, empty: bool = False) -> None:
        owned = member.owned
        active, standby, warmup = (
            () if empty else _task_list(kind)
            for kind in (owned.active, owned.standby, owned.warmup)
        )
        key = (member.member_epoch, active, standby, warmup)
        if event == "heartbeat" and self._last.get(member.member_id) == key:
            return
        self._last[member.member_id] = key
        at_s = asyncio.get_running_loop().time()
        self.history.streams.append(
            StreamsAssignment(
                member.member_id, round(at_s, 6), event, member.member_epoch, active, standby,
                warmup,
            )
        )  # fmt: skip

    def _fault(self, what: str) -> None:
        self.history.faults.append(f"{asyncio.get_running_loop().time():.3f}s {what}")

    # -------------------------------------------------------------- convergence
    def live(self) -> list[StreamsMember]:
        return [i.member for i in self.instances.values() if i.alive]

    def converged(self) -> bool:
        members = self.live()
        if not members or any(m.state is not MemberState.STABLE for m in members):
            return False
        if len({m.member_epoch for m in members}) != 1:
            return False
        actives = [t for m in members for t in _task_list(m.owned.active)]
        if sorted(actives) != sorted(self.history.streams_tasks):
            return False
        if len(members) < 2:
            return True
        standbys = {t for m in members for t in _task_list(m.owned.standby)}
        return all(t in standbys for t in self.history.streams_tasks if t[0] in STATEFUL)

    def record_final(self) -> None:
        self.history.streams_final = {
            m.member_id: (_task_list(m.owned.active), _task_list(m.owned.standby))
            for m in self.live()
        }

    async def stop(self) -> None:
        everyone = [*self.retired, *self.instances.values()]
        for instance in everyone:
            instance.member.stop()
        for instance in everyone:
            if instance.alive:
                await instance.runner
            else:
                instance.runner.cancel()
            instance.client.close()


def _task_list(tasks: dict[str, frozenset[int]]) -> tuple[Task, ...]:
    return tuple(sorted((s, p) for s, ps in tasks.items() for p in ps))


async def _sleep_until(at_s: float) -> None:
    await asyncio.sleep(max(0.0, at_s - asyncio.get_running_loop().time()))


async def run_streams_app(
    bootstrap: str, stop_at_s: float, history: History, rng: random.Random, partitions: int
) -> None:
    """The app from now until the clients stop and the group converged (or could not);
    ``partitions`` is the source topic's partition count (the tasks per subtopology)."""
    loop = asyncio.get_running_loop()
    history.streams_tasks = tuple(
        (s.subtopology_id, p) for s in TOPOLOGY.subtopologies for p in range(partitions)
    )
    app = _StreamsApp(bootstrap, history, rng)
    start, span = loop.time(), stop_at_s - loop.time()
    for node in ("streams-a", "streams-b", "streams-c"):
        app.start(node)
    await _sleep_until(start + 0.35 * span)
    await app.die("streams-c")
    await _sleep_until(start + 0.5 * span)
    left = await app.leave("streams-b")
    await _sleep_until(min(stop_at_s, loop.time() + 20.0))
    app.start("streams-b", left)
    await _sleep_until(min(stop_at_s, start + 0.35 * span + 2 * SESSION_S))
    app.start("streams-c")
    await _sleep_until(stop_at_s)
    deadline = loop.time() + CONVERGE_WITHIN_S
    while not app.converged() and loop.time() < deadline:
        await asyncio.sleep(1.0)
    app.record_final()
    await app.stop()
