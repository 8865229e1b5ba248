"""What one request costs the broker: a pipelined load generator that decodes nothing.

For each kind of request one frame is encoded once, before anything is timed. Then
N connections each keep W copies of it in flight: the client reads only the 4-byte
length prefix of each response and, for every response that is complete, writes the
frame again. So the client costs almost nothing per request and the broker is the
part that works. The broker's CPU is read from ``/proc/<pid>/stat`` (utime + stime,
every thread of the process) at both ends of the measured window and divided by the
responses received in it: **broker CPU µs per request**, the figure to trust on a busy
machine, where req/s depends on what else runs. The clients report their own CPU too
(``time.process_time`` in each client process), so a reader can see that they were not
the limit.

Kinds (``--kinds``):

==================  =========================================================================
api-versions        ApiVersions v3, to the bootstrap broker
metadata            Metadata v9 naming one topic (1 partition)
metadata-100x10     Metadata v9 naming 100 topics of 10 partitions each (replication 1)
produce-acks1       Produce v9, one 100-byte record, acks=1, to the partition leader
produce-acksall     the same with acks=all on a topic replicated 3 ways (``--brokers 3``):
                    the broker's figure includes the followers' fetches (same process)
fetch               Fetch v12 of offset 0 of a partition holding one batch of ten 100-byte
                    records (the same data every time)
fetch-longpoll      Fetch v12 at the log end, max_wait ``--longpoll-wait-ms``, woken by one
                    more connection appending one record at a steady rate: one fetch in flight
                    per connection, as a consumer has. The client reads the high watermark of
                    each response (at a fixed place in the frame, checked once) to fetch the
                    next offset. Latency p50/p99: from the append being sent to the fetch
                    response that carries it being received.
fetch-parked        Fetch v12 at the log end of a topic nobody writes to, max_wait
                    ``--parked-wait-ms``: every fetch waits out max_wait in the purgatory and
                    is answered empty, and its connection sends the next at once (the first
                    ones spread over one max_wait). p50/p99: send to answer; the note gives
                    the lateness against max_wait and the broker's RSS per connection and
                    per parked fetch (RSS once connected minus before; at the end minus once
                    connected). Not in the default ``--kinds``: a row lasts 4 max_waits.
heartbeat           Heartbeat v4 of a real member (JoinGroup + SyncGroup first, session
                    timeout 10 minutes), to the group coordinator
consumer-heartbeat  ConsumerGroupHeartbeat v1 (KIP-848) of a real member: joined with member
                    epoch 0 to a one-partition topic and its assignment acknowledged, then
                    the steady-state lightweight heartbeat (group, member id, epoch; every
                    other field null), to the group coordinator. The member's session is the
                    broker's ``group.consumer.session.timeout.ms`` (45 s by default)
offset-commit       OffsetCommit v8 of that kind of member, one partition: the broker appends
                    it to ``__consumer_offsets`` and answers once its ISR has it
==================  =========================================================================

Before it is measured, each frame is sent once and its answer decoded: a kind whose
answer carries an error code is still measured, with the error in the note column (the
figures are then those of the error path).

Without ``--bootstrap`` a minikafka is started as a subprocess (``python -m minikafka serve
--port 0 --brokers 3 --override group.initial.rebalance.delay.ms=0``) with its working
directory ``--broker-cwd`` (this checkout by default), so the same script measures
another checkout: ``--broker-cwd /work/baseline``. The client encodes its frames with
the ``protocol`` package of that directory too. With ``--bootstrap HOST:PORT`` any
Kafka-compatible broker can be measured; ``--broker-pid`` then gives the CPU figure
(without it the CPU columns show ``-``).

``--idle-connections 0,5000`` measures every row once per value, with that many more
connections held open beside the row's own by one more client process: each sends one
ApiVersions, then nothing. A comment line gives what they cost the broker at rest (RSS
per connection, CPU per second); the ``idle`` column says which rows had them.
``--broker-args '--capture-dir DIR'`` passes arguments to the broker subprocess;
``--broker-profile FILE`` runs it under cProfile and prints its top functions at the end.
``--count-objects N`` first parks N fetch-parked frames in this process (a broker built
by ``build_broker`` on a manual clock, no socket) and prints the objects the garbage
collector tracks per parked fetch, by type.
The broker subprocess logs its garbage collections (``MINIKAFKA_GC_LOG``,
``broker/observability/gc_policy.py``): each row's note gives the full (generation 2) collections in
its window, the longest pause of any generation, and the share of the window spent
collecting.

Many connections: RLIMIT_NOFILE's soft limit is raised to the hard one (the broker
subprocess inherits it); the output says when that is not enough. Connections are
spread over ``--client-procs`` client processes (default: one per 2,500 connections).

On a machine shared with other work, the broker's ``wait%`` column (time its threads
were runnable without a CPU, from schedstat) tells a starved broker from an idle one;
``--repeat N`` keeps the row with the median CPU per request. After each row the script
waits until the broker answers a fresh connection, so requests it had read but not yet
handled when the clients left are not charged to the next row.

Figures, never a verdict: this script asserts nothing about them.

The script is this entry point (command line, rows, output) and three modules beside
it: ``kinds`` (kinds, frames, what they need on the broker), ``clients`` (the client
processes' protocols) and ``load`` (one row's measurement, /proc).

Run (from the repository root)::

    .venv/bin/python -m bench.request_cost.request_cost --connections 8 --window 32 --seconds 3
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
import os
import shlex
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any

from bench.lib.checkout import use_protocol_of
from bench.lib.rss import rss_mb
from bench.request_cost.kinds import (
    KINDS,
    Workload,
    api_versions_frame,
    cleanup_step,
    log_end_step,
    ping_step,
    prepare_step,
    run_in_cluster,
    warm_up_step,
)
from bench.request_cost.load import (
    Clients,
    Row,
    broker_idle,
    count_parked_objects,
    hold_idle,
    measure,
    raise_nofile,
)
from testkit.broker_process import BrokerProcess

ROOT = Path(__file__).resolve().parents[2]
#: Measured unless --kinds says otherwise: fetch-parked waits out max_wait twice per row.
DEFAULT_KINDS = [kind for kind in KINDS if kind != "fetch-parked"]


def settle(bootstrap: str) -> float:
    """Wait until the broker answers a fresh connection: a row's requests that the
    broker had already read are still being handled after its clients have gone, and
    must not be charged to the next row. Seconds waited."""
    start = time.perf_counter()
    with suppress(Exception):
        run_in_cluster(bootstrap, ping_step)
    return time.perf_counter() - start


def measure_repeated(
    work: Workload,
    connections: int,
    window: int,
    args: argparse.Namespace,
    broker_pid: int | None,
    bootstrap: str,
) -> Row:
    """``--repeat`` measurements; the one with the median broker CPU per request."""
    rows: list[Row] = []
    for _ in range(args.repeat):
        start_offset = 0
        if work.longpoll is not None and work.leader is not None:
            start_offset = run_in_cluster(
                bootstrap, functools.partial(log_end_step, work.leader, work.longpoll.topic)
            )
        row = measure(work, connections, window, args, broker_pid, start_offset)
        row.settle_s = settle(bootstrap)
        if row.settle_s > 2:
            row.note = "; ".join(
                n
                for n in (row.note, f"broker busy {row.settle_s:.0f} s after the clients left")
                if n
            )
        rows.append(row)
    if len(rows) == 1:
        return rows[0]
    costs = [r.broker_us_per_req if r.broker_us_per_req is not None else math.inf for r in rows]
    figures = ", ".join("-" if c == math.inf else f"{c:.0f}" for c in costs)
    row = rows[sorted(range(len(rows)), key=costs.__getitem__)[len(rows) // 2]]
    row.note = "; ".join(n for n in (row.note, f"median of us/req {figures}") if n)
    return row


# ----------------------------------------------------------------------------- output

COLUMNS: list[tuple[str, str, int, str]] = [  # header, attribute, width, format
    ("kind", "kind", 18, "s"),
    ("conns", "connections", 5, "d"),
    ("infl", "in_flight", 4, "d"),
    ("idle", "idle_connections", 5, "d"),
    ("req/s", "req_per_s", 8, ".0f"),
    ("brk us/req", "broker_us_per_req", 10, ".1f"),
    ("cli us/req", "client_us_per_req", 10, ".1f"),
    ("brk CPU%", "broker_cpu_pct", 8, ".0f"),
    ("brk wait%", "broker_wait_pct", 9, ".0f"),
    ("cli CPU%", "client_cpu_pct", 8, ".0f"),
    ("RSS MB", "broker_rss_mb", 7, ".0f"),
    ("resp B", "response_bytes", 7, ".0f"),
    ("p50 ms", "p50_ms", 7, ".1f"),
    ("p99 ms", "p99_ms", 7, ".1f"),
]


def format_header() -> str:
    cells = [f"{h:<{w}}" if fmt == "s" else f"{h:>{w}}" for h, _a, w, fmt in COLUMNS]
    return "  ".join([*cells, "note"])


def format_row(row: Row) -> str:
    cells = []
    for _h, attribute, width, fmt in COLUMNS:
        value = getattr(row, attribute)
        if value is None:
            cells.append(f"{'-':>{width}}")
        elif fmt == "s":
            cells.append(f"{value:<{width}}")
        else:
            cells.append(f"{value:>{width}{fmt}}")
    return "  ".join([*cells, row.note])


def _ints(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def _kinds(text: str) -> list[str]:
    kinds = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown kind(s) {unknown}; known: {', '.join(KINDS)}")
    return kinds


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Broker CPU per request: pipelined, pre-encoded requests, no decoding."
    )
    parser.add_argument("--bootstrap", help="HOST:PORT of a running broker (else start one)")
    parser.add_argument("--broker-pid", type=int, help="with --bootstrap: pid for the CPU figure")
    parser.add_argument(
        "--broker-cwd",
        type=Path,
        default=ROOT,
        help="checkout whose broker (and protocol package) is used (this one)",
    )
    parser.add_argument("--brokers", type=int, default=3, help="brokers of the subprocess (3)")
    parser.add_argument(
        "--replication-factor", type=int, help="of the acks=all topic (min(3, brokers))"
    )
    parser.add_argument(
        "--kinds",
        type=_kinds,
        default=DEFAULT_KINDS,
        help=f"comma list of: {', '.join(KINDS)} (all but fetch-parked)",
    )
    parser.add_argument("--connections", type=_ints, default=[8], help="comma list (8)")
    parser.add_argument(
        "--window", type=_ints, default=[32], help="requests in flight per connection (32)"
    )
    parser.add_argument("--seconds", type=float, default=3.0, help="measured window (3)")
    parser.add_argument("--warmup", type=float, default=1.0, help="before the window (1)")
    parser.add_argument(
        "--repeat", type=int, default=1, help="measure each row N times, keep the median (1)"
    )
    parser.add_argument(
        "--client-procs", type=int, default=0, help="client processes (one per 2500 connections)"
    )
    parser.add_argument(
        "--longpoll-rate",
        type=float,
        default=0.0,
        help="appends/s waking the long-polls (min(100, 2000/connections), at least 1)",
    )
    parser.add_argument(
        "--longpoll-wait-ms", type=int, default=500, help="max_wait of the fetches (500)"
    )
    parser.add_argument(
        "--parked-wait-ms", type=int, default=2000, help="max_wait of fetch-parked (2000)"
    )
    parser.add_argument(
        "--idle-connections",
        type=_ints,
        default=[0],
        help="comma list: connections held open and idle beside each row's (0)",
    )
    parser.add_argument(
        "--broker-args",
        default="",
        help="more arguments of the broker subprocess's serve (e.g. '--capture-dir DIR')",
    )
    parser.add_argument(
        "--broker-profile",
        type=Path,
        help="run the broker subprocess under cProfile, write FILE, print its top 30",
    )
    parser.add_argument(
        "--keep-gc-log", type=Path, help="the broker subprocess's GC log goes to FILE (kept)"
    )
    parser.add_argument(
        "--count-objects",
        type=int,
        default=0,
        metavar="N",
        help="first, in this process: objects the GC tracks per parked fetch (N parked)",
    )
    parser.add_argument("--json", action="store_true", help="also one JSON line per row")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    broker_cwd = args.broker_cwd.resolve()
    protocol = use_protocol_of(broker_cwd)  # before anything imports ours

    if args.count_objects:
        print(f"# {count_parked_objects(args.count_objects, args.parked_wait_ms)}", flush=True)
    most = max(args.connections) + max(args.idle_connections)
    limits = raise_nofile(most + 1000)
    broker: BrokerProcess | None = None
    broker_pid: int | None = args.broker_pid
    args.gc_log = None
    if args.bootstrap:
        bootstrap = args.bootstrap
        where = f"broker {bootstrap}" + (f" pid {broker_pid}" if broker_pid else " (CPU: -)")
    else:
        extra = ["--brokers", str(args.brokers)]
        extra += ["--override", "group.initial.rebalance.delay.ms=0"]
        extra += shlex.split(args.broker_args)
        # The broker logs its collections (broker/observability/gc_policy.py; a checkout without it
        # ignores the variable and the note says the log is unreadable).
        args.gc_log = str(args.keep_gc_log or Path(tempfile.mkdtemp()) / "gc.log")
        os.environ["MINIKAFKA_GC_LOG"] = args.gc_log
        broker = BrokerProcess(
            extra, cwd=broker_cwd, profile=args.broker_profile, stderr=None, log_level="WARNING"
        )
        bootstrap, broker_pid = broker.bootstrap, broker.proc.pid
        where = f"minikafka x{args.brokers} from {broker_cwd} pid {broker_pid}"
        if args.broker_args:
            where += f" ({args.broker_args})"
    try:
        uvloop_text = "uvloop"
        try:
            import uvloop  # noqa: F401
        except ImportError:
            uvloop_text = "asyncio (no uvloop)"
        run_in_cluster(bootstrap, warm_up_step)
        idle = broker_idle(broker_pid)
        print(f"# {where}; clients: {uvloop_text}, codec {Path(protocol.__file__).parent}")
        print(
            f"# {limits}; broker idle: {idle}; {args.seconds:g} s per row after {args.warmup:g} s"
        )
        print(format_header(), flush=True)
        run_id = uuid.uuid4().hex[:6]
        rows: list[Row] = []
        for idle_connections in args.idle_connections:
            holder = None
            if idle_connections:
                holder = _hold_idle(bootstrap, idle_connections, broker_pid)
            try:
                for kind in args.kinds:
                    rows += _kind_rows(
                        kind,
                        f"{run_id}-{idle_connections}",
                        args,
                        bootstrap,
                        broker_pid,
                        idle_connections,
                    )
            finally:
                if holder is not None:
                    holder.stop(30)
        if args.json:
            for row in rows:
                print(json.dumps(dataclasses.asdict(row)))
    finally:
        if broker is not None:
            code = broker.stop()
            if code != 0:
                print(f"warning: broker exited with {code}", file=sys.stderr)
            if args.broker_profile is not None:
                _print_profile(args.broker_profile)
            if args.gc_log is not None and args.keep_gc_log is None:
                shutil.rmtree(Path(args.gc_log).parent, ignore_errors=True)
    return 0


def _kind_rows(
    kind: str,
    run_id: str,
    args: argparse.Namespace,
    bootstrap: str,
    broker_pid: int | None,
    idle: int,
) -> list[Row]:
    """Prepare one kind, measure its rows (printed as they come), clean up."""
    try:
        work = run_in_cluster(bootstrap, functools.partial(prepare_step, kind, run_id, args))
    except Exception as exc:  # a row that says why, then the next kind
        row = Row(kind, 0, 0, idle, note=f"setup failed: {type(exc).__name__}: {exc}")
        print(format_row(row), flush=True)
        return [row]
    rows: list[Row] = []
    one_in_flight = work.longpoll is not None or work.parked_wait_ms > 0
    for connections in args.connections:
        for window in [1] if one_in_flight else args.window:
            row = measure_repeated(work, connections, window, args, broker_pid, bootstrap)
            row.idle_connections = idle
            rows.append(row)
            print(format_row(row), flush=True)
    run_in_cluster(bootstrap, functools.partial(cleanup_step, work))
    return rows


def _hold_idle(bootstrap: str, count: int, broker_pid: int | None) -> Clients:
    """Open ``count`` idle connections (each says ApiVersions once) and print what they
    cost the broker at rest: RSS per connection, CPU per second."""
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    before = rss_mb(broker_pid)
    started = time.perf_counter()
    holder, connected, problems = hold_idle((host, int(port)), count, api_versions_frame())
    took = time.perf_counter() - started
    time.sleep(1.0)
    after = rss_mb(broker_pid)
    rss = "-"
    if before is not None and after is not None and connected:
        rss = f"{after - before:+.1f} MB ({(after - before) * 1024 / connected:.1f} KB each)"
    print(
        f"# {connected} idle connections opened in {took:.1f} s"
        + (f" ({problems})" if problems else "")
        + f"; broker RSS {rss}; broker idle with them: {broker_idle(broker_pid)}",
        flush=True,
    )
    return holder


def _print_profile(path: Path, top: int = 30) -> None:
    """The broker's functions by own time on the request path: everything called, at any
    depth, from the connection's callbacks from the loop (``data_received``,
    ``_on_parked_done``) and from capture's batches (``format_pending``), each function's
    own time counted only for calls from there (cProfile keeps it per caller; lazy
    imports on a first use are left out). As shares of that path and as µs per request
    (``dispatch`` calls). cProfile slows the broker down: read the shares."""
    import pstats
    from collections import deque

    stats = pstats.Stats(str(path)).stats  # type: ignore[attr-defined]
    roots = [
        f
        for f in stats
        if (f[0].endswith("connection.py") and f[2] in ("data_received", "_on_parked_done"))
        or (f[0].endswith("capture.py") and f[2] == "format_pending")  # its timer's batches
    ]
    callees: dict[Any, set[Any]] = {}
    for function, (_cc, _nc, _tt, _ct, callers) in stats.items():
        for caller in callers:
            callees.setdefault(caller, set()).add(function)
    reached, todo = set(roots), deque(roots)
    while todo:
        for callee in callees.get(todo.popleft(), ()):
            # A first use imports a module lazily: that is start-up, not the path.
            if callee in reached or callee[2] == "<module>":
                continue
            if not callee[0].startswith("<frozen importlib"):
                reached.add(callee)
                todo.append(callee)
    own: dict[Any, tuple[float, int]] = {}
    for function in reached:
        _cc, calls, tt, _ct, callers = stats[function]
        if function in roots:
            own[function] = (tt, calls)
        else:
            parts = [v for caller, v in callers.items() if caller in reached]
            own[function] = (sum(v[2] for v in parts), sum(v[1] for v in parts))
    path_s = sum(stats[f][3] for f in roots)
    requests = sum(
        v[1] for f, v in stats.items() if f[0].endswith("dispatch.py") and f[2] == "dispatch"
    )
    if not path_s or not requests:
        print(f"\nbroker profile {path}: no request path found")
        return
    print(
        f"\nbroker profile {path}: request path {path_s:.2f} s for {requests} requests "
        f"({path_s / requests * 1e6:.0f} us each under cProfile); top {top} by own time"
    )
    for (file, line, name), (tt, calls) in sorted(own.items(), key=lambda kv: -kv[1][0])[:top]:
        where = f"{Path(file).name}:{line}" if line else file
        print(
            f"  {100 * tt / path_s:5.1f}% {tt / requests * 1e6:6.2f} us/req "
            f"{calls / requests:6.2f} calls/req  {name}  ({where})"
        )


if __name__ == "__main__":
    sys.exit(main())
