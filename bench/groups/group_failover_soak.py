"""Group failover soak: does a consumer group keep reading while brokers restart one by one?

The user report it reproduces as a figure: three brokers, an idempotent acks=all producer
and a two-member aiokafka group (session 10 s, heartbeat 1 s, a commit after each
batch); brokers stopped and restarted one at a time every ~10 s. Nothing acknowledged
was lost, but after about eight cycles the group stopped reading for good, every
``getmany()`` raising ``KafkaError: Unexpected exception in heartbeat task:
GroupLoadInProgressError()``.

The brokers: ``python -m minikafka serve --brokers 3 --port 0 --control-port 0`` in a child
process (its own interpreter; ``--broker-cwd`` picks the checkout), INFO log to a file,
``min.insync.replicas=2`` and ``offsets.topic.replication.factor=3``. The clients, in
this process, on one event loop:

* a producer (``enable_idempotence=True``, ``acks="all"``) sending records numbered
  0, 1, 2... (key = the number) at ``--rate`` per second to a topic of ``--partitions``
  partitions (replication 3, ``min.insync.replicas=2``); a record whose send fails is
  sent again, as an application would, and the failure is counted by kind;
* two group members (``session_timeout_ms=10000``, ``heartbeat_interval_ms=1000``, no
  auto-commit, ``commit()`` after each non-empty ``getmany``), one task each; an
  exception is counted by kind and the loop goes on (``getmany`` again after 0.5 s).

``--cycles`` times: stop broker ``i % 3`` through the control endpoint
(``POST /brokers/{id}/stop``), wait ``--interval`` s (jittered 10% with ``--seed``),
start it again, and wait until ``GET /status`` says ``ok`` (every broker up, every
partition led and fully in sync, ``__consumer_offsets`` included), at most
``--health-timeout`` s. Then the producer stops, the group gets up to ``--drain`` s to
see every acknowledged record, and a fresh consumer outside the group reads the topic
from the beginning.

Figures: records acknowledged; acknowledged records lost (not in the topic at the end);
acknowledged records never delivered to the group; duplicates delivered; the longest
stall (the longest time the group went without a delivery while acknowledged records
were waiting for it); produce-to-delivery latency; client errors by kind, the producer's
and the consumers' apart (and the aiokafka log's warnings and errors, by message); each
member's state at the end (a member whose last ``getmany`` calls all raised is stuck);
per cycle, how long the cluster took to heal; the broker log's lines saying a member
"has failed" or was removed, and its ERROR/Traceback lines. A verdict line applies four
criteria: nothing acknowledged lost, everything acknowledged delivered, longest stall
below the session timeout, and no client error of a kind a Kafka broker would not cause
while its brokers restart (``EXPECTED_PRODUCER`` / ``EXPECTED_CONSUMER`` in
``group_failover_verdict.py``). The exit code is 0 whatever the verdict: a bench asserts nothing.

Run: ``.venv/bin/python -m bench.groups.group_failover_soak [--cycles 14] [--interval 10]``
(about ``cycles * (interval + 5)`` s plus a minute); ``--cycles 2 --interval 5`` for a
quick look; ``--broker-cwd DIR`` for another checkout's broker.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import random
import re
import signal
import sys
import tempfile
import time
import uuid
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from bench.groups.group_failover_verdict import (
    SESSION_TIMEOUT_MS,
    _r,
    broker_log_lines,
    error_kind,
    fold,
    print_report,
    verdict,
)
from bench.lib.stats import percentile
from broker.control.client import ControlClient, ControlClientError
from testkit.broker_process import entry_module

ROOT = Path(__file__).resolve().parents[2]

HEARTBEAT_INTERVAL_MS = 1000
BROKERS = 3


class Clock:
    """Seconds since the run started."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.wall0 = time.time()  # to place the broker log's lines on the same axis

    def now(self) -> float:
        return time.monotonic() - self.t0


# -- what the clients saw --------------------------------------------------------------


