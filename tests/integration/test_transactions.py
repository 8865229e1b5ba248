"""Transactions through the transaction coordinator, with aiokafka, on 3 brokers.

A transactional producer commits and aborts; a read_committed consumer never sees the
aborted records and sees the committed ones only once the COMMIT marker is written; a
second instance with the same transactional id fences the first (its open transaction
is aborted); consume-transform-produce with ``send_offsets_to_transaction`` processes
every input record exactly once; and a transaction left open by a producer that dies is
aborted after its timeout by the coordinator's abort job. Topics are replicated (rf 3)
and ``__transaction_state`` too, so the coordinator's writes, the markers (sent to each
partition's leader over TCP) and the transactional offset commits all wait for their
in-sync replicas.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncIterator, Iterable
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError, ProducerFenced

from broker.app import MiniKafka
from broker.config.broker_config import BrokerConfig
from broker.txn.transaction_state import TransactionState
from protocol.capture import CaptureRequest, DelayedOperationEvent
from protocol.capture_files import read_capture
from testkit.polling import wait_until
from tests.integration.conftest import FAST_GROUPS, running_cluster

pytestmark = pytest.mark.asyncio

TOPIC = "orders"
FAST_TXN = {
    # The abort job every 200 ms, so a dead producer's transaction goes quickly.
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
}


@pytest.fixture
async def cluster() -> AsyncIterator[MiniKafka]:
    async with running_cluster(3, **FAST_TXN) as app:
        app.cluster.create_topic(TOPIC, 3, 3, {})
        yield app


async def producer(app: MiniKafka, transactional_id: str, **kw: object) -> AIOKafkaProducer:
    p = AIOKafkaProducer(
        bootstrap_servers=app.bootstrap,
        transactional_id=transactional_id,
        request_timeout_ms=10000,
        **kw,
    )
    await p.start()
    return p


async def read_all(
    app: MiniKafka,
    topic: str = TOPIC,
    *,
    isolation_level: str = "read_committed",
    expect: int | None = None,
    timeout_s: float = 3.0,
) -> list[bytes]:
    """Every record of ``topic`` a fresh consumer reads within ``timeout_s`` (or once it
    has ``expect`` of them)."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=app.bootstrap,
        isolation_level=isolation_level,
        enable_auto_commit=False,
    )
    await consumer.start()
    try:
        partitions = [TopicPartition(topic, p) for p in range(3)]
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        got: list[bytes] = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while loop.time() < deadline and (expect is None or len(got) < expect):
            batch = await consumer.getmany(timeout_ms=200)
            for records in batch.values():
                got.extend(r.value for r in records if r.value is not None)
        return sorted(got)
    finally:
        await consumer.stop()


def txn_states(app: MiniKafka, transactional_id: str) -> Iterable[TransactionState]:
    for broker in app.brokers:
        _error, found = broker.services.coordinators.txn.txn_manager.get_transaction_state(
            transactional_id
        )
        if found is not None:
            yield found.transaction_metadata.state


async def test_commit_and_abort_seen_by_a_read_committed_consumer(cluster: MiniKafka) -> None:
    p = await producer(cluster, "tx-commit-abort")
    try:
        async with p.transaction():
            for i in range(6):
                await p.send(TOPIC, f"committed-{i}".encode(), partition=i % 3)
        await p.begin_transaction()
        for i in range(6):
            await p.send(TOPIC, f"aborted-{i}".encode(), partition=i % 3)
        await p.flush()
        await p.abort_transaction()
        async with p.transaction():
            await p.send(TOPIC, b"committed-again", partition=0)
    finally:
        await p.stop()
    committed = sorted([f"committed-{i}".encode() for i in range(6)] + [b"committed-again"])
    assert await read_all(cluster, expect=7) == committed
    # read_uncommitted sees the aborted records too (never the markers).
    everything = await read_all(cluster, isolation_level="read_uncommitted", expect=13)
    assert len(everything) == 13
    await wait_until(
        lambda: list(txn_states(cluster, "tx-commit-abort")) == [TransactionState.COMPLETE_COMMIT],
        "the last transaction to complete",
    )


