"""Exactly once across a crash: consume-transform-produce survives a kill -9 of the broker.

A broker process with a data directory; an aiokafka application copies ``input`` to
``output`` in transactions (``send_offsets_to_transaction``). Halfway, with a
transaction open (records sent, not committed), the broker is killed with SIGKILL and
started again on the same port and directory. The application starts over as a real
one would (a new producer with the same transactional id fences the old one; the
consumer resumes from the group's committed offsets) and finishes. A read_committed
reader of ``output`` then sees every input record exactly once: nothing lost, nothing
twice, and nothing of the transaction the crash cut short.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from pathlib import Path

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from tests.integration.conftest import BrokerProcess

RECORDS = 120
PER_TXN = 10
GROUP = "copier"
TXN_ID = "copier-1"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start(port: int, data_dir: Path) -> BrokerProcess:
    return BrokerProcess(
        [
            "--port",
            str(port),
            "--data-dir",
            str(data_dir),
            "--override",
            "group.initial.rebalance.delay.ms=0",
            "--override",
            "transaction.abort.timed.out.transaction.cleanup.interval.ms=200",
        ]
    )


async def _setup(bootstrap: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic("input", 1, 1), NewTopic("output", 1, 1)])
    finally:
        await admin.close()
    source = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await source.start()
    try:
        for i in range(RECORDS):
            await source.send("input", str(i).encode())
        await source.flush()
    finally:
        await source.stop()


async def _app(bootstrap: str) -> tuple[AIOKafkaConsumer, AIOKafkaProducer]:
    consumer = AIOKafkaConsumer(
        "input",
        bootstrap_servers=bootstrap,
        group_id=GROUP,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
        max_poll_records=PER_TXN,
    )
    await consumer.start()
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, transactional_id=TXN_ID, request_timeout_ms=5000
    )
    await producer.start()
    return consumer, producer


async def _copy(
    consumer: AIOKafkaConsumer, producer: AIOKafkaProducer, until: int, *, last_open: bool
) -> int:
    """Copy committed transactions until ``until`` input records are done; with
    ``last_open`` leave one more transaction sent but not committed. Returns the count."""
    done = 0
    while done < until:
        batch = await consumer.getmany(timeout_ms=1000, max_records=PER_TXN)
        records = [r for rs in batch.values() for r in rs]
        if not records:
            continue
        await producer.begin_transaction()
        for record in records:
            await producer.send("output", b"copy-" + record.value)
        offsets = {tp: rs[-1].offset + 1 for tp, rs in batch.items()}
        await producer.send_offsets_to_transaction(offsets, GROUP)
        if last_open and done + len(records) >= until:
            await producer.flush()  # in the log, inside an open transaction
            return done
        await producer.commit_transaction()
        done += len(records)
    return done


async def _stop_quietly(*clients: AIOKafkaConsumer | AIOKafkaProducer) -> None:
    for client in clients:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(client.stop(), 10)


async def _read_committed(bootstrap: str) -> list[bytes]:
    reader = AIOKafkaConsumer(
        "output",
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
        enable_auto_commit=False,
    )
    await reader.start()
    got: list[bytes] = []
    try:
        for _ in range(40):
            batch = await reader.getmany(timeout_ms=250)
            got.extend(r.value for rs in batch.values() for r in rs if r.value is not None)
            if len(got) >= RECORDS and not batch:
                break
    finally:
        await reader.stop()
    return got


async def test_consume_transform_produce_is_exactly_once_across_a_kill_9(tmp_path: Path) -> None:
    port = _free_port()
    data_dir = tmp_path / "data"
    broker = _start(port, data_dir)
    try:
        await _setup(broker.bootstrap)
        consumer, producer = await _app(broker.bootstrap)
        first = await _copy(consumer, producer, RECORDS // 2, last_open=True)
        broker.kill9()  # mid-transaction: its records are in the log, uncommitted
        await _stop_quietly(consumer, producer)

        broker = _start(port, data_dir)
        consumer, producer = await _app(broker.bootstrap)  # fences the old instance
        try:
            committed = await consumer.committed(TopicPartition("input", 0))
            assert committed == first  # the transaction the crash cut short did not count
            await _copy(consumer, producer, RECORDS - committed, last_open=False)
        finally:
            await _stop_quietly(consumer, producer)

        copies = await _read_committed(broker.bootstrap)
    finally:
        broker.terminate()
    assert sorted(copies) == sorted(b"copy-%d" % i for i in range(RECORDS))
