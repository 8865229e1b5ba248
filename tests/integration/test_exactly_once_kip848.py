"""Exactly once with KIP-848 consumers: a consume-transform-produce of 10,000 records by
confluent-kafka workers (``group.protocol=consumer``, each with a transactional producer,
``eos_worker.py``) through a rebalance — a member joins, one dies — and the failover of
the group's coordinator gives each input exactly once in the output, as a
``read_committed`` consumer sees it.

Three brokers, every topic replicated three times. The input is written in four parts,
each followed by an event while the workers process it: a third worker joins; a worker
is killed (SIGKILL: no LeaveGroup, its open transaction left to the transaction timeout,
its member to the session timeout — its partitions' new owner reads from the group's
committed offsets once that transaction is aborted); the broker leading the group's
``__consumer_offsets`` partition stops. A worker whose epoch moved on under it, or that is
no member any more, is fenced by TxnOffsetCommit (ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID),
aborts and rewinds to the committed offsets; the test also plays such zombies at the
wire (the group metadata the workers had before the rebalance, the dead worker's) and
sees them fenced while the new owners commit. The test waits for the group's committed
offsets (read at its coordinator) to reach each part's end, never for a time.

After the failover the workers' producers must find the group's new coordinator, which
librdkafka 2.16 does not always do by itself once the old one left the cluster metadata
(``eos_worker.py`` says why, and how the workers get around it).
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from kio.schema.errors import ErrorCode

from broker.app import MiniKafka
from broker.cluster.cluster_metadata import OFFSETS_TOPIC
from protocol.builders import request_builder
from testkit.polling import wait_until
from testkit.raw_client import RawClient
from tests.integration.conftest import running_cluster

pytestmark = pytest.mark.asyncio

TXN_OFFSET_COMMIT = 28
PARTITIONS = 4
RECORDS = 10_000
PARTS = 4
WORKER = Path(__file__).with_name("eos_worker.py")
CLUSTER: dict[str, Any] = {
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "default.replication.factor": "3",
    "group.consumer.heartbeat.interval.ms": "300",
    "group.consumer.min.heartbeat.interval.ms": "100",
    "group.consumer.session.timeout.ms": "3000",
    "group.consumer.min.session.timeout.ms": "1000",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
}
WAIT: dict[str, Any] = {"attempts": 1200, "step_s": 0.05}  # 60 s at most, on a loaded machine


class Workers:
    """The worker processes; each leaves its group when its stdin closes."""

    def __init__(self, app: MiniKafka, group: str, source: str, sink: str) -> None:
        self.args = [app.bootstrap, group, source, sink]
        self.running: dict[str, subprocess.Popen[str]] = {}
        self.reports: list[dict[str, Any]] = []

    def start(self, name: str, txn_timeout_ms: int = 30_000) -> None:
        txn_id = f"eos-{name}-{uuid.uuid4().hex[:6]}"
        self.running[name] = subprocess.Popen(
            [sys.executable, str(WORKER), *self.args, txn_id, str(txn_timeout_ms)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def kill(self, name: str) -> None:
        worker = self.running.pop(name)
        worker.send_signal(signal.SIGKILL)
        worker.wait(30)

    def stop_all(self) -> None:
        for name, worker in self.running.items():
            out, _ = worker.communicate(input="", timeout=60)
            assert worker.returncode == 0, f"worker {name} failed ({worker.returncode})"
            self.reports.append(json.loads(out.strip().splitlines()[-1]))
        self.running.clear()

    def exits(self) -> dict[str, int | None]:
        return {name: worker.poll() for name, worker in self.running.items()}

    def kill_all(self) -> None:
        for worker in self.running.values():
            worker.kill()
            worker.wait(30)


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "log_level": 3}
    )
    for value in values:
        producer.produce(topic, value, partition=int(value) % PARTITIONS)
    assert producer.flush(30) == 0


def _coordinator(app: MiniKafka, group: str) -> int:
    """The group's coordinator; -1 until ``__consumer_offsets`` exists (the workers'
    first FindCoordinator creates it: under load, after the first poll)."""
    manager = app.brokers[0].services.coordinators.group_metadata_manager
    state = app.cluster.partition_state(OFFSETS_TOPIC, manager.partition_for(group))
    return -1 if state is None else state.leader


def _committed(app: MiniKafka, group: str, topic: str) -> int:
    """How many inputs the group's committed offsets cover, at its coordinator."""
    leader = _coordinator(app, group)
    if leader < 0 or leader in app.stopped_brokers:
        return -1
    manager = app.brokers[leader].services.coordinators.group_metadata_manager
    if manager.check_coordinator(group) is not ErrorCode.none:
        return -1
    fetched = manager.get_offsets(group, [(topic, p) for p in range(PARTITIONS)])
    return sum(max(r.offset, 0) for r in fetched.values())


def _members(app: MiniKafka, group: str) -> int:
    leader = _coordinator(app, group)
    if leader < 0 or leader in app.stopped_brokers:
        return -1
    found = app.brokers[leader].services.coordinators.consumer_group.group(group)
    return -1 if found is None else found.num_members


def _transactions(app: MiniKafka) -> list[str]:
    """Every live broker's transactions not Empty / CompleteCommit (for a failure's note)."""
    found = []
    for broker in app.brokers:
        if broker.broker_id in app.stopped_brokers:
            continue
        for txn in broker.services.coordinators.txn.txn_manager.all_transactions():
            if txn.state.name not in ("EMPTY", "COMPLETE_COMMIT", "COMPLETE_ABORT"):
                found.append(f"{broker.broker_id}:{txn.transactional_id}:{txn.state.name}")
    return found