@dataclass
class Member:
    index: int
    deliveries: int = 0
    batches: int = 0
    commits: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    last_ok_poll_s: float | None = None  # the last getmany that did not raise
    last_delivery_s: float | None = None
    last_error: str = ""
    last_error_s: float | None = None
    failing_polls: int = 0  # getmany calls that raised since the last one that did not
    starts: int = 0
    assigned: int = 0

    def state(self) -> str:
        if self.failing_polls >= 3 and self.last_ok_poll_s is not None:
            return (
                f"stuck since t={self.last_ok_poll_s:.1f}s ({self.failing_polls} getmany "
                f"raised in a row, last: {self.last_error})"
            )
        if self.failing_polls >= 3:
            return f"never polled ({self.failing_polls} getmany raised: {self.last_error})"
        return f"reading ({self.assigned} partitions at the end)"


@dataclass
class Ledger:
    """Acknowledged ids, deliveries to the group, and the stall figure."""

    clock: Clock
    sent_at: dict[int, float] = field(default_factory=dict)
    acked: set[int] = field(default_factory=set)
    delivered_at: dict[int, float] = field(default_factory=dict)
    deliveries: int = 0
    pending: set[int] = field(default_factory=set)  # acknowledged, not yet delivered
    pending_since: float | None = None
    last_delivery: float | None = None
    longest_stall_s: float = 0.0
    longest_stall_at_s: float = 0.0
    producer_errors: Counter[str] = field(default_factory=Counter)
    gave_up: int = 0

    def on_ack(self, rid: int) -> None:
        if rid in self.acked:
            return
        self.acked.add(rid)
        if rid not in self.delivered_at:
            if not self.pending:
                self.pending_since = self.clock.now()
            self.pending.add(rid)

    def _gap(self, now: float) -> None:
        if self.pending and self.pending_since is not None:
            start = self.pending_since
            if self.last_delivery is not None:
                start = max(start, self.last_delivery)
            if now - start > self.longest_stall_s:
                self.longest_stall_s = now - start
                self.longest_stall_at_s = start

    def on_batch(self, rids: list[int]) -> None:
        now = self.clock.now()
        self._gap(now)
        self.last_delivery = now
        for rid in rids:
            self.deliveries += 1
            if rid not in self.delivered_at:
                self.delivered_at[rid] = now
                self.pending.discard(rid)
        if not self.pending:
            self.pending_since = None

    def close(self) -> None:
        """The final gap: pending records the group never got."""
        self._gap(self.clock.now())


@dataclass
class Cycle:
    index: int
    broker: int
    stopped_at_s: float
    down_s: float = 0.0
    healthy_after_s: float | None = None  # from the start call
    note: str = ""


# -- the broker child process ----------------------------------------------------------


class Cluster:
    """``python -m minikafka serve --brokers 3 --control-port 0`` and its control endpoint."""

    def __init__(self, proc: asyncio.subprocess.Process, bootstrap: str, control: str) -> None:
        self.proc = proc
        self.bootstrap = bootstrap
        self.control = ControlClient(control, timeout_s=30.0)

    @classmethod
    async def start(cls, args: argparse.Namespace, log_file: Any) -> Cluster:
        checkout = args.broker_cwd or ROOT
        cmd = [sys.executable, "-m", entry_module(Path(checkout)), "--log-level", "INFO", "serve"]
        cmd += ["--brokers", str(BROKERS), "--port", "0", "--control-port", "0"]
        cmd += ["--override", "min.insync.replicas=2"]
        cmd += ["--override", "offsets.topic.replication.factor=3"]
        if args.data_dir:
            cmd += ["--data-dir", args.data_dir]
        proc = await asyncio.create_subprocess_exec(
            *cmd,
            cwd=checkout,
            stdout=asyncio.subprocess.PIPE,
            stderr=log_file,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        assert proc.stdout is not None
        try:
            line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
        except TimeoutError:
            line = ""
        match = re.match(r"minikafka ready: bootstrap=(\S+) control=(\S+)", line)
        if match is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
            raise RuntimeError(f"broker did not start: {line!r}")
        return cls(proc, match.group(1), match.group(2))

    async def call(self, method: str, path: str) -> Any:
        return await asyncio.to_thread(self.control.request, method, path)

    async def wait_healthy(self, bound_s: float) -> tuple[bool, list[str]]:
        deadline = time.monotonic() + bound_s
        problems: list[str] = []
        while True:
            try:
                status = await self.call("GET", "/status")
                if status.get("status") == "ok":
                    return True, []
                problems = list(status.get("problems", []))
            except ControlClientError as exc:
                problems = [str(exc)]
            if time.monotonic() >= deadline:
                return False, problems
            await asyncio.sleep(0.25)

    async def stop(self) -> int | None:
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.proc.wait(), 60)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        return self.proc.returncode