async def test_committed_records_are_visible_only_after_the_marker(cluster: MiniKafka) -> None:
    p = await producer(cluster, "tx-visibility")
    try:
        await p.begin_transaction()
        for i in range(3):
            await p.send_and_wait(TOPIC, f"pending-{i}".encode(), partition=i)
        # In the log (read_uncommitted sees them), not yet committed.
        assert len(await read_all(cluster, isolation_level="read_uncommitted", expect=3)) == 3
        assert await read_all(cluster, timeout_s=1.0) == []
        await p.commit_transaction()
    finally:
        await p.stop()
    assert await read_all(cluster, expect=3) == [b"pending-0", b"pending-1", b"pending-2"]


async def test_a_second_instance_fences_the_first(cluster: MiniKafka) -> None:
    first = await producer(cluster, "tx-fence")
    await first.begin_transaction()
    await first.send_and_wait(TOPIC, b"from-the-zombie", partition=0)
    # A new instance: its InitProducerId aborts the zombie's transaction, then succeeds.
    second = await producer(cluster, "tx-fence")
    try:
        with pytest.raises((ProducerFenced, KafkaError)):
            await first.commit_transaction()
        async with second.transaction():
            await second.send(TOPIC, b"from-the-new-instance", partition=1)
    finally:
        await first.stop()
        await second.stop()
    # (expect one more than should be there: a visible zombie record would show up)
    assert await read_all(cluster, expect=2, timeout_s=1.5) == [b"from-the-new-instance"]


async def test_consume_transform_produce_exactly_once(cluster: MiniKafka) -> None:
    cluster.cluster.create_topic("input", 3, 3, {})
    source = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    await source.start()
    try:
        for i in range(30):
            await source.send("input", f"{i}".encode(), partition=i % 3)
        await source.flush()
    finally:
        await source.stop()

    group = "eos-app"
    consumer = AIOKafkaConsumer(
        "input",
        bootstrap_servers=cluster.bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
    )
    await consumer.start()
    p = await producer(cluster, "tx-eos")
    processed = 0
    try:
        while processed < 30:
            batch = await consumer.getmany(timeout_ms=1000)
            if not batch:
                continue
            async with p.transaction():
                offsets = {}
                for tp, records in batch.items():
                    for r in records:
                        await p.send(TOPIC, b"x" + r.value, partition=tp.partition)
                    offsets[tp] = records[-1].offset + 1
                    processed += len(records)
                await p.send_offsets_to_transaction(offsets, group)
    finally:
        await p.stop()
        await consumer.stop()

    assert await read_all(cluster, expect=30) == sorted(b"x%d" % i for i in range(30))
    # The group's offsets are the transaction's, committed by its marker.
    checker = AIOKafkaConsumer(bootstrap_servers=cluster.bootstrap, group_id=group)
    await checker.start()
    try:
        for partition in range(3):
            assert await checker.committed(TopicPartition("input", partition)) == 10
    finally:
        await checker.stop()


async def test_a_transaction_left_open_by_a_dead_producer_is_aborted_after_its_timeout(
    cluster: MiniKafka,
) -> None:
    p = await producer(cluster, "tx-dies", transaction_timeout_ms=1000)
    await p.begin_transaction()
    await p.send_and_wait(TOPIC, b"never-committed", partition=0)
    await p.stop()  # dies: no EndTxn
    # Until the coordinator aborts it, the open transaction holds the LSO: a record
    # written after it is not visible to read_committed either.
    after = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    await after.start()
    try:
        await after.send_and_wait(TOPIC, b"after", partition=0)
    finally:
        await after.stop()
    await wait_until(
        lambda: list(txn_states(cluster, "tx-dies")) == [TransactionState.COMPLETE_ABORT],
        "the coordinator to abort the timed-out transaction",
        attempts=100,
    )
    assert sum(b.services.coordinators.txn.timed_out_aborts for b in cluster.brokers) == 1
    assert await read_all(cluster, expect=2, timeout_s=1.5) == [b"after"]


