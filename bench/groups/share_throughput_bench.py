"""Records per second through a share group beside a classic group, with the broker's CPU.

One ``minikafka serve`` subprocess (its own interpreter: the clients do not share its
GIL), one topic of ``--partitions`` partitions holding ``--records`` records (produced
once, before any group reads). Then, each on a new group reading from the earliest
offset, every scenario drains the whole topic once and is timed:

- ``classic xK``: K confluent-kafka ``Consumer`` s of one classic group (auto commit);
- ``share implicit xK``: K ``ShareConsumer`` s of one share group, implicit
  acknowledgement (each poll acknowledges the previous one's records, piggy-backed on
  the next ShareFetch);
- ``share explicit xK``: K ``ShareConsumer`` s, ``share.acknowledgement.mode=explicit``,
  every record ACCEPTed and ``commit_sync`` after each poll — a ShareAcknowledge that
  waits for the durable state write, as confluent-kafka-python's
  ``test_commit_handles_high_volume_across_two_consumers`` does.

Each consumer polls in its own thread (librdkafka releases the GIL). A scenario ends when
every (partition, offset) has been seen; it prints wall seconds from subscribe to the
last record, records/s, the broker's CPU (``/proc/<pid>/stat`` utime + stime over the
scenario) in microseconds per record, and duplicates seen (share groups only deliver a
record twice after a lock expiry). ``--profile PATH`` runs the broker under cProfile (the
figures are then slower; read the profile with ``pstats``). Figures only; never a
pass/fail.

Run: ``.venv/bin/python -m bench.groups.share_throughput_bench [--records 20000]
[--partitions 6] [--consumers 1,2,4] [--scenarios classic,implicit,explicit]
[--reps 3] [--sticky] [--checkout DIR] [--profile FILE]``; ``--reps`` prints each scenario's median
run (by seconds); ``--sticky`` produces with librdkafka's own partitioner and batching (a
few big batches on a few partitions, as the high-volume test); ``--checkout`` runs
another checkout's broker (e.g. ``git archive c0e8167`` unpacked) for a before/after
table.
"""

from __future__ import annotations

import argparse
import os
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from bench.lib.tables import table_lines
from testkit.broker_process import BrokerProcess

_QUIET = {"log_level": 3}
TOPIC = "share-throughput"


def proc_cpu_s(pid: int) -> float:
    """utime + stime of the whole process (every thread), seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _produce(bootstrap: str, records: int, partitions: int, sticky: bool) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(TOPIC, partitions, 1)]).values():
        future.result()
    batching = {} if sticky else {"linger.ms": 5, "batch.num.messages": 500}
    producer = Producer({"bootstrap.servers": bootstrap, **batching, **_QUIET})
    for i in range(records):
        # sticky: librdkafka's own partitioner, as confluent-kafka-python's high-volume
        # test produces (a few big batches on a few partitions); else round-robin
        where = {} if sticky else {"partition": i % partitions}
        while True:
            try:
                producer.produce(TOPIC, value=b"v%08d" % i, **where)
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(30)


def _earliest(bootstrap: str, group: str) -> None:
    """The share group reads from the earliest offset (a GROUP config)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entry = ConfigEntry(
        "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
    )
    resource = ConfigResource(ConfigResource.Type.GROUP, group, incremental_configs=[entry])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result()


