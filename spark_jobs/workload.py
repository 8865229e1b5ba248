"""A realistic client mix against a broker, so a capture exercises all four purgatories.

``python -m spark_jobs.workload --bootstrap HOST:PORT --duration SECONDS`` (which
``minikafka workload ...`` runs in a child process, as it runs ``replay`` and
``report``) runs, for the duration:

* two aiokafka producers on one topic, one with ``acks=1`` and one with ``acks=all``
  (with replication factor > 1 an acks=all produce waits in the Produce purgatory for
  the followers; on a single broker it never parks);
* a consumer group of two aiokafka members that long-poll (``fetch_max_wait_ms`` 500:
  a fetch finding nothing parks in the Fetch purgatory); the second joins a second
  after the first, so the group rebalances and joins park in the Rebalance purgatory
  (DelayedJoin, and DelayedSync while the leader assigns);
* a member that dies without leaving: a raw-protocol client (``protocol.client``
  under a small asyncio shell) joins a group of its own (JoinGroup,
  MEMBER_ID_REQUIRED, JoinGroup again, SyncGroup) with a short session timeout and
  then falls silent with its connection open, so its DelayedHeartbeat expires within
  the run. It is in a group of its own so that its death does not stall the
  consumers' group for a session timeout.

The topic is created (partitions 3, replication factor min(3, brokers) unless given)
before the clients start. Prints a summary line of what was done. It is client code:
it lives beside the replay, which also talks to a broker only over TCP.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import struct
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from kio.static.protocol import RequestPayload

from client_io import ClientShell
from protocol.builders import request_builder

__all__ = ["WorkloadConfig", "WorkloadSummary", "main", "run_workload"]

log = logging.getLogger("spark_jobs.workload")

FIND_COORDINATOR, JOIN_GROUP, SYNC_GROUP = 10, 11, 14
MEMBER_ID_REQUIRED = 79


@dataclass
class WorkloadConfig:
    bootstrap: str
    duration_s: float = 10.0
    topic: str = "workload"
    group_id: str = "workload-group"
    replication_factor: int | None = None
    partitions: int = 3
    #: Session timeout of the member that dies (group.min.session.timeout.ms permits
    #: 6000 by default); its expiry comes this long after it joined.
    dying_session_timeout_ms: int = 6000
    #: Time between sends of each producer.
    produce_interval_s: float = 0.02


@dataclass
class WorkloadSummary:
    produced: dict[str, int] = field(default_factory=dict)
    consumed: int = 0
    dying_member_id: str | None = None
    elapsed_s: float = 0.0

    def __str__(self) -> str:
        produced = ", ".join(f"acks={k}: {v}" for k, v in sorted(self.produced.items()))
        return (
            f"workload: produced {produced}; consumed {self.consumed}; dying member "
            f"{self.dying_member_id}; {self.elapsed_s:.1f} s"
        )


async def _create_topic(config: WorkloadConfig) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.errors import TopicAlreadyExistsError

    admin = AIOKafkaAdminClient(bootstrap_servers=config.bootstrap)
    await admin.start()
    try:
        brokers = len(admin._client.cluster.brokers())
        rf = config.replication_factor or min(3, max(brokers, 1))
        with contextlib.suppress(TopicAlreadyExistsError):
            await admin.create_topics([NewTopic(config.topic, config.partitions, rf)])
    finally:
        await admin.close()


async def _call(client: ClientShell, api_key: int, version: int, request: RequestPayload) -> Any:
    """One request at a time on the shell: just enough of a Kafka client to join a group and
    then say nothing."""
    return (await client.request(api_key, version, request)).body


def _subscription(topic: str) -> bytes:
    """ConsumerProtocolSubscription v0: version, [topic], null user data."""
    name = topic.encode()
    return struct.pack(">hih", 0, 1, len(name)) + name + struct.pack(">i", -1)


async def _dying_member(config: WorkloadConfig, group_id: str) -> tuple[ClientShell, str]:
    """Join ``group_id`` alone, sync, and return the (silent from now on) client."""
    host, _, port = config.bootstrap.split(",")[0].rpartition(":")
    client = await ClientShell.open(host, int(port), client_id="workload-dying-member")
    find = request_builder(FIND_COORDINATOR, 1).FindCoordinatorRequest(key=group_id, key_type=0)
    coordinator = await _call(client, FIND_COORDINATOR, 1, find)
    if (coordinator.host, coordinator.port) != (host, int(port)):
        await client.close()
        client = await ClientShell.open(
            coordinator.host, coordinator.port, client_id="workload-dying-member"
        )
    b = request_builder(JOIN_GROUP, 5)
    timeout = timedelta(milliseconds=config.dying_session_timeout_ms)
    member_id = ""
    for _ in range(3):
        join = b.JoinGroupRequest(
            group_id=group_id,
            session_timeout=timeout,
            rebalance_timeout=timeout,
            member_id=member_id,
            group_instance_id=None,
            protocol_type="consumer",
            protocols=(
                b.JoinGroupRequestProtocol(name="range", metadata=_subscription(config.topic)),
            ),
        )
        joined = await _call(client, JOIN_GROUP, 5, join)
        member_id = joined.member_id
        if joined.error_code != MEMBER_ID_REQUIRED:
            break
    if joined.error_code != 0:
        raise RuntimeError(f"dying member could not join: error {int(joined.error_code)}")
    s = request_builder(SYNC_GROUP, 3)
    sync = s.SyncGroupRequest(
        group_id=group_id,
        generation_id=joined.generation_id,
        member_id=member_id,
        group_instance_id=None,
        assignments=(s.SyncGroupRequestAssignment(member_id=member_id, assignment=b""),),
    )
    await _call(client, SYNC_GROUP, 3, sync)
    return client, member_id


async def _produce(
    config: WorkloadConfig, acks: int | str, deadline: float, counts: dict[str, int]
) -> None:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(
        bootstrap_servers=config.bootstrap, acks=acks, client_id=f"workload-acks-{acks}"
    )
    await producer.start()
    key = str(acks)
    counts[key] = 0
    try:
        i = 0
        while time.monotonic() < deadline:
            await producer.send_and_wait(
                config.topic, f"{key}-{i}".encode(), key=str(i % 7).encode()
            )
            counts[key] += 1
            i += 1
            await asyncio.sleep(config.produce_interval_s)
    finally:
        await producer.stop()


async def _consume(
    config: WorkloadConfig, name: str, deadline: float, summary: WorkloadSummary
) -> None:
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(
        config.topic,
        bootstrap_servers=config.bootstrap,
        group_id=config.group_id,
        client_id=name,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=500,
        session_timeout_ms=10000,
        heartbeat_interval_ms=1000,
    )
    await consumer.start()
    try:
        while time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=500)
            summary.consumed += sum(len(records) for records in batches.values())
    finally:
        await consumer.stop()


async def run_workload(config: WorkloadConfig) -> WorkloadSummary:
    """Run the mix for ``config.duration_s`` seconds; see the module doc."""
    started = time.monotonic()
    summary = WorkloadSummary()
    await _create_topic(config)
    deadline = started + config.duration_s
    dying, summary.dying_member_id = await _dying_member(config, f"{config.group_id}-dying")
    try:
        tasks = [
            asyncio.create_task(_produce(config, 1, deadline, summary.produced)),
            asyncio.create_task(_produce(config, "all", deadline, summary.produced)),
            asyncio.create_task(_consume(config, "workload-consumer-1", deadline, summary)),
        ]
        await asyncio.sleep(min(1.0, config.duration_s / 4))
        tasks.append(
            asyncio.create_task(_consume(config, "workload-consumer-2", deadline, summary))
        )
        await asyncio.gather(*tasks)
    finally:
        await dying.close()
    summary.elapsed_s = time.monotonic() - started
    return summary


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="minikafka workload",
        description="Drive a broker with a realistic client mix (aiokafka) that "
        "exercises all four purgatories.",
    )
    parser.add_argument("--bootstrap", required=True, help="HOST:PORT[,HOST:PORT...]")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds (10)")
    parser.add_argument("--topic", default="workload", help="topic name (workload)")
    parser.add_argument("--group", default="workload-group", help="consumer group")
    parser.add_argument(
        "--replication-factor",
        type=int,
        default=None,
        help="of the topic; default min(3, brokers in the cluster)",
    )
    parser.add_argument("--log-level", default="INFO", help="Python logging level (INFO)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the workload and print its summary line."""
    args = parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    config = WorkloadConfig(
        bootstrap=args.bootstrap,
        duration_s=args.duration,
        topic=args.topic,
        group_id=args.group,
        replication_factor=args.replication_factor,
    )
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
        summary = asyncio.run(run_workload(config))
    else:
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            summary = runner.run(run_workload(config))
    print(summary, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
