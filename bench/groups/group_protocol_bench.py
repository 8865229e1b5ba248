"""Classic consumer groups beside KIP-848 consumer groups: joins and deaths, side by side.

Three kinds of member on the same broker and the same topic (``--partitions`` 6):

* ``aiokafka/classic``: aiokafka (JoinGroup/SyncGroup/Heartbeat, client-side range
  assignor, eager rebalances);
* ``ck/classic``: confluent-kafka (librdkafka) with ``group.protocol=classic`` (its
  default assignors ``range,roundrobin``, eager);
* ``ck/consumer``: confluent-kafka with ``group.protocol=consumer`` (KIP-848:
  ConsumerGroupHeartbeat, the broker's ``uniform`` assignor, incremental).

Every member runs in a child process of its own (this script with ``--member``), so it
can be killed with SIGKILL: no LeaveGroup, no leaving heartbeat, its session has to
expire. Each child reports on its stdout, stamped with ``time.monotonic()`` (the
system-wide CLOCK_MONOTONIC, comparable across processes): its start, its assignment
whenever it changes, and the partitions of every batch of records it receives. A
producer in this process writes one record to every partition every ``--produce-ms``.

One round of one kind is one group's life, a fresh group id each time:

1. member A starts on the empty group: **first member -> first record** is A's time from
   its start (aiokafka: ``start()``; confluent-kafka: ``subscribe()``, the first poll
   right after) to its first record (``auto.offset.reset=earliest``: records wait);
2. member B starts; once A and B hold the six partitions between them and each has
   received records of every partition it holds, and after a random 0 to
   one heartbeat interval (``--seed``: a member joins at any phase of the others'
   heartbeats, which their last rebalance aligned),
3. member C starts: **third member -> first record** is C's time from its start to its
   first record, joining a group of two that are consuming; **third member: others'
   pause** is the longest time A or B went without receiving a record from C's start
   until the three hold and consume the partitions (an eager rebalance stops everyone;
   KIP-848 moves only what moves); the note's ``quiet`` is the same figure for A and B
   between their settling and C's start, the gaps of a group that nothing disturbs;
4. once the three hold the partitions and consume them, and a random 0 to
   one heartbeat interval more (the session expires a session timeout after A's last
   heartbeat, not after the kill), A is killed with SIGKILL: **death -> consumed by
   survivors** is the time from the kill until records of every partition A held have
   been received by B or C (``first partition`` in the note: until the first of them
   was).
5. B and C close (a clean leave) and the next kind's round starts.

The three processes of a round are started first and wait for a ``go`` line, so an
interpreter's start-up and imports are not in the figures.

Session timeouts are equal for both protocols (``--session-ms``, 10000): the classic
clients ask for it (``session.timeout.ms``), the consumer protocol's is the broker's
(``--override group.consumer.session.timeout.ms=...`` and its min bound); the heartbeat
interval too (``--heartbeat-ms``, 3000: librdkafka's classic default; the consumer
protocol's is broker-dictated, ``group.consumer.heartbeat.interval.ms``). The broker
keeps Kafka's ``group.initial.rebalance.delay.ms`` of 3000 unless ``--initial-delay-ms``
says otherwise: a classic group's first JoinGroup waits it out; a consumer group has no
such delay. Fetch max wait 100 ms in both clients, offsets auto-committed every second.

The broker is ``python -m minikafka serve --port 0 --brokers N`` (``--brokers``, 1) in a
child process, as ``broker_bench.py`` starts it; the topic's replication factor is
min(3, brokers). It prints one table: per kind and scenario, the samples, p50, min and
max in ms, and a note (timeouts, what happened). Figures, never assertions.

Run: ``.venv/bin/python -m bench.groups.group_protocol_bench`` (3 rounds, a little over 3 minutes)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testkit.broker_process import BrokerProcess

ROOT = Path(__file__).resolve().parents[2]
KINDS = ("aiokafka/classic", "ck/classic", "ck/consumer")
SCENARIOS = (
    "first member -> first record",
    "third member -> first record",
    "third member: others' pause",
    "death -> consumed by survivors",
)
WAIT_S = 60.0  # a step that takes longer gives up, and its round says so
POLL_S = 0.01
FETCH_MAX_WAIT_MS = 100
AUTO_COMMIT_MS = 1000


# ----------------------------------------------------------------------- the members


def _emit(event: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"ev": event, "t": time.monotonic(), **fields}) + "\n")
    sys.stdout.flush()


def _ready_then_go() -> threading.Event:
    """Say ``ready`` (imports done), wait for the parent's ``go`` line; the event returned
    is set when stdin closes (the parent's way to say "close cleanly") or on SIGTERM."""
    stop = threading.Event()
    _emit("ready")
    if not sys.stdin.readline():
        stop.set()

    def read() -> None:
        sys.stdin.read()
        stop.set()

    threading.Thread(target=read, daemon=True).start()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    return stop


def member_ck(opts: dict[str, Any]) -> None:
    from confluent_kafka import Consumer

    config: dict[str, Any] = {
        "bootstrap.servers": opts["bootstrap"],
        "group.id": opts["group"],
        "group.protocol": opts["protocol"],
        "auto.offset.reset": "earliest",
        "enable.auto.commit": True,
        "auto.commit.interval.ms": AUTO_COMMIT_MS,
        "fetch.wait.max.ms": FETCH_MAX_WAIT_MS,
    }
    if opts["protocol"] == "classic":  # the consumer protocol's are the broker's
        config["session.timeout.ms"] = opts["session_ms"]
        config["heartbeat.interval.ms"] = opts["heartbeat_ms"]
    stop = _ready_then_go()
    consumer = Consumer(config)
    _emit("start")
    consumer.subscribe([opts["topic"]])
    assigned: list[int] = []
    try:
        while not stop.is_set():
            batch = consumer.consume(num_messages=1000, timeout=0.05)
            now = time.monotonic()
            parts = sorted({m.partition() for m in batch if m.error() is None})
            if parts:
                _emit("rec", parts=parts, at=now)
            current = sorted(tp.partition for tp in consumer.assignment())
            if current != assigned:
                assigned = current
                _emit("assign", parts=current)
    finally:
        consumer.close()
        _emit("closed")


def member_aiokafka(opts: dict[str, Any]) -> None:
    from aiokafka import AIOKafkaConsumer

    stop = _ready_then_go()

    async def run() -> None:
        consumer = AIOKafkaConsumer(
            opts["topic"],
            bootstrap_servers=opts["bootstrap"],
            group_id=opts["group"],
            auto_offset_reset="earliest",
            enable_auto_commit=True,
            auto_commit_interval_ms=AUTO_COMMIT_MS,
            fetch_max_wait_ms=FETCH_MAX_WAIT_MS,
            session_timeout_ms=opts["session_ms"],
            heartbeat_interval_ms=opts["heartbeat_ms"],
        )
        _emit("start")
        await consumer.start()
        assigned: list[int] = []
        try:
            while not stop.is_set():
                batch = await consumer.getmany(timeout_ms=50)
                now = time.monotonic()
                parts = sorted(tp.partition for tp, records in batch.items() if records)
                if parts:
                    _emit("rec", parts=parts, at=now)
                current = sorted(tp.partition for tp in consumer.assignment())
                if current != assigned:
                    assigned = current
                    _emit("assign", parts=current)
        finally:
            await consumer.stop()
            _emit("closed")

    asyncio.run(run())


# ----------------------------------------------------------------------- the parent


@dataclass
class Member:
    """A member's child process and what it reported."""

    name: str
    proc: asyncio.subprocess.Process
    ready: bool = False
    start_t: float | None = None
    first_rec_t: float | None = None
    assignment: frozenset[int] = frozenset()
    assign_t: float = 0.0
    received: list[tuple[float, int]] = field(default_factory=list)  # (time, partition)
    last_seen: dict[int, float] = field(default_factory=dict)  # partition -> last batch
    closed: bool = False
    reader: asyncio.Task[None] | None = None

    async def read(self) -> None:
        assert self.proc.stdout is not None
        async for raw in self.proc.stdout:
            try:
                event = json.loads(raw)
            except ValueError:
                continue
            kind, t = event["ev"], event["t"]
            if kind == "ready":
                self.ready = True
            elif kind == "start":
                self.start_t = t
            elif kind == "assign":
                self.assignment, self.assign_t = frozenset(event["parts"]), t
            elif kind == "rec":
                at = event["at"]
                if self.first_rec_t is None:
                    self.first_rec_t = at
                for p in event["parts"]:
                    self.received.append((at, p))
                    self.last_seen[p] = at
            elif kind == "closed":
                self.closed = True

    def consuming(self) -> bool:
        """Holds partitions and has received records of each since it got them."""
        return bool(self.assignment) and all(
            self.last_seen.get(p, -1.0) > self.assign_t for p in self.assignment
        )


class Run:
    def __init__(self, args: argparse.Namespace, bootstrap: str, topic: str, log: Path) -> None:
        self.args = args
        self.bootstrap = bootstrap
        self.topic = topic
        self.log = log
        self.members: list[Member] = []
        self.random = random.Random(args.seed)

    async def spawn(self, kind: str, group: str, name: str) -> Member:
        """The member's process, its imports done by the time ``go`` is called."""
        client, protocol = kind.split("/")
        opts = {
            "client": client,
            "protocol": protocol,
            "bootstrap": self.bootstrap,
            "group": group,
            "topic": self.topic,
            "session_ms": self.args.session_ms,
            "heartbeat_ms": self.args.heartbeat_ms,
        }
        with self.log.open("a") as log:
            log.write(f"--- {kind} {group} {name}\n")
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "bench.groups.group_protocol_bench",
                "--member",
                json.dumps(opts),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                cwd=ROOT,
            )
        member = Member(name, proc)
        member.reader = asyncio.create_task(member.read())
        self.members.append(member)
        return member

    async def go(self, member: Member) -> None:
        """Start the member (it was spawned before, so its interpreter's start-up and
        imports are out of the way)."""
        if not await wait_for(lambda: member.ready):
            raise RuntimeError(f"member {member.name} never said ready (see {self.log})")
        assert member.proc.stdin is not None
        member.proc.stdin.write(b"go\n")
        await member.proc.stdin.drain()

    async def close(self, member: Member) -> None:
        """Clean close (LeaveGroup / leaving heartbeat): stdin closed, then wait."""
        if member.proc.returncode is None:
            assert member.proc.stdin is not None
            with contextlib.suppress(Exception):
                member.proc.stdin.close()
            try:
                await asyncio.wait_for(member.proc.wait(), 15)
            except TimeoutError:
                member.proc.kill()
                await member.proc.wait()
        if member.reader is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(member.reader, 5)

    async def close_all(self) -> None:
        await asyncio.gather(*(self.close(m) for m in self.members))
        self.members.clear()


