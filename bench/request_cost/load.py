"""request_cost's measuring: one row, from forked clients and the broker's /proc.

``measure`` forks the client processes of one row (``Clients``), lets them connect,
reads the broker's RSS before and after (``rss_before_mb``, ``rss_connected_mb``), starts
them, and takes the broker's CPU (``/proc/<pid>/stat``), its wait for a CPU (schedstat)
and the clients' counters at both ends of the measured window. ``hold_idle`` keeps idle
connections open beside the rows (``--idle-connections``).
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import os
import resource
import time
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from bench.lib.rss import rss_mb
from bench.lib.stats import percentile
from bench.request_cost.clients import ClientSpec, client_process
from bench.request_cost.kinds import CONNECTIONS_PER_CLIENT_PROCESS, Workload

# ----------------------------------------------------------------------------- /proc


def proc_cpu_s(pid: int | None) -> float | None:
    """utime + stime of the whole process (every thread), seconds."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    # fields[0] is field 3 (state): utime and stime are fields 14 and 15.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_wait_s(pid: int | None) -> float | None:
    """Time the process's threads spent runnable but waiting for a CPU (schedstat), s.

    On a machine shared with other work the broker can be the bottleneck while its CPU%
    stays well under 100: CPU% + wait% near 100 says it was, and starved."""
    if pid is None:
        return None
    total = 0
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with suppress(OSError), open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[1])
    except OSError:
        return None
    return total / 1e9


def broker_idle(pid: int | None, seconds: float = 2.0) -> str:
    """CPU the broker spends doing nothing asked (replica fetchers, timers), ms per s.

    From the on-CPU nanoseconds of schedstat: stat's 10 ms ticks are too coarse here."""
    if pid is None:
        return "-"

    def run_ns() -> int:
        total = 0
        for task in os.listdir(f"/proc/{pid}/task"):
            with suppress(OSError), open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        return total

    try:
        before = run_ns()
        time.sleep(seconds)
        return f"{(run_ns() - before) / 1e6 / seconds:.1f} ms CPU/s"
    except OSError:
        return "-"