def coordinator_of(app: MiniKafka, transactional_id: str) -> int:
    manager = app.brokers[0].services.coordinators.txn.txn_manager
    topic = app.cluster.topics["__transaction_state"]
    return topic.partitions[manager.partition_for(transactional_id)].leader


async def test_a_transaction_survives_the_loss_of_its_coordinator(cluster: MiniKafka) -> None:
    p = await producer(cluster, "tx-failover")
    try:
        await p.begin_transaction()
        for i in range(3):
            await p.send_and_wait(TOPIC, f"failover-{i}".encode(), partition=i)
        # The coordinator's broker dies; a follower of its __transaction_state partition
        # becomes the leader, loads the Ongoing transaction, and the commit goes there.
        await cluster.stop_broker(coordinator_of(cluster, "tx-failover"))
        await p.commit_transaction()
    finally:
        await p.stop()
    assert await read_all(cluster, expect=3) == [b"failover-0", b"failover-1", b"failover-2"]


async def test_transactional_state_survives_a_restart(tmp_path: Path) -> None:
    async with running_cluster(1, tmp_path) as app:
        app.cluster.create_topic(TOPIC, 3, 1, {})
        p = await producer(app, "tx-durable")
        async with p.transaction():
            await p.send(TOPIC, b"durable", partition=0)
        await p.stop()
        before = app.brokers[0].services.coordinators.txn.txn_manager
        _error, found = before.get_transaction_state("tx-durable")
        assert found is not None
        producer_id = found.transaction_metadata.producer_id
    async with running_cluster(1, tmp_path) as app:
        p = await producer(app, "tx-durable")  # loaded from __transaction_state: next epoch
        await p.stop()
        after = app.brokers[0].services.coordinators.txn.txn_manager
        _error, found = after.get_transaction_state("tx-durable")
        assert found is not None
        m = found.transaction_metadata
        assert (m.producer_id, m.producer_epoch, m.state) == (
            producer_id,
            1,
            TransactionState.EMPTY,
        )
        assert await read_all(app, expect=1) == [b"durable"]


async def test_capture_records_where_the_transaction_apis_waited(tmp_path: Path) -> None:
    config = BrokerConfig.model_validate(FAST_GROUPS)
    app = MiniKafka(config, brokers=3, port=0, capture_dir=tmp_path)
    await app.start()
    try:
        app.cluster.create_topic(TOPIC, 3, 3, {})
        p = await producer(app, "tx-captured")
        async with p.transaction():
            await p.send(TOPIC, b"captured", partition=0)
        await p.stop()
        await wait_until(
            lambda: list(txn_states(app, "tx-captured")) == [TransactionState.COMPLETE_COMMIT],
            "the transaction to complete",
        )
    finally:
        await app.stop()
    records = list(read_capture(tmp_path))
    requests = [r for r in records if isinstance(r, CaptureRequest)]
    by_api = collections.defaultdict(list)
    for r in requests:
        by_api[r.api_name].append(r)
    # Each waited in the Produce purgatory for its __transaction_state (or marker) append.
    for api in ("InitProducerId", "AddPartitionsToTxn", "EndTxn", "WriteTxnMarkers"):
        assert by_api[api], f"no {api} captured"
        assert {r.purgatory for r in by_api[api]} == {"Produce"}, api
    assert all(
        (r.client_id or "").startswith("txn-marker-channel-") for r in by_api["WriteTxnMarkers"]
    )
    events = [r for r in records if isinstance(r, DelayedOperationEvent)]
    marker_requests = {(r.connection_id, r.correlation_id) for r in by_api["WriteTxnMarkers"]}
    assert any(
        e.kind == "DelayedProduce" and (e.connection_id, e.correlation_id) in marker_requests
        for e in events
    )