async def wait_for(what: Callable[[], bool], timeout_s: float = WAIT_S) -> bool:
    deadline = time.monotonic() + timeout_s
    while not what():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(POLL_S)
    return True


def settled(members: list[Member], partitions: int) -> bool:
    """The members hold every partition once between them and consume all of them."""
    held = [m.assignment for m in members]
    return (
        all(m.consuming() for m in members)
        and sum(len(h) for h in held) == partitions
        and frozenset().union(*held) == frozenset(range(partitions))
    )


def longest_pause(members: list[Member], since: float, until: float) -> float:
    """The longest time, between ``since`` and ``until``, that one of ``members`` went
    without receiving any record (counted from its last batch before ``since``)."""
    longest = 0.0
    for m in members:
        times = sorted(t for t, _p in m.received if t <= until)
        before = [t for t in times if t < since]
        points = [before[-1] if before else since, *(t for t in times if t >= since), until]
        longest = max(longest, *(b - a for a, b in itertools.pairwise(points)))
    return longest


@dataclass
class Figure:
    kind: str
    scenario: str
    samples_ms: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    extra: dict[str, list[float]] = field(default_factory=dict)  # note: name p50 (min-max)


async def one_round(
    run: Run, kind: str, round_no: int, figures: dict[tuple[str, str], Figure]
) -> None:
    group = f"gpb-{uuid.uuid4().hex[:6]}-{kind.replace('/', '-')}-{round_no}"
    first, third, pause, death = (figures[kind, s] for s in SCENARIOS)
    parts = run.args.partitions
    try:
        a, b, c = [await run.spawn(kind, group, name) for name in "ABC"]
        await run.go(a)
        if not await wait_for(lambda: a.first_rec_t is not None and a.start_t is not None):
            first.notes.append(f"round {round_no}: A got no record in {WAIT_S:.0f} s")
            return
        assert a.first_rec_t is not None and a.start_t is not None
        first.samples_ms.append((a.first_rec_t - a.start_t) * 1000)

        await run.go(b)
        if not await wait_for(lambda: settled([a, b], parts)):
            third.notes.append(f"round {round_no}: A+B never settled")
            return
        ab_settled = time.monotonic()
        # C joins at a random phase of A's and B's heartbeats (aligned by their last
        # rebalance), as a member does: a classic join waits for their next heartbeat.
        await asyncio.sleep(run.random.uniform(0, run.args.heartbeat_ms / 1000))
        await run.go(c)
        if not await wait_for(lambda: c.first_rec_t is not None and c.start_t is not None):
            third.notes.append(f"round {round_no}: C got no record in {WAIT_S:.0f} s")
            return
        assert c.first_rec_t is not None and c.start_t is not None
        third.samples_ms.append((c.first_rec_t - c.start_t) * 1000)

        if not await wait_for(lambda: settled([a, b, c], parts)):
            death.notes.append(f"round {round_no}: A+B+C never settled")
            return
        assert c.start_t is not None
        pause.samples_ms.append(longest_pause([a, b], c.start_t, time.monotonic()) * 1000)
        quiet = longest_pause([a, b], ab_settled, c.start_t) * 1000
        pause.extra.setdefault("quiet", []).append(quiet)
        # The kill, too, at a random phase of the heartbeats: the session expires a
        # session timeout after A's last heartbeat, not after the kill.
        await asyncio.sleep(run.random.uniform(0, run.args.heartbeat_ms / 1000))
        lost = a.assignment
        killed_at = time.monotonic()
        a.proc.send_signal(signal.SIGKILL)  # our own child: no leave, session expires

        def taken_over() -> dict[int, float]:
            seen: dict[int, float] = {}
            for survivor in (b, c):
                for at, p in survivor.received:
                    if p in lost and at > killed_at and at < seen.get(p, float("inf")):
                        seen[p] = at
            return seen

        if not await wait_for(
            lambda: len(taken_over()) == len(lost), run.args.session_ms / 1000 + WAIT_S
        ):
            death.notes.append(f"round {round_no}: {sorted(lost)} not all taken over")
            return
        seen = taken_over()
        death.samples_ms.append((max(seen.values()) - killed_at) * 1000)
        first_ms = (min(seen.values()) - killed_at) * 1000
        death.extra.setdefault("first partition", []).append(first_ms)
    finally:
        await run.close_all()


