"""What open consoles cost the broker: request cost with N consoles watching against none.

A console page costs the broker one render of its live fragment per update check (at
most ``UPDATES_PER_SECOND`` a second, broker/control/console/pages.py) for as long as it
is open, in the brokers' own event loop. This bench starts ``python -m minikafka serve
--port 0 --brokers 3 --control-port 0`` as a subprocess, then alternates rounds with 0
and ``--consoles`` consoles open (each an event stream as a browser's EventSource opens
it: ``/console/events?page=...``, on the busiest pages: the cluster, a topic's
partitions, the purgatories with their timing wheels), and in each round runs
``bench.request_cost.request_cost`` against it (``--bootstrap``, ``--broker-pid``: the
broker's own CPU per request from /proc). It prints the broker µs per request and req/s
of each kind, median over the rounds, with and without consoles, and the updates the
consoles received. First, with no load at all, the broker's own CPU per second over
``--idle-seconds`` with 0 and with the consoles open: what watching costs by itself.

    .venv/bin/python -m bench.request_cost.console_cost [--consoles 3] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import threading
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import aiohttp

from bench.request_cost.load import proc_cpu_s
from testkit.broker_process import BrokerProcess

PAGES = ("/console/", "/console/topics/cost-acks1", "/console/purgatory")


class Consoles:
    """``count`` event streams on a thread of their own, counting the updates."""

    def __init__(self, control: str, count: int) -> None:
        self.control = control
        self.count = count
        self.updates = 0
        self._loop = asyncio.new_event_loop()
        self._stop = asyncio.Event()
        self._opened = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Consoles:
        if self.count:
            self._thread.start()
            self._opened.wait(30)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.count:
            self._loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(30)

    def _run(self) -> None:
        self._loop.run_until_complete(self._watch())

    async def _watch(self) -> None:
        async with aiohttp.ClientSession(self.control) as session:
            first = [asyncio.Event() for _ in range(self.count)]
            tasks = [
                asyncio.create_task(self._one(session, PAGES[i % len(PAGES)], first[i]))
                for i in range(self.count)
            ]
            await asyncio.gather(*(e.wait() for e in first))
            self._opened.set()
            await self._stop.wait()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _one(self, session: aiohttp.ClientSession, page: str, first: asyncio.Event) -> None:
        async with session.get("/console/events", params={"page": page}) as resp:
            async for line in resp.content:
                if line.startswith(b"event: live"):
                    self.updates += 1
                    first.set()


def _request_cost(bootstrap: str, pid: int, args: argparse.Namespace) -> list[dict[str, Any]]:
    cmd = [sys.executable, "-m", "bench.request_cost.request_cost", "--json"]
    cmd += ["--bootstrap", bootstrap, "--broker-pid", str(pid), "--kinds", args.kinds]
    cmd += ["--seconds", str(args.seconds), "--connections", "4", "--window", "16"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=600).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def _idle_cpu_ms_per_s(pid: int, seconds: float) -> float:
    before = proc_cpu_s(pid)
    threading.Event().wait(seconds)  # the broker idles; this process only waits
    after = proc_cpu_s(pid)
    assert before is not None and after is not None
    return (after - before) * 1000 / seconds


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--consoles", type=int, default=3, help="consoles open (3)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each (3)")
    parser.add_argument("--seconds", type=float, default=3.0, help="measured window (3)")
    parser.add_argument("--idle-seconds", type=float, default=5.0, help="idle window (5)")
    parser.add_argument("--kinds", default="metadata,produce-acks1,fetch", help="request kinds")
    args = parser.parse_args(argv)
    broker = BrokerProcess(["--brokers", "3", "--control-port", "0"])
    control = broker.ready_line.split("control=", 1)[1].split()[0]
    figures: dict[tuple[int, str], list[tuple[float, float]]] = defaultdict(list)
    updates: dict[int, list[float]] = defaultdict(list)
    idle: dict[int, list[float]] = defaultdict(list)
    try:
        for _ in range(args.rounds):
            for count in (0, args.consoles):
                with Consoles(control, count):
                    idle[count].append(_idle_cpu_ms_per_s(broker.proc.pid, args.idle_seconds))
        for _ in range(args.rounds):
            for count in (0, args.consoles):
                with Consoles(control, count) as consoles:
                    before = consoles.updates
                    rows = _request_cost(broker.bootstrap, broker.proc.pid, args)
                    seconds = sum(r["seconds"] + 1.0 for r in rows) or 1.0
                    updates[count].append((consoles.updates - before) / seconds)
                for row in rows:
                    figures[(count, row["kind"])].append(
                        (row["broker_us_per_req"], row["req_per_s"])
                    )
    finally:
        broker.stop()
    for count, values in sorted(idle.items()):
        print(f"idle, {count} consoles: broker CPU {statistics.median(values):.1f} ms per second")
    print(f"{'kind':<16} {'consoles':>8} {'broker µs/req':>14} {'req/s':>9}")
    for (count, kind), values in sorted(figures.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        us = statistics.median(v[0] for v in values)
        rps = statistics.median(v[1] for v in values)
        print(f"{kind:<16} {count:>8} {us:>14.1f} {rps:>9.0f}")
    for count, rates in sorted(updates.items()):
        if count:
            print(f"{count} consoles received {statistics.median(rates):.1f} updates/s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