def _epochs(app: MiniKafka, group: str) -> dict[str, int]:
    found = app.brokers[_coordinator(app, group)].services.coordinators.consumer_group.group(group)
    assert found is not None
    return {m.member_id: m.member_epoch for m in found.members.values()}


async def _zombie_commit(app: MiniKafka, group: str, topic: str, member: str, epoch: int) -> Any:
    """A TxnOffsetCommit with group metadata a worker once had, at the coordinator."""
    coordinator = app.brokers[_coordinator(app, group)]
    raw = await RawClient.connect(coordinator.advertised_host, coordinator.port)
    b = request_builder(TXN_OFFSET_COMMIT, 3)
    partition = b.TxnOffsetCommitRequestPartition(
        partition_index=0, committed_offset=0, committed_leader_epoch=-1, committed_metadata=""
    )
    try:
        answer = await raw.request(
            TXN_OFFSET_COMMIT,
            3,
            "TxnOffsetCommitRequest",
            transactional_id="zombie",
            group_id=group,
            producer_id=1,
            producer_epoch=0,
            generation_id=epoch,
            member_id=member,
            group_instance_id=None,
            topics=(b.TxnOffsetCommitRequestTopic(name=topic, partitions=(partition,)),),
        )
    finally:
        await raw.close()
    return answer.topics[0].partitions[0].error_code


def _read_committed(bootstrap: str, topic: str) -> list[bytes]:
    """Everything a read_committed consumer sees in ``topic``, up to its end."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex[:6]}",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
            "log_level": 3,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    values: list[bytes] = []
    at_end: set[int] = set()
    try:
        while len(at_end) < PARTITIONS:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            error = msg.error()
            if error is not None:
                assert error.code() == KafkaError._PARTITION_EOF, error
                at_end.add(msg.partition() or 0)
                continue
            values.append(msg.value() or b"")
    finally:
        consumer.close()
    return values


async def test_each_input_is_in_the_output_exactly_once_through_rebalances_and_failover() -> None:
    tag = uuid.uuid4().hex[:8]
    group, source, sink = f"eos-{tag}", f"eos-in-{tag}", f"eos-out-{tag}"
    inputs = [f"{i:05d}".encode() for i in range(RECORDS)]
    parts = [inputs[i::PARTS] for i in range(PARTS)]
    async with running_cluster(brokers=3, **CLUSTER) as app:
        app.cluster.create_topic(source, PARTITIONS, 3, {})
        app.cluster.create_topic(sink, PARTITIONS, 3, {})
        workers = Workers(app, group, source, sink)
        bootstrap = app.bootstrap

        async def part(n: int) -> None:
            await asyncio.to_thread(_produce, bootstrap, source, parts[n])

        async def processed(count: int, what: str) -> None:
            try:
                await wait_until(lambda: _committed(app, group, source) == count, what, **WAIT)
            except AssertionError as exc:
                state = (
                    _committed(app, group, source),
                    _members(app, group),
                    workers.exits(),
                    _transactions(app),
                )
                raise AssertionError(f"{exc}: {state}") from None

        try:
            workers.start("a", txn_timeout_ms=3000)  # the one to die
            workers.start("b")
            await part(0)
            await processed(len(parts[0]), "two workers to process the first part")
            before = _epochs(app, group)
            # A member joins while the second part is processed.
            await part(1)
            workers.start("c")
            await wait_until(lambda: _members(app, group) == 3, "the third member", **WAIT)
            await processed(RECORDS // 2, "three workers to process the second part")
            # A zombie of the first two, with the group metadata they had before the
            # rebalance (their epochs moved on since), is fenced.
            after = _epochs(app, group)
            for member, epoch in before.items():
                assert after[member] != epoch
                assert await _zombie_commit(app, group, source, member, epoch) is (
                    ErrorCode.illegal_generation
                )
            # A member dies while the third part is processed.
            await part(2)
            await asyncio.to_thread(workers.kill, "a")
            await wait_until(lambda: _members(app, group) == 2, "the dead member fenced", **WAIT)
            (dead,) = set(after) - set(_epochs(app, group))
            assert await _zombie_commit(app, group, source, dead, after[dead]) is (
                ErrorCode.unknown_member_id
            )
            await processed(3 * RECORDS // 4, "the survivors to process the third part")
            # The group's coordinator's broker stops while the last part is processed.
            await part(3)
            old = _coordinator(app, group)
            await app.stop_broker(old)
            bootstrap = ",".join(
                f"{b.advertised_host}:{b.port}" for b in app.brokers if b.broker_id != old
            )
            await processed(RECORDS, "the new coordinator to see the last part processed")
            await asyncio.to_thread(workers.stop_all)
        finally:
            await asyncio.to_thread(workers.kill_all)

        output = await asyncio.to_thread(_read_committed, bootstrap, sink)
        duplicates = [v for v, n in Counter(output).items() if n > 1]
        assert not duplicates, f"{len(duplicates)} inputs written twice, e.g. {duplicates[:5]}"
        missing = set(inputs) - set(output)
        assert not missing, f"{len(missing)} inputs lost, e.g. {sorted(missing)[:5]}"
        assert sorted(output) == inputs
        assert all(r["committed"] > 0 for r in workers.reports), workers.reports