# ---------------------------------------------------------------------------- setup


def broker_args(args: argparse.Namespace) -> list[str]:
    s, h = args.session_ms, args.heartbeat_ms
    overrides = {
        "group.initial.rebalance.delay.ms": args.initial_delay_ms,
        "group.min.session.timeout.ms": min(6000, s),
        "group.consumer.session.timeout.ms": s,
        "group.consumer.min.session.timeout.ms": min(45000, s),
        "group.consumer.max.session.timeout.ms": max(60000, s),
        "group.consumer.heartbeat.interval.ms": h,
        "group.consumer.min.heartbeat.interval.ms": min(5000, h),
        "group.consumer.max.heartbeat.interval.ms": max(15000, h),
    }
    extra = ["--brokers", str(args.brokers)]
    for key, value in overrides.items():
        extra += ["--override", f"{key}={value}"]
    return extra


def create_topic(bootstrap: str, partitions: int, replication: int) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    name = f"gpb-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, replication)])
    futures[name].result(30)
    return name


class Producer:
    """One record to every partition every ``period_s``, in a thread."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, period_s: float) -> None:
        from confluent_kafka import Producer as CkProducer

        self._producer = CkProducer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self._topic, self._partitions, self._period = topic, partitions, period_s
        self._stop = threading.Event()
        self.sent = 0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            for p in range(self._partitions):
                self._producer.produce(self._topic, b"x" * 100, partition=p)
                self.sent += 1
            self._producer.poll(0)
            next_at += self._period
            self._stop.wait(max(0.0, next_at - time.monotonic()))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self._producer.flush(10)


def cpu_s(pid: int) -> float:
    """utime + stime of a process, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# ---------------------------------------------------------------------------- output