def raise_nofile(needed: int) -> str:
    """Raise RLIMIT_NOFILE's soft limit to the hard one; say what happened."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            text = f"open files: soft limit raised {soft} -> {hard}"
            soft = hard
        except (ValueError, OSError) as exc:
            text = f"open files: could not raise the soft limit {soft} to {hard}: {exc}"
    else:
        text = f"open files: limit {soft}"
    if soft != resource.RLIM_INFINITY and soft < needed:
        text += f" -- NOT ENOUGH for {needed} descriptors: the largest runs may fail to connect"
    return text


# ----------------------------------------------------------------------------- measuring


@dataclass
class Row:
    """One line of the table."""

    kind: str
    connections: int
    in_flight: int
    idle_connections: int = 0  # held open beside the measured ones (--idle-connections)
    req_per_s: float | None = None
    broker_us_per_req: float | None = None
    client_us_per_req: float | None = None
    broker_cpu_pct: float | None = None
    broker_wait_pct: float | None = None
    client_cpu_pct: float | None = None
    broker_rss_mb: float | None = None
    response_bytes: float | None = None
    p50_ms: float | None = None
    p99_ms: float | None = None
    rss_before_mb: float | None = None  # broker RSS before this row's clients connected
    rss_connected_mb: float | None = None  # ... once they had, before they sent anything
    client_procs: int = 0
    responses: int = 0
    seconds: float = 0.0
    settle_s: float = 0.0  # until the broker answered a new connection after the row
    gc_full: int | None = None  # the broker's full collections in the window (its GC log)
    gc_longest_ms: float | None = None  # ... the longest pause among them, any generation
    gc_paused_pct: float | None = None  # ... time the broker spent collecting, % of window
    late_ms: tuple[float, float, float] | None = None  # fetch-parked: p50, p99, max
    note: str = ""


def _split(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


class Clients:
    """Forked client processes, one ``ClientSpec`` each, driven over pipes."""

    def __init__(self, specs: Sequence[ClientSpec]) -> None:
        context = multiprocessing.get_context("fork")
        self.children: list[tuple[Any, Connection]] = []
        for spec in specs:
            ours, theirs = context.Pipe()
            process = context.Process(target=client_process, args=(theirs, spec), daemon=True)
            process.start()
            theirs.close()
            self.children.append((process, ours))

    def connect(self) -> tuple[int, list[str]]:
        """Wait until every process has opened its connections: (connected, problems)."""
        connected = 0
        problems: list[str] = []
        for _process, ours in self.children:
            if not ours.poll(300):
                return connected, [*problems, "a client process did not connect within 300 s"]
            try:
                _ready, ok, failed, error = ours.recv()
            except EOFError:
                return connected, [*problems, "a client process died while connecting"]
            connected += ok
            if failed:
                problems.append(f"{failed} connections failed ({error})")
        return connected, problems

    def broadcast(self, command: str) -> None:
        for _process, ours in self.children:
            with suppress(OSError):
                ours.send(command)

    def stop(self, timeout_s: float = 120) -> list[dict[str, Any]]:
        """Stop them all; what each reported (fewer when one did not)."""
        self.broadcast("stop")
        results: list[dict[str, Any]] = []
        for process, ours in self.children:
            with suppress(EOFError, OSError):
                if ours.poll(timeout_s):
                    results.append(ours.recv())
            process.join(10)
            if process.is_alive():
                process.kill()
                process.join()
        return results


def hold_idle(target: tuple[str, int], count: int, frame: bytes) -> tuple[Clients, int, str]:
    """``count`` connections that send one ApiVersions (``frame``) and then nothing, in
    their own processes until ``Clients.stop``: (clients, connected, problems)."""
    procs = max(1, math.ceil(count / CONNECTIONS_PER_CLIENT_PROCESS))
    clients = Clients(
        [ClientSpec(target, share, 1, frame, idle=True) for share in _split(count, procs)]
    )
    connected, problems = clients.connect()
    return clients, connected, "; ".join(problems)


def measure(
    work: Workload,
    connections: int,
    window: int,
    args: argparse.Namespace,
    broker_pid: int | None,
    start_offset: int = 0,
) -> Row:
    longpoll = work.longpoll
    parked_s = work.parked_wait_ms / 1000
    in_flight = 1 if longpoll is not None or parked_s else window
    row = Row(work.kind, connections, in_flight)
    notes = [n for n in (work.note, f"answer: {work.error}" if work.error else "") if n]
    procs = args.client_procs or math.ceil(connections / CONNECTIONS_PER_CLIENT_PROCESS)
    procs = max(1, min(procs, connections))
    row.client_procs = procs
    rate = 0.0
    if longpoll is not None:
        rate = args.longpoll_rate or min(100.0, max(1.0, 2000.0 / connections))
        notes.append(f"{rate:g} appends/s")
    warmup, seconds = args.warmup, args.seconds
    if parked_s:
        # Every fetch is answered once per max_wait: the first ones after one to two
        # max_waits (they start spread over one), so the window opens after that.
        warmup, seconds = max(warmup, 2 * parked_s), max(seconds, 2 * parked_s)

    row.rss_before_mb = rss_mb(broker_pid)
    clients = Clients(
        [
            ClientSpec(
                target=work.target,
                connections=share,
                window=in_flight,
                frame=work.frame,
                longpoll=longpoll,
                start_offset=start_offset,
                producer_rate=rate if i == 0 else 0.0,
                producer_target=work.leader,
                parked_wait_s=parked_s,
            )
            for i, share in enumerate(_split(connections, procs))
        ]
    )
    connected, problems = clients.connect()
    notes += problems
    row.connections = connected
    if connected == 0 or len(problems) > sum("connections failed" in p for p in problems):
        clients.stop(30)  # a process did not connect, or nothing did
        row.note = "; ".join([*notes, *(["no connection"] if connected == 0 else [])])
        return row
    time.sleep(0.5)  # the broker has set the connections up
    row.rss_connected_mb = rss_mb(broker_pid)

    clients.broadcast("start")
    time.sleep(warmup)
    clients.broadcast("mark")
    t0, mono0 = time.perf_counter(), time.monotonic()
    cpu0, wait0 = proc_cpu_s(broker_pid), proc_wait_s(broker_pid)
    time.sleep(seconds)
    clients.broadcast("mark")
    t1, mono1 = time.perf_counter(), time.monotonic()
    cpu1, wait1 = proc_cpu_s(broker_pid), proc_wait_s(broker_pid)
    row.broker_rss_mb = rss_mb(broker_pid)
    results = clients.stop()
    if len(results) != len(clients.children):
        notes.append(f"{len(clients.children) - len(results)} client process(es) did not report")

    elapsed = t1 - t0
    responses = nbytes = with_data = lost = 0
    lost_error = next((r["lost_error"] for r in results if r["lost_error"]), "")
    client_cpu = 0.0
    latencies: list[float] = []
    sent: Sequence[float] = next((r["sent"] for r in results if len(r["sent"])), ())
    for result in results:
        marks = result["marks"]
        lost += result["lost"]
        if len(marks) < 2:
            continue
        (r0, b0, d0, c0, _), (r1, b1, d1, c1, _) = marks[0], marks[1]
        responses += r1 - r0
        nbytes += b1 - b0
        with_data += d1 - d0
        client_cpu += c1 - c0
        for offset, arrived in zip(result["offsets"], result["times"], strict=True):
            k = offset - start_offset
            if 0 <= k < len(sent):
                latencies.append((arrived - sent[k]) * 1000)
        latencies.extend(result["waits"])
    row.responses = responses
    row.seconds = elapsed
    row.req_per_s = responses / elapsed
    row.client_cpu_pct = 100 * client_cpu / elapsed
    if responses:
        row.client_us_per_req = client_cpu / responses * 1e6
        row.response_bytes = nbytes / responses
    if cpu0 is not None and cpu1 is not None:
        row.broker_cpu_pct = 100 * (cpu1 - cpu0) / elapsed
        if responses:
            row.broker_us_per_req = (cpu1 - cpu0) / responses * 1e6
    if wait0 is not None and wait1 is not None:
        row.broker_wait_pct = 100 * (wait1 - wait0) / elapsed
    if longpoll is not None or parked_s:
        latencies.sort()
        row.p50_ms = percentile(latencies, 50)
        row.p99_ms = percentile(latencies, 99)
    if longpoll is not None and responses:
        notes.append(f"{100 * with_data / responses:.0f}% with data")
    if parked_s:
        notes += _parked_notes(row, latencies, parked_s * 1000)
    gc_log = getattr(args, "gc_log", None)
    if gc_log is not None:
        time.sleep(0.3)  # the broker writes a line at least every 0.25 s
        notes.append(_gc_note(row, gc_log, mono0, mono1))
    if not responses:
        notes.append("no response in the window (a longer --warmup may help)")
    if lost:
        notes.append(f"{lost} connections lost while running ({lost_error})")
    row.note = "; ".join(n for n in notes if n)
    return row


def _parked_notes(row: Row, waits: list[float], max_wait_ms: float) -> list[str]:
    """What fetch-parked is for: memory per connection and per parked fetch, lateness."""
    notes: list[str] = []
    n = row.connections
    if row.rss_before_mb is not None and row.rss_connected_mb is not None and n:
        per_conn = (row.rss_connected_mb - row.rss_before_mb) * 1024 / n
        notes.append(f"RSS {per_conn:+.1f} KB/connection")
        if row.broker_rss_mb is not None:
            per_fetch = (row.broker_rss_mb - row.rss_connected_mb) * 1024 / n
            notes.append(f"{per_fetch:+.1f} KB/parked fetch")
    if waits:
        late = [w - max_wait_ms for w in waits]  # already sorted
        p50, p99 = percentile(late, 50) or 0.0, percentile(late, 99) or 0.0
        row.late_ms = (p50, p99, late[-1])
        notes.append(
            f"answered {p50:+.1f} ms (p50) / {p99:+.1f} ms (p99) / {late[-1]:+.1f} ms (max) "
            "after max_wait"
        )
    return notes


def read_gc_log(path: str, start_s: float, end_s: float) -> tuple[int, float, float] | None:
    """From the broker's GC log (``broker/observability/gc_policy.py``'s ``GcLog`` lines), within
    ``[start_s, end_s]`` of ``time.monotonic()``: (full collections, the longest pause of
    any generation, ms spent collecting). The totals are the difference of the running
    totals of the last lines before each end; the longest pause is that of the lines
    inside (each full collection and each pause of 5 ms or more writes one)."""
    before: list[float] | None = None
    last: list[float] | None = None
    full, longest = 0, 0.0
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                fields = [float(x) for x in line.split()]
                if len(fields) != 9:
                    continue
                if fields[0] < start_s:
                    before = fields
                elif fields[0] <= end_s:
                    last = fields
                    full += fields[1] == 2
                    longest = max(longest, fields[2])
    except OSError:
        return None
    if last is None:
        return 0, 0.0, 0.0
    paused = last[7] - (before[7] if before is not None else 0.0)
    return full, longest, paused


def _gc_note(row: Row, path: str, start_s: float, end_s: float) -> str:
    found = read_gc_log(path, start_s, end_s)
    if found is None:
        return "GC log unreadable"
    row.gc_full, row.gc_longest_ms, paused_ms = found
    row.gc_paused_pct = paused_ms / 10 / (end_s - start_s)
    return (
        f"GC {row.gc_full} full, longest pause {row.gc_longest_ms:.0f} ms, "
        f"{row.gc_paused_pct:.1f}% of the window collecting"
    )


def count_parked_objects(count: int, max_wait_ms: int) -> str:
    """What the garbage collector walks per parked fetch, in this process: a broker built
    by ``build_broker`` on a manual clock (no socket), ``count`` fetch-parked frames
    dispatched and held as a connection holds them (its in-flight entry, a done callback
    on the future); the tracked objects they add, in all and by type (those with at
    least one per fetch). Every one of them is walked by each collection of its
    generation while the fetch waits."""
    import asyncio
    import contextvars
    import gc
    from collections import Counter

    from bench.request_cost.kinds import fetch_frame
    from broker.app import build_standalone_broker
    from broker.server.context import ConnectionInfo
    from purgatory import ManualClock

    async def park() -> str:
        broker = build_standalone_broker(ManualClock(1_000))
        metadata = broker.dispatcher.services.metadata
        manager = broker.dispatcher.services.replica_manager
        await manager.start()
        metadata.create_topic("parked", 1, 1, {})
        connection = ConnectionInfo("c-1", "127.0.0.1", 1, 9092)
        frame = fetch_frame("parked", 0, max_wait_ms)[4:]

        class Holder:  # as KafkaConnection: a bound callback, one context per connection
            def on_done(self, future: object = None) -> None:
                pass

        holder = Holder()
        context = contextvars.copy_context()

        held = [broker.dispatcher.dispatch(frame, 0, connection) for _ in range(100)]
        held.clear()
        gc.collect()
        before = Counter(type(o).__name__ for o in gc.get_objects())
        for _ in range(count):
            in_flight = broker.dispatcher.dispatch(frame, 0, connection)
            if in_flight.future is None:
                return "objects per parked fetch: - (the fetch was answered at once)"
            in_flight.future.add_done_callback(holder.on_done, context=context)
            held.append(in_flight)
        gc.collect()
        added = Counter(type(o).__name__ for o in gc.get_objects()) - before
        await manager.stop()
        total = sum(added.values()) / count
        kinds = ", ".join(f"{n} {c / count:.0f}" for n, c in added.most_common() if c >= count)
        return f"objects per parked fetch: {total:.1f} tracked ({kinds})"

    return asyncio.run(park())
