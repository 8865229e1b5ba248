"""Coordinator failover: how long a group is unavailable when its ``__consumer_offsets``
partition changes leader, and how long the event loop stalls meanwhile.

A three-broker minikafka in this process (``MiniKafka``: the three brokers share this
event loop, so a stall of the loop is a stall of every broker; that is what we measure).
Per scenario:

1. ``--commits`` offset commits (raw OffsetCommit v8, generation -1, ``--partitions``
   partitions a request) spread over ``--groups`` groups that all live in the same
   ``__consumer_offsets`` partition, from ``--connections`` connections with
   ``--window`` requests in flight each; every commit waits for the ISR (acks=all).
2. ``compacted``: the log cleaner (``log.cleaner.backoff.ms`` small) is given until every
   replica of the partition is cleaned (segments of ``--segment-bytes``, so that all but
   the last one can be); ``uncompacted``: the cleaner is off, same segments.
3. The leader of the partition is stopped (``MiniKafka.stop_broker``, which fails its
   leaderships over). From that moment a poller sends OffsetFetch v8 for the first group
   to whichever broker leads the partition, every ms, until one answers NONE with the
   last committed offsets; a probe task sleeping 1 ms notes how late it wakes (the
   loop's lag); a pinger sends ApiVersions to the surviving brokers every 2 ms and
   notes each one's latency from when it was due. Printed: time to the new leader's
   election, to the first good OffsetFetch, how many OffsetFetch answers were
   COORDINATOR_LOAD_IN_PROGRESS / NOT_COORDINATOR meanwhile, the longest and the p99
   loop lag and the longest ApiVersions latency from the stop until 0.3 s after the
   first good OffsetFetch. The lag while the stopped broker shuts itself down (on this
   loop too, which a broker in its own process would not be) is its own column
   ("shutdown lag"); "lag max" starts when the controller hears of the failure: the
   failover and the new leader's load.

The segment size goes to ``offsets.topic.segment.bytes`` when the broker config knows
that key, else to ``log.segment.bytes`` (an older checkout: every topic then gets it).
Prints figures; asserts nothing.

Run: ``.venv/bin/python -m bench.groups.coordinator_failover_bench`` (about a minute); the
brokers are this checkout's, in this process (an older checkout: run its own copy of
this bench from its root).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from bench.lib.stats import percentile
from broker.app import MiniKafka
from broker.cluster.cluster_metadata import OFFSETS_TOPIC
from broker.config.broker_config import BrokerConfig
from broker.coordinator.partition_hash import partition_for
from protocol.builders import request_builder
from testkit.raw_client import RawClient

API_VERSIONS = 18
OFFSET_COMMIT = 8
OFFSET_FETCH = 9
TOPIC = "bench-events"


@dataclass
class Result:
    scenario: str
    commits: int = 0
    commit_s: float = 0.0
    log_records: int = 0
    log_bytes: int = 0
    segments_note: str = ""
    election_ms: float = 0.0
    first_fetch_ms: float = float("nan")
    load_in_progress: int = 0
    not_coordinator: int = 0
    lag_max_ms: float = 0.0
    lag_p99_ms: float = 0.0
    ping_max_ms: float = 0.0
    idle_lag_max_ms: float = 0.0
    shutdown_lag_max_ms: float = 0.0
    idle_ping_max_ms: float = 0.0
    lags: list[float] = field(default_factory=list)


def config_for(args: argparse.Namespace, compacted: bool) -> BrokerConfig:
    known = {f.alias for f in BrokerConfig.model_fields.values() if f.alias}
    segment_key = (
        "offsets.topic.segment.bytes"
        if "offsets.topic.segment.bytes" in known
        else "log.segment.bytes"
    )
    values = {
        "group.initial.rebalance.delay.ms": "0",
        "offsets.topic.replication.factor": "3",
        "offsets.topic.num.partitions": str(args.offsets_partitions),
        segment_key: str(args.segment_bytes),
        "log.cleaner.enable": "true" if compacted else "false",
        "log.cleaner.backoff.ms": "100",
    }
    return BrokerConfig.model_validate(values)


def groups_in_one_partition(count: int, num_partitions: int) -> tuple[list[str], int]:
    target = partition_for("bench-group-0", num_partitions)
    groups: list[str] = []
    i = 0
    while len(groups) < count:
        name = f"bench-group-{i}"
        if partition_for(name, num_partitions) == target:
            groups.append(name)
        i += 1
    return groups, target


def commit_frame_args(group: str, partitions: int, offset: int) -> dict[str, Any]:
    b = request_builder(OFFSET_COMMIT, 8)
    return {
        "group_id": group,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "group_instance_id": None,
        "topics": (
            b.OffsetCommitRequestTopic(
                name=TOPIC,
                partitions=tuple(
                    b.OffsetCommitRequestPartition(
                        partition_index=p,
                        committed_offset=offset,
                        committed_leader_epoch=-1,
                        committed_metadata="",
                    )
                    for p in range(partitions)
                ),
            ),
        ),
    }


async def commit_all(
    app: MiniKafka, leader: int, groups: list[str], args: argparse.Namespace
) -> tuple[int, dict[str, int]]:
    """Send the commits; return how many offsets were committed and each group's last."""
    broker = app.brokers[leader]
    requests = args.commits // args.partitions
    plan = [(groups[i % len(groups)], i // len(groups) + 1) for i in range(requests)]
    last = {g: o for g, o in plan}
    queue: asyncio.Queue[tuple[str, int]] = asyncio.Queue()
    for item in plan:
        queue.put_nowait(item)
    failures: list[str] = []

    async def connection() -> None:
        raw = await RawClient.connect(broker.advertised_host, broker.port, timeout_s=60)
        in_flight = 0
        try:
            while True:
                while in_flight < args.window and not queue.empty():
                    group, offset = queue.get_nowait()
                    raw.send(
                        OFFSET_COMMIT,
                        8,
                        "OffsetCommitRequest",
                        **commit_frame_args(group, args.partitions, offset),
                    )
                    in_flight += 1
                if in_flight == 0:
                    return
                await raw.drain()
                response = await raw.response()
                in_flight -= 1
                error = response.body.topics[0].partitions[0].error_code
                if error is not ErrorCode.none:
                    failures.append(error.name)
        finally:
            await raw.close()

    await asyncio.gather(*(connection() for _ in range(args.connections)))
    if failures:
        print(f"  ! {len(failures)} commit requests failed: {sorted(set(failures))}")
    return requests * args.partitions, last


def cleaner_of(broker: Any) -> Any:
    for component in broker._components:  # a bench may look inside
        if type(component).__name__ == "LogCleaner":
            return component
    return None


async def wait_cleaned(app: MiniKafka, tp: tuple[str, int], timeout_s: float = 60) -> str:
    """Until no replica of ``tp`` needs cleaning (nothing dirty enough is left)."""
    deadline = time.perf_counter() + timeout_s
    while time.perf_counter() < deadline:
        done = True
        for broker in app.brokers:
            partition = broker.replica_manager.online_partition(tp)
            cleaner = cleaner_of(broker)
            if partition is None or cleaner is None:
                continue
            plan = cleaner.plan(
                f"{tp[0]}-{tp[1]}",
                partition.log,
                partition.last_stable_offset,
                cleaner.wall_clock_ms(),
            )
            if plan is not None or cleaner._busy:
                done = False
        if done:
            return ""
        await asyncio.sleep(0.05)
    return " (cleaning still pending)"


def record_count(log: Any) -> int:
    from protocol.record_batch import iter_batches

    total = 0
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        chunk = log.read(offset, 1 << 22, max_offset=log.log_end_offset)
        if not chunk:
            break
        for _position, header in iter_batches(chunk, allow_partial_tail=True):
            total += header.records_count
            offset = header.last_offset + 1
    return total


async def fetch_until_ok(
    app: MiniKafka,
    clients: dict[int, RawClient],
    tp: tuple[str, int],
    old_leader: int,
    group: str,
    expected: int,
    partitions: int,
    result: Result,
    t0: float,
) -> None:
    b = request_builder(OFFSET_FETCH, 8)
    request = {
        "groups": (
            b.OffsetFetchRequestGroup(
                group_id=group,
                topics=(
                    b.OffsetFetchRequestTopics(
                        name=TOPIC, partition_indexes=tuple(range(partitions))
                    ),
                ),
            ),
        ),
        "require_stable": False,
    }
    elected = False
    while True:
        state = app.cluster.partition_state(*tp)
        leader = state.leader if state is not None else -1
        if leader in (old_leader, -1) or leader not in clients:
            await asyncio.sleep(0.001)
            continue
        if not elected:
            elected = True
            result.election_ms = (time.perf_counter() - t0) * 1000
        response = await clients[leader].request(OFFSET_FETCH, 8, "OffsetFetchRequest", **request)
        answer = response.groups[0]
        error = answer.error_code
        if error is ErrorCode.none:
            offsets = [int(p.committed_offset) for p in answer.topics[0].partitions]
            if offsets and all(o == expected for o in offsets):
                result.first_fetch_ms = (time.perf_counter() - t0) * 1000
                return
            print(f"  ! OffsetFetch answered NONE with offsets {sorted(set(offsets))[:5]}")
        elif error is ErrorCode.coordinator_load_in_progress:
            result.load_in_progress += 1
        elif error is ErrorCode.not_coordinator:
            result.not_coordinator += 1
        await asyncio.sleep(0.001)


async def probe_loop(lags: list[float], stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        before = loop.time()
        await asyncio.sleep(0.001)
        lags.append(max(0.0, (loop.time() - before - 0.001) * 1000))


async def ping(raw: RawClient, worst: list[float], stop: asyncio.Event) -> None:
    """ApiVersions to one surviving broker every 2 ms; the latency of each is counted
    from when it was due, so a stall of the loop while the pinger waits counts too (what
    a client sending at that moment would see)."""
    due = time.perf_counter()
    while not stop.is_set():
        with contextlib.suppress(Exception):
            await raw.request(
                API_VERSIONS,
                3,
                "ApiVersionsRequest",
                client_software_name="bench",
                client_software_version="1",
            )
        worst[0] = max(worst[0], (time.perf_counter() - due) * 1000)
        due = time.perf_counter() + 0.002
        await asyncio.sleep(0.002)


async def scenario(name: str, args: argparse.Namespace) -> Result:
    compacted = name == "compacted"
    result = Result(name)
    app = MiniKafka(config_for(args, compacted), brokers=3, port=0)
    await app.start()
    try:
        manager = app.brokers[0].services.coordinators.group_metadata_manager
        manager.ensure_offsets_topic()
        groups, partition = groups_in_one_partition(args.groups, args.offsets_partitions)
        tp = (OFFSETS_TOPIC, partition)
        for _ in range(2000):
            state = app.cluster.partition_state(*tp)
            assert state is not None
            coordinator = app.brokers[state.leader].services.coordinators.group_metadata_manager
            if len(state.isr) == 3 and coordinator.check_coordinator(groups[0]) is ErrorCode.none:
                break
            await asyncio.sleep(0.005)
        leader = state.leader

        start = time.perf_counter()
        result.commits, last = await commit_all(app, leader, groups, args)
        result.commit_s = time.perf_counter() - start
        if compacted:
            result.segments_note = await wait_cleaned(app, tp)
        for _ in range(2000):  # the followers have everything (acks=all: they do)
            state = app.cluster.partition_state(*tp)
            if state is not None and len(state.isr) == 3:
                break
            await asyncio.sleep(0.005)
        successor = next(b for b in state.isr if b != leader)
        log = app.brokers[successor].replica_manager.online_partition(tp)
        assert log is not None
        result.log_records = record_count(log.log)
        result.log_bytes = log.log.size_bytes

        clients = {
            b.broker_id: await RawClient.connect(b.advertised_host, b.port, timeout_s=30)
            for b in app.brokers
            if b.broker_id != leader
        }
        pingers = [
            await RawClient.connect(b.advertised_host, b.port, timeout_s=30)
            for b in app.brokers
            if b.broker_id != leader
        ]
        await asyncio.sleep(0.2)  # quiet
        stop = asyncio.Event()
        lags: list[float] = []
        worst = [0.0]
        probe = asyncio.create_task(probe_loop(lags, stop))
        pinger = asyncio.gather(*(ping(raw, worst, stop) for raw in pingers))
        await asyncio.sleep(0.5)  # the loop's lag with nothing happening, for reference
        result.idle_lag_max_ms = max(lags, default=0.0)
        result.idle_ping_max_ms = worst[0]
        lags.clear()
        worst[0] = 0.0  # (a ping due before the stop but answered after counts in both)
        # The stopped broker's own shutdown runs on this loop too (it would not, in a
        # cluster of processes): its lag is told apart from the failover's, which starts
        # when the controller hears of the failure.
        failover_from = [len(lags)]
        on_failure = app.controller.on_broker_failure

        def failure_seen(broker_id: int) -> Any:
            failover_from[0] = len(lags)
            return on_failure(broker_id)

        app.controller.on_broker_failure = failure_seen  # type: ignore[method-assign]
        t0 = time.perf_counter()
        stopping = asyncio.create_task(app.stop_broker(leader))
        await asyncio.wait_for(
            fetch_until_ok(
                app, clients, tp, leader, groups[0], last[groups[0]], args.partitions, result, t0
            ),
            timeout=60,
        )
        await stopping
        await asyncio.sleep(0.3)
        stop.set()
        await asyncio.gather(probe, pinger)
        result.lags = lags
        result.shutdown_lag_max_ms = max(lags[: failover_from[0]], default=0.0)
        lags = lags[failover_from[0] :]
        result.lag_max_ms = max(lags, default=0.0)
        result.lag_p99_ms = (percentile(lags, 99) or 0.0) if len(lags) >= 100 else result.lag_max_ms
        result.ping_max_ms = worst[0]
        for raw in [*clients.values(), *pingers]:
            await raw.close()
    finally:
        await app.stop()
    return result


def show(results: list[Result], args: argparse.Namespace) -> None:
    print(
        f"{args.commits} commits: {args.groups} groups x {args.partitions} partitions in one "
        f"__consumer_offsets partition, {args.connections} connections x {args.window} in "
        f"flight, segment.bytes {args.segment_bytes}"
    )
    header = (
        f"{'scenario':<16} {'commit s':>8} {'records':>8} {'log MB':>7} {'elect ms':>8} "
        f"{'fetch ok ms':>11} {'LOAD_IN_PROG':>12} {'NOT_COORD':>9} {'lag max ms':>10} "
        f"{'lag p99 ms':>10} {'ping max ms':>11} {'idle lag/ping max':>17} {'shutdown lag':>12}"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        print(
            f"{r.scenario:<16} {r.commit_s:>8.1f} {r.log_records:>8} "
            f"{r.log_bytes / 1e6:>7.2f} {r.election_ms:>8.1f} {r.first_fetch_ms:>11.1f} "
            f"{r.load_in_progress:>12} {r.not_coordinator:>9} {r.lag_max_ms:>10.1f} "
            f"{r.lag_p99_ms:>10.1f} {r.ping_max_ms:>11.1f} "
            f"{r.idle_lag_max_ms:>8.1f}/{r.idle_ping_max_ms:<8.1f} "
            f"{r.shutdown_lag_max_ms:>12.1f}{r.segments_note}"
        )


def median_row(name: str, runs: list[Result]) -> Result:
    """Each column's median over ``runs`` (so not one run's row)."""
    row = Result(f"{name} med")
    for attr in (
        "commits",
        "commit_s",
        "log_records",
        "log_bytes",
        "election_ms",
        "first_fetch_ms",
        "load_in_progress",
        "not_coordinator",
        "lag_max_ms",
        "lag_p99_ms",
        "ping_max_ms",
        "idle_lag_max_ms",
        "shutdown_lag_max_ms",
        "idle_ping_max_ms",
    ):
        value = statistics.median(getattr(r, attr) for r in runs)
        setattr(row, attr, type(getattr(runs[0], attr))(value))
    return row


async def main_async(args: argparse.Namespace) -> None:
    results = []
    for name in args.scenarios.split(","):
        runs = [await scenario(name, args) for _ in range(args.reps)]
        results.extend(runs)
        if len(runs) > 1:
            results.append(median_row(name, runs))
    show(results, args)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=100_000)
    parser.add_argument("--groups", type=int, default=10)
    parser.add_argument("--partitions", type=int, default=100, help="offsets per request")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--window", type=int, default=4)
    parser.add_argument("--offsets-partitions", type=int, default=50)
    parser.add_argument("--segment-bytes", type=int, default=1 << 20)
    parser.add_argument("--scenarios", default="uncompacted,compacted")
    parser.add_argument("--reps", type=int, default=1, help="runs of each scenario")
    parser.add_argument("--no-uvloop", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    runner: Callable[..., Any] = asyncio.run
    if not args.no_uvloop:
        with contextlib.suppress(ImportError):
            import uvloop

            runner = uvloop.run
    runner(main_async(args))


if __name__ == "__main__":
    main()