# -- the clients -----------------------------------------------------------------------


class AiokafkaLog(logging.Handler):
    """aiokafka's own warnings and errors (retries it does not show the application)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.counts: Counter[str] = Counter()

    def emit(self, record: logging.LogRecord) -> None:
        who = "producer" if ".producer" in record.name else "consumer"
        if record.name.startswith("aiokafka.conn") or record.name == "aiokafka.cluster":
            who = "client"
        try:
            message = record.getMessage()
        except Exception:
            message = str(record.msg)
        message = fold(message)
        self.counts[f"{who} {record.levelname}: {message}"[:200]] += 1


async def produce(
    args: argparse.Namespace,
    bootstrap: str,
    topic: str,
    ledger: Ledger,
    stop: asyncio.Event,
    rng: random.Random,
) -> int:
    """Send numbered records at ``--rate`` until ``stop``; then resend what failed, for at
    most ``--drain`` s. Returns the number of ids used."""
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        enable_idempotence=True,
        acks="all",
        linger_ms=5,
        request_timeout_ms=30000,
        client_id="soak-producer",
    )
    started = False
    while not started:
        try:
            await producer.start()
            started = True
        except Exception as exc:
            ledger.producer_errors[f"start: {error_kind(exc)}"] += 1
            await asyncio.sleep(1)
    pad = rng.randbytes(max(0, args.size - 24)).hex()[: max(0, args.size - 24)].encode()
    in_flight = asyncio.Semaphore(args.max_in_flight)
    retry: deque[int] = deque()
    next_id = 0
    outstanding: set[asyncio.Future[Any]] = set()

    def done(rid: int, fut: asyncio.Future[Any]) -> None:
        in_flight.release()
        outstanding.discard(fut)
        if fut.cancelled():
            retry.append(rid)
            return
        exc = fut.exception()
        if exc is None:
            ledger.on_ack(rid)
        else:
            ledger.producer_errors[error_kind(exc)] += 1
            retry.append(rid)

    async def send(rid: int) -> None:
        await in_flight.acquire()
        ledger.sent_at.setdefault(rid, ledger.clock.now())
        try:
            fut = await producer.send(topic, key=b"%d" % rid, value=b"soak %012d " % rid + pad)
        except Exception as exc:
            in_flight.release()
            ledger.producer_errors[error_kind(exc)] += 1
            retry.append(rid)
            await asyncio.sleep(0.1)
            return
        outstanding.add(fut)
        fut.add_done_callback(lambda f, rid=rid: done(rid, f))

    try:
        t_start = time.monotonic()
        sent = 0
        while not stop.is_set():
            due = t_start + sent / args.rate
            delay = due - time.monotonic()
            if delay < -1.0:  # blocked a while: carry on at the rate, no burst to catch up
                t_start, sent = time.monotonic(), 0
                continue
            if delay > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), delay)
                continue
            if retry:
                rid = retry.popleft()
            else:
                rid, next_id = next_id, next_id + 1
            await send(rid)
            sent += 1
        # the application's last word: every failed record again, until acknowledged
        deadline = time.monotonic() + args.drain
        while (retry or outstanding) and time.monotonic() < deadline:
            if retry:
                await send(retry.popleft())
            else:
                await asyncio.wait(list(outstanding), timeout=1)
        ledger.gave_up = sum(1 for r in range(next_id) if r not in ledger.acked)
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(producer.stop(), 30)
    return next_id


async def consume(
    member: Member,
    bootstrap: str,
    topic: str,
    group: str,
    ledger: Ledger,
    stop: asyncio.Event,
) -> None:
    """A group member as an application writes it: getmany, handle, commit; on an
    exception log it and poll again."""
    clock = ledger.clock
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        client_id=f"soak-member-{member.index}",
        session_timeout_ms=SESSION_TIMEOUT_MS,
        heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    started = False

    def failed(exc: Exception, what: str) -> None:
        kind = error_kind(exc) if what == "getmany" else f"{what}: {error_kind(exc)}"
        member.errors[kind] += 1
        member.last_error = kind
        member.last_error_s = clock.now()

    try:
        while not stop.is_set():
            if not started:
                try:
                    await consumer.start()
                    started = True
                    member.starts += 1
                except Exception as exc:
                    failed(exc, "start")
                    await asyncio.sleep(1)
                continue
            try:
                batches = await consumer.getmany(timeout_ms=500, max_records=1000)
            except Exception as exc:
                failed(exc, "getmany")
                member.failing_polls += 1
                await asyncio.sleep(0.5)
                continue
            member.failing_polls = 0
            member.last_ok_poll_s = clock.now()
            member.assigned = len(consumer.assignment())
            rids = [int(r.key) for records in batches.values() for r in records]
            if not rids:
                continue
            ledger.on_batch(rids)
            member.batches += 1
            member.deliveries += len(rids)
            member.last_delivery_s = clock.now()
            try:
                await consumer.commit()
                member.commits += 1
            except Exception as exc:
                failed(exc, "commit")
    finally:
        if started:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(consumer.stop(), 15)


async def read_topic(
    bootstrap: str, topic: str, partitions: int, bound_s: float
) -> tuple[set[int], int, str]:
    """Every id in the topic, from a fresh consumer outside any group: (ids, records, note)."""
    reader = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        client_id="soak-reader",
    )
    ids: set[int] = set()
    records = 0
    await reader.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        reader.assign(tps)
        await reader.seek_to_beginning(*tps)
        end = await reader.end_offsets(tps)
        deadline = time.monotonic() + bound_s
        while [tp for tp in tps if await reader.position(tp) < end[tp]]:
            if time.monotonic() > deadline:
                return ids, records, f"read cut short after {bound_s:.0f} s"
            batches = await reader.getmany(timeout_ms=1000, max_records=5000)
            for recs in batches.values():
                for r in recs:
                    records += 1
                    ids.add(int(r.key))
        return ids, records, ""
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(reader.stop(), 15)


async def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics(
            [
                NewTopic(
                    topic,
                    num_partitions=partitions,
                    replication_factor=BROKERS,
                    topic_configs={"min.insync.replicas": "2"},
                )
            ]
        )
    finally:
        await admin.close()


# -- the run ---------------------------------------------------------------------------


async def run(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    run_id = uuid.UUID(int=rng.getrandbits(128)).hex[:8]
    topic, group = f"soak-{run_id}", f"soak-group-{run_id}"
    clock = Clock()
    hard_deadline = time.monotonic() + args.max_seconds
    notes: list[str] = []
    aiokafka_log = AiokafkaLog()
    logging.getLogger("aiokafka").addHandler(aiokafka_log)
    logging.getLogger("aiokafka").propagate = False  # counted, not printed

    log_dir = Path(args.keep_log).parent if args.keep_log else Path(tempfile.mkdtemp())
    log_path = Path(args.keep_log) if args.keep_log else log_dir / "broker.log"
    log_file = log_path.open("w")
    cluster = await Cluster.start(args, log_file)
    ledger = Ledger(clock)
    members = [Member(i) for i in range(2)]
    cycles: list[Cycle] = []
    stop_producing, stop_consuming = asyncio.Event(), asyncio.Event()
    tasks: list[asyncio.Task[Any]] = []
    result: dict[str, Any] = {}
    shutdown_s = float("inf")
    try:
        await create_topic(cluster.bootstrap, topic, args.partitions)
        ok, problems = await cluster.wait_healthy(60)
        if not ok:
            notes.append(f"not healthy after topic creation: {'; '.join(problems)}")
        for m in members:
            tasks.append(
                asyncio.create_task(
                    consume(m, cluster.bootstrap, topic, group, ledger, stop_consuming)
                )
            )
        # the group formed (both members, every partition), the offsets topic in sync;
        # only then the producer, so that the stall figure is not the group's formation
        formed_by = time.monotonic() + 60
        while time.monotonic() < formed_by and not (
            all(m.assigned for m in members) and sum(m.assigned for m in members) == args.partitions
        ):
            await asyncio.sleep(0.2)
        if not all(m.assigned for m in members):
            notes.append("the group had not formed with both members before the producer")
        ok, problems = await cluster.wait_healthy(60)
        if not ok:
            notes.append(f"not healthy before the first cycle: {'; '.join(problems)}")
        produce_from = clock.now()
        producer = asyncio.create_task(
            produce(args, cluster.bootstrap, topic, ledger, stop_producing, rng)
        )
        await asyncio.sleep(args.interval / 2)  # steady state before the first stop

        reserve = args.drain * 2 + 120  # drain, read-back, shutdown
        for i in range(args.cycles):
            worst = args.interval * 1.1 + args.health_timeout + 60
            if time.monotonic() + worst + reserve > hard_deadline:
                notes.append(f"--max-seconds: stopped after {i} of {args.cycles} cycles")
                break
            broker = i % BROKERS
            cycle = Cycle(i + 1, broker, clock.now())
            cycles.append(cycle)
            try:
                await cluster.call("POST", f"/brokers/{broker}/stop")
                down = args.interval * rng.uniform(0.9, 1.1)
                await asyncio.sleep(down)
                cycle.down_s = clock.now() - cycle.stopped_at_s
                t_start = clock.now()
                await cluster.call("POST", f"/brokers/{broker}/start")
            except ControlClientError as exc:
                cycle.note = str(exc)
                notes.append(f"cycle {i + 1}: {exc}")
                continue
            ok, problems = await cluster.wait_healthy(args.health_timeout)
            if ok:
                cycle.healthy_after_s = clock.now() - t_start
            else:
                cycle.note = "; ".join(problems)[:300]
                notes.append(
                    f"cycle {i + 1}: not healthy {args.health_timeout:.0f} s after starting "
                    f"broker {broker}: {cycle.note}"
                )

        stop_producing.set()
        ids_used = await producer
        produce_until = clock.now()
        drain_by = time.monotonic() + args.drain
        while ledger.pending and time.monotonic() < drain_by:
            await asyncio.sleep(0.2)
        drained_at = clock.now()
        ledger.close()
        shutdown_s = clock.now()
        stop_consuming.set()
        await asyncio.wait(tasks, timeout=30)

        try:
            in_topic, topic_records, read_note = await read_topic(
                cluster.bootstrap, topic, args.partitions, 120
            )
        except Exception as exc:  # the figures so far are still worth printing
            in_topic, topic_records, read_note = set(), 0, f"read-back failed: {error_kind(exc)}"
        if read_note:
            notes.append(read_note)
        lost = ledger.acked - in_topic
        never = ledger.acked - ledger.delivered_at.keys()
        latencies = sorted(
            ledger.delivered_at[r] - ledger.sent_at[r]
            for r in ledger.delivered_at
            if r in ledger.sent_at
        )
        stall_cycle = next(
            (c for c in reversed(cycles) if c.stopped_at_s <= ledger.longest_stall_at_s + 0.001),
            None,
        )
        result = {
            "broker_cwd": str(args.broker_cwd or ROOT),
            "seed": args.seed,
            "topic": topic,
            "group": group,
            "cycles": len(cycles),
            "cycles_asked": args.cycles,
            "interval_s": args.interval,
            "rate": args.rate,
            "produce_s": round(produce_until - produce_from, 1),
            "ids_used": ids_used,
            "acknowledged": len(ledger.acked),
            "never_acknowledged": ledger.gave_up,
            "records_in_topic": topic_records,
            "acknowledged_lost": len(lost),
            "lost_sample": sorted(lost)[:10],
            "acknowledged_never_delivered": len(never),
            "never_delivered_sample": sorted(never)[:10],
            "deliveries": ledger.deliveries,
            "duplicates_delivered": ledger.deliveries - len(ledger.delivered_at),
            "delivered_not_acknowledged": len(ledger.delivered_at.keys() - ledger.acked),
            "longest_stall_s": round(ledger.longest_stall_s, 2),
            "longest_stall_at_s": round(ledger.longest_stall_at_s, 1),
            "longest_stall_cycle": stall_cycle.index if stall_cycle else None,
            "drain_s": round(drained_at - produce_until, 1),
            "latency_p50_s": round(percentile(latencies, 50) or 0.0, 3),
            "latency_p99_s": round(percentile(latencies, 99) or 0.0, 3),
            "latency_max_s": round(latencies[-1], 3) if latencies else 0.0,
            "producer_errors": dict(ledger.producer_errors.most_common()),
            "consumer_errors": dict(sum((m.errors for m in members), Counter[str]()).most_common()),
            "members": [
                {
                    "member": m.index,
                    "deliveries": m.deliveries,
                    "batches": m.batches,
                    "commits": m.commits,
                    "starts": m.starts,
                    "last_delivery_s": _r(m.last_delivery_s),
                    "errors": sum(m.errors.values()),
                    "state": m.state(),
                }
                for m in members
            ],
            "cycle_rows": [
                {
                    "cycle": c.index,
                    "broker": c.broker,
                    "stopped_at_s": round(c.stopped_at_s, 1),
                    "down_s": round(c.down_s, 1),
                    "healthy_after_s": _r(c.healthy_after_s),
                    "note": c.note,
                }
                for c in cycles
            ],
            "aiokafka_log": dict(aiokafka_log.counts.most_common()),
            "notes": notes,
        }
    finally:
        stop_producing.set()
        stop_consuming.set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        code = await cluster.stop()
        log_file.close()
    member_lines, error_lines = broker_log_lines(log_path, clock.wall0, shutdown_s)
    result["broker_exit_code"] = code
    result["broker_log"] = str(log_path)
    result["broker_log_member_lines"] = member_lines
    result["broker_log_error_lines"] = error_lines
    result["verdict"] = verdict(result)
    return result


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--cycles", type=int, default=14, help="stop/start cycles (14)")
    p.add_argument("--interval", type=float, default=10.0, help="seconds a broker is down (10)")
    p.add_argument("--rate", type=float, default=300.0, help="records per second (300)")
    p.add_argument("--partitions", type=int, default=6, help="partitions of the topic (6)")
    p.add_argument("--size", type=int, default=100, help="value bytes (100)")
    p.add_argument("--max-in-flight", type=int, default=5000, help="unacknowledged sends (5000)")
    p.add_argument("--health-timeout", type=float, default=60.0, help="wait for /status ok, s (60)")
    p.add_argument("--drain", type=float, default=60.0, help="group's time to catch up, s (60)")
    p.add_argument("--seed", type=int, default=1, help="run id, interval jitter, payload (1)")
    p.add_argument(
        "--max-seconds",
        type=float,
        default=None,
        help="bound on the whole run; cycles that would pass it are skipped "
        "(default: cycles * (interval + health-timeout + 60) + 2 * drain + 300)",
    )
    p.add_argument("--broker-cwd", type=Path, default=None, help="checkout whose broker runs")
    p.add_argument("--data-dir", default=None, help="broker --data-dir (memory)")
    p.add_argument("--keep-log", default=None, help="write the broker log here (a temp dir)")
    p.add_argument("--log-lines", type=int, default=20, help="broker log lines printed (20)")
    p.add_argument("--json", action="store_true", help="also print one JSON line")
    args = p.parse_args(argv)
    if args.max_seconds is None:
        args.max_seconds = (
            args.cycles * (args.interval * 1.1 + args.health_timeout + 60) + 2 * args.drain + 300
        )
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    result = asyncio.run(run(args))
    print_report(result, args.log_lines)
    if args.json:
        print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