def print_table(figures: list[Figure]) -> None:
    header = ["kind", "scenario", "n", "p50 ms", "min ms", "max ms", "samples ms / note"]
    rows = [header]
    for f in figures:
        s = f.samples_ms
        cells = [f.kind, f.scenario, str(len(s))]
        if s:
            cells += [f"{statistics.median(s):.0f}", f"{min(s):.0f}", f"{max(s):.0f}"]
        else:
            cells += ["-", "-", "-"]
        note = " ".join(f"{x:.0f}" for x in s)
        for name, values in f.extra.items():
            note += (
                f"; {name} p50 {statistics.median(values):.0f}"
                f" ({min(values):.0f}-{max(values):.0f})"
            )
        note = "; ".join(x for x in [note, *f.notes] if x)
        cells.append(note)
        rows.append(cells)
    widths = [max(len(r[i]) for r in rows) for i in range(len(header) - 1)]
    for i, r in enumerate(rows):
        left = [r[0].ljust(widths[0]), r[1].ljust(widths[1])]
        right = [r[j].rjust(widths[j]) for j in range(2, len(widths))]
        print("  ".join([*left, *right, r[-1]]))
        if i == 0:
            print("  ".join("-" * w for w in [*widths, len(header[-1])]))


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3, help="rounds per kind (3)")
    p.add_argument("--kinds", default=",".join(KINDS), help=f"comma list of {', '.join(KINDS)}")
    p.add_argument("--brokers", type=int, default=1, help="brokers of the subprocess (1)")
    p.add_argument("--partitions", type=int, default=6, help="of the topic (6)")
    p.add_argument("--session-ms", type=int, default=10000, help="both protocols (10000)")
    p.add_argument("--heartbeat-ms", type=int, default=3000, help="both protocols (3000)")
    p.add_argument(
        "--initial-delay-ms",
        type=int,
        default=3000,
        help="the broker's group.initial.rebalance.delay.ms (3000, Kafka's)",
    )
    p.add_argument("--produce-ms", type=float, default=20, help="a record per partition (20)")
    p.add_argument("--seed", type=int, default=1, help="of the random phases (1)")
    p.add_argument("--json", action="store_true", help="also one JSON line per row")
    p.add_argument("--member", help=argparse.SUPPRESS)  # internal: run one member
    args = p.parse_args(argv)
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        p.error(f"unknown kind(s) {unknown}; known: {', '.join(KINDS)}")
    args.kinds = kinds
    return args