class _Seen:
    """Every (partition, offset) seen, across the scenario's consumers."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.keys: set[tuple[int, int]] = set()
        self.duplicates = 0
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.last = 0.0

    def add(self, messages: list[Any]) -> None:
        with self.lock:
            for msg in messages:
                key = (msg.partition(), msg.offset())
                if key in self.keys:
                    self.duplicates += 1
                self.keys.add(key)
            self.last = time.monotonic()
            if len(self.keys) >= self.total:
                self.done.set()


def _classic(bootstrap: str, group: str, seen: _Seen) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            **_QUIET,
        }
    )
    consumer.subscribe([TOPIC])
    try:
        while not seen.done.is_set():
            batch = [m for m in consumer.consume(500, 0.2) if m.error() is None]
            if batch:
                seen.add(batch)
    finally:
        consumer.close()


def _share(explicit: bool) -> Callable[[str, str, _Seen], None]:
    def run(bootstrap: str, group: str, seen: _Seen) -> None:
        mode = "explicit" if explicit else "implicit"
        consumer = ShareConsumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "share.acknowledgement.mode": mode,
                **_QUIET,
            }
        )
        consumer.subscribe([TOPIC])
        try:
            while not seen.done.is_set():
                batch = [m for m in consumer.poll(0.2) if m.error() is None]
                if not batch:
                    continue
                if explicit:
                    for msg in batch:
                        consumer.acknowledge(msg)
                    consumer.commit_sync(10.0)
                seen.add(batch)
        finally:
            consumer.close()

    return run


SCENARIOS: dict[str, Callable[[bool], Callable[[str, str, _Seen], None]]] = {
    "classic": lambda _explicit: _classic,
    "implicit": lambda _explicit: _share(False),
    "explicit": lambda _explicit: _share(True),
}


def _scenario(
    broker: BrokerProcess, kind: str, consumers: int, records: int, timeout_s: float
) -> list[object]:
    group = f"{kind}-{consumers}-{uuid.uuid4().hex[:6]}"
    if kind != "classic":
        _earliest(broker.bootstrap, group)
    seen = _Seen(records)
    run = SCENARIOS[kind](kind == "explicit")
    cpu0 = proc_cpu_s(broker.proc.pid)
    start = time.monotonic()
    threads = [
        threading.Thread(target=run, args=(broker.bootstrap, group, seen), daemon=True)
        for _ in range(consumers)
    ]
    for thread in threads:
        thread.start()
    finished = seen.done.wait(timeout_s)
    elapsed = (seen.last if finished else time.monotonic()) - start
    cpu = proc_cpu_s(broker.proc.pid) - cpu0
    seen.done.set()
    for thread in threads:
        thread.join(30)
    got = len(seen.keys)
    label = "classic" if kind == "classic" else f"share {kind}"
    return [
        f"{label} x{consumers}",
        f"{got}" + ("" if finished else " (timeout)"),
        f"{elapsed:.2f}",
        f"{got / elapsed:,.0f}" if elapsed > 0 else "-",
        f"{cpu * 1e6 / max(got, 1):.0f}",
        seen.duplicates,
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20000)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--consumers", default="1,2,4")
    parser.add_argument("--scenarios", default="classic,implicit,explicit")
    parser.add_argument("--timeout", type=float, default=120.0, help="per scenario, s")
    parser.add_argument("--reps", type=int, default=1, help="runs per scenario; the median")
    parser.add_argument(
        "--sticky", action="store_true", help="produce with librdkafka's partitioner, defaults"
    )
    parser.add_argument("--profile", type=Path, default=None, help="cProfile the broker here")
    parser.add_argument("--override", action="append", default=[], help="a broker config")
    parser.add_argument(
        "--checkout", type=Path, default=None, help="run this checkout's broker (the before)"
    )
    args = parser.parse_args()
    extra = [a for kv in args.override for a in ("--override", kv)]
    broker = BrokerProcess(
        extra, cwd=args.checkout, stderr=None, log_level="WARNING", profile=args.profile
    )
    try:
        _produce(broker.bootstrap, args.records, args.partitions, args.sticky)
        rows = []
        for kind in args.scenarios.split(","):
            for k in args.consumers.split(","):
                runs = [
                    _scenario(broker, kind, int(k), args.records, args.timeout)
                    for _ in range(args.reps)
                ]
                runs.sort(key=lambda row: float(str(row[2])))
                rows.append(runs[len(runs) // 2])  # the median run by seconds
    finally:
        broker.stop()
    print(
        f"{args.records} records ({'sticky' if args.sticky else 'round-robin'}), "
        f"{args.partitions} partitions, one broker "
        f"({'cProfile' if args.profile else 'no profiler'}), "
        f"checkout {args.checkout or 'this one'}"
    )
    header = ["scenario", "records", "seconds", "records/s", "broker CPU us/record", "dups"]
    print("\n".join(table_lines(header, rows, rule=True)))


if __name__ == "__main__":
    main()