async def run_all(args: argparse.Namespace, bootstrap: str, log: Path) -> list[Figure]:
    topic = await asyncio.to_thread(create_topic, bootstrap, args.partitions, min(3, args.brokers))
    producer = await asyncio.to_thread(
        Producer, bootstrap, topic, args.partitions, args.produce_ms / 1000
    )
    figures = {(k, s): Figure(k, s) for k in args.kinds for s in SCENARIOS}
    run = Run(args, bootstrap, topic, log)
    try:
        for round_no in range(1, args.rounds + 1):
            for kind in args.kinds:
                started = time.monotonic()
                await one_round(run, kind, round_no, figures)
                print(f"# round {round_no} {kind}: {time.monotonic() - started:.1f} s", flush=True)
    finally:
        await run.close_all()
        await asyncio.to_thread(producer.stop)
    print(f"# topic {topic}: {producer.sent} records produced")
    return list(figures.values())


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.member:
        opts = json.loads(args.member)
        (member_ck if opts["client"] == "ck" else member_aiokafka)(opts)
        return 0
    workdir = Path(tempfile.mkdtemp(prefix="group-protocol-bench-"))
    log = workdir / "members.log"
    broker = BrokerProcess(
        broker_args(args), stderr=(workdir / "broker.log").open("w"), cwd=ROOT, log_level="WARNING"
    )
    started, cpu0 = time.monotonic(), cpu_s(broker.proc.pid)
    import aiokafka
    import confluent_kafka

    print(
        f"# minikafka x{args.brokers} pid {broker.proc.pid} at {broker.bootstrap}; "
        f"{args.partitions} partitions; session {args.session_ms} ms, heartbeat "
        f"{args.heartbeat_ms} ms, initial rebalance delay {args.initial_delay_ms} ms; "
        f"aiokafka {aiokafka.__version__}, confluent-kafka {confluent_kafka.version()[0]} "
        f"(librdkafka {confluent_kafka.libversion()[0]}); logs in {workdir}",
        flush=True,
    )
    try:
        figures = asyncio.run(run_all(args, broker.bootstrap, log))
        elapsed, cpu = time.monotonic() - started, cpu_s(broker.proc.pid) - cpu0
        print(f"# {elapsed:.0f} s; broker CPU {100 * cpu / elapsed:.0f}% of one core meanwhile")
    finally:
        code = broker.stop()
        if code != 0:
            print(f"warning: broker exited with {code}", file=sys.stderr)
    print_table(figures)
    if args.json:
        for f in figures:
            print(json.dumps(f.__dict__))
    return 0


if __name__ == "__main__":
    sys.exit(main())
