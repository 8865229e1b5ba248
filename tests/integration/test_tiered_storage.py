"""Tiered storage (KIP-405) as a consumer meets it: records below the local log start
come from the remote tier, through the RemoteFetch purgatory.

Small segments (segment.bytes 2048) and local.retention.bytes 1 make every rolled
segment leave the local log as soon as it is copied; the RLM and retention tasks run
every 50 ms. Each test waits for that state (the remote tier holds what was produced,
the local log starts past it) and then reads from offset 0.
"""

from __future__ import annotations

import asyncio
import datetime
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as CkTopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

from broker.app import MiniKafka
from broker.config.broker_config import BrokerConfig
from broker.control.client import ControlClient
from broker.control.console.view_cluster import topic_detail
from broker.log.cleaner_batch import iter_key_values
from broker.remote.remote_log_metadata_records import decode_event
from protocol.builders import request_builder
from protocol.capture import CaptureRequest
from protocol.capture_files import read_capture
from protocol.record_batch import iter_batches
from testkit.polling import wait_until
from testkit.raw_client import RawClient
from tests.integration.conftest import FAST_GROUPS

TOPIC = "tiered"
COUNT = 300
TIERED_BROKER = {
    "remote.log.storage.system.enable": "true",
    "remote.log.manager.task.interval.ms": "50",
    "log.retention.check.interval.ms": "50",
}
TIERED_TOPIC = {
    "remote.storage.enable": "true",
    "segment.bytes": "2048",
    "local.retention.bytes": "1",
}


async def _cli(bootstrap: str, *args: str) -> str:
    command = [sys.executable, "-m", "minikafka", *args]
    env = {**os.environ, "MINIKAFKA_BOOTSTRAP": bootstrap}
    run = await asyncio.to_thread(
        subprocess.run, command, capture_output=True, text=True, env=env, timeout=60
    )
    assert run.returncode == 0, run.stderr
    return run.stdout


def _cluster(brokers: int = 1, data_dir: Path | None = None, **overrides: Any) -> MiniKafka:
    config = BrokerConfig.model_validate({**FAST_GROUPS, **TIERED_BROKER, **overrides})
    return MiniKafka(config, brokers=brokers, port=0, data_dir=data_dir, control_port=0)


def _value(i: int) -> bytes:
    return b"r%05d-" % i + b"x" * 100


async def _produce_and_tier(
    app: MiniKafka, replication_factor: int = 1, *, create: bool = True
) -> None:
    """Produce COUNT records (acks=all) and wait until the leader's local log starts
    past what the remote tier holds, which covers at least half of them."""
    if create:
        app.cluster.create_topic(TOPIC, 1, replication_factor, TIERED_TOPIC)
    producer = AIOKafkaProducer(bootstrap_servers=app.bootstrap, acks="all")
    await producer.start()
    try:
        for i in range(COUNT):
            await producer.send_and_wait(TOPIC, _value(i), partition=0, timestamp_ms=BASE_TS + i)
    finally:
        await producer.stop()
    tiered = app.stores.tiered_storage
    assert tiered is not None

    def tiered_and_trimmed() -> bool:
        leader = app.cluster.partition_state(TOPIC, 0)
        assert leader is not None
        partition = app.brokers[leader.leader].replica_manager.partitions[(TOPIC, 0)]
        copied = tiered.metadata.highest_offset_for_epoch((TOPIC, 0))
        return copied >= COUNT // 2 and partition.local_log_start_offset > COUNT // 2

    await wait_until(tiered_and_trimmed, "the tier to hold half the records, the local log not")


async def _aiokafka_read(bootstrap: str) -> list[bytes]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    tp = TopicPartition(TOPIC, 0)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < COUNT and time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                got.extend(r.value for r in records if r.value is not None)
    finally:
        await consumer.stop()
    return got


def _kafka_python_read(bootstrap: str) -> list[bytes]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    tp = KpTopicPartition(TOPIC, 0)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < COUNT and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got.extend(r.value for r in records)
    finally:
        consumer.close()
    return got


def _confluent_read(bootstrap: str) -> list[bytes]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "tiered-ck", "enable.auto.commit": False}
    )
    consumer.assign([CkTopicPartition(TOPIC, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < COUNT and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
    finally:
        consumer.close()
    return got


EXPECTED = [_value(i) for i in range(COUNT)]
BASE_TS = int(time.time() * 1000) - 3_600_000  # an hour ago: inside retention.ms


async def _list_offsets(app: MiniKafka, timestamp: int) -> tuple[int, int, int]:
    """(error, offset, timestamp) of a ListOffsets v10 for partition 0."""
    b = request_builder(2, 10)
    raw = await RawClient.connect(app.bootstrap)
    try:
        response = await raw.request(
            2,
            10,
            "ListOffsetsRequest",
            replica_id=-1,
            isolation_level=0,
            timeout=datetime.timedelta(seconds=5),
            topics=(
                b.ListOffsetsTopic(
                    name=TOPIC,
                    partitions=(
                        b.ListOffsetsPartition(
                            partition_index=0, current_leader_epoch=-1, timestamp=timestamp
                        ),
                    ),
                ),
            ),
        )
    finally:
        await raw.close()
    p = response.topics[0].partitions[0]
    return int(p.error_code), int(p.offset), int(p.timestamp)


async def _list_offsets_across_tiers(app: MiniKafka) -> None:
    """-2 is the tier's start, -4 the local log's, -5 the highest copied offset, and a
    timestamp finds its record in either tier (the remote one through RemoteListOffsets)."""
    tiered = app.stores.tiered_storage
    assert tiered is not None
    partition = app.brokers[0].replica_manager.partitions[(TOPIC, 0)]
    assert await _list_offsets(app, -2) == (0, 0, -1)
    assert await _list_offsets(app, -4) == (0, partition.local_log_start_offset, -1)
    copied = tiered.metadata.highest_offset_for_epoch((TOPIC, 0))
    assert await _list_offsets(app, -5) == (0, copied, -1)
    assert await _list_offsets(app, BASE_TS + 7) == (0, 7, BASE_TS + 7)  # remote
    assert await _list_offsets(app, BASE_TS + COUNT - 1) == (0, COUNT - 1, BASE_TS + COUNT - 1)
    remote_list_offsets = app.brokers[0].purgatories["RemoteListOffsets"]
    assert remote_list_offsets.expired_count == 0


async def test_three_clients_read_a_tiered_topic_from_offset_zero() -> None:
    app = _cluster()
    await app.start()
    try:
        await _produce_and_tier(app)
        assert await _aiokafka_read(app.bootstrap) == EXPECTED
        assert await asyncio.to_thread(_kafka_python_read, app.bootstrap) == EXPECTED
        assert await asyncio.to_thread(_confluent_read, app.bootstrap) == EXPECTED
        async with (
            aiohttp.ClientSession(app.control_url) as session,
            session.get("/purgatory") as response,
        ):
            purgatory = await response.json()
        async with (
            aiohttp.ClientSession(app.control_url) as session,
            session.get("/metrics") as response,
        ):
            metrics = await response.text()
        for meter in (
            "remotecopybytespersec",
            "remotefetchbytespersec",
            "remotefetchrequestspersec",
        ):
            line = next(
                m
                for m in metrics.splitlines()
                if m.startswith(f"kafka_server_brokertopicmetrics_{meter}")
            )
            assert float(line.split()[-1]) > 0, line
        assert "kafka_server_brokertopicmetrics_remotecopylagbytes" in metrics
        assert "remotestoragethreadpool_remotelogreadertaskqueuesize" in metrics
        async with (
            aiohttp.ClientSession(app.control_url) as session,
            session.get("/remote") as response,
        ):
            [held] = (await response.json())["partitions"]
        assert held["remote_log_start_offset"] == 0 and held["remote_size_bytes"] > 0
        assert {"RemoteFetch", "RemoteListOffsets"} <= set(purgatory["brokers"][0]["purgatories"])
        assert "kafka_server_brokertopicmetrics_remotelogsizebytes{" in metrics
        await _list_offsets_across_tiers(app)
        # The tiers where a user looks: topics describe (Kafka's APIs), the console.
        [line] = (await _cli(app.bootstrap, "topics", "describe", TOPIC)).splitlines()[1:]
        fields = dict(part.split(": ", 1) for part in line.strip().split("\t"))
        local_start = int(fields["LocalLogStartOffset"])
        assert COUNT // 2 < local_start <= int(fields["TieredOffset"]) + 1
        assert int(fields["LocalSize"]) > 0
        [shown] = topic_detail(app, TOPIC)["partitions"]  # type: ignore[index]
        assert shown["remote_bytes"] == held["remote_size_bytes"] > 0
    finally:
        await app.stop()


async def test_a_new_leader_serves_remote_data_it_did_not_copy() -> None:
    app = _cluster(brokers=2, **{"default.replication.factor": "2"})
    await app.start()
    try:
        await _produce_and_tier(app, replication_factor=2)
        state = app.cluster.partition_state(TOPIC, 0)
        assert state is not None
        old_leader = state.leader
        await app.stop_broker(old_leader)
        new_state = app.cluster.partition_state(TOPIC, 0)
        assert new_state is not None and new_state.leader not in (old_leader, -1)
        assert await _aiokafka_read(app.bootstrap) == EXPECTED
    finally:
        await app.stop()


async def test_a_restart_from_the_data_directory_keeps_the_tier(tmp_path: Path) -> None:
    app = _cluster(data_dir=tmp_path)
    await app.start()
    try:
        await _produce_and_tier(app)
    finally:
        await app.stop()
    again = _cluster(data_dir=tmp_path)
    await again.start()
    try:
        assert await _aiokafka_read(again.bootstrap) == EXPECTED
    finally:
        await again.stop()


async def test_remote_fetches_park_in_remote_fetch_and_expire_while_the_store_is_down(
    tmp_path: Path,
) -> None:
    config = BrokerConfig.model_validate(
        {**FAST_GROUPS, **TIERED_BROKER, "rsm.config.latency.p50.ms": "50"}
    )
    app = MiniKafka(config, port=0, capture_dir=tmp_path / "capture", control_port=0)
    await app.start()
    try:
        await _produce_and_tier(app)
        tiered = app.stores.tiered_storage
        assert tiered is not None
        remote_fetch = app.brokers[0].purgatories["RemoteFetch"]
        # minikafka fault remote-down, through the control endpoint
        control = ControlClient(str(app.control_url), token=app.control_token)
        assert (await asyncio.to_thread(control.remote, down=True))["down"] is True
        consumer = AIOKafkaConsumer(bootstrap_servers=app.bootstrap, enable_auto_commit=False)
        await consumer.start()
        tp = TopicPartition(TOPIC, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        try:
            # Down: each remote read waits out remote.fetch.max.wait.ms and the answer is
            # Kafka's: no records, no error; the consumer keeps asking.
            assert await consumer.getmany(timeout_ms=1200) == {}
            await wait_until(lambda: remote_fetch.expired_count >= 1, "a remote fetch to expire")
            assert (await asyncio.to_thread(control.faults))["remote"]["down"] is True
            await asyncio.to_thread(control.remote, down=False)  # fault remote-up
            got: list[bytes] = []
            deadline = time.monotonic() + 30
            while len(got) < COUNT and time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    got.extend(r.value for r in records if r.value is not None)
            assert got == EXPECTED
        finally:
            await consumer.stop()
    finally:
        await app.stop()
    outcomes = {
        r.purgatory_outcome
        for r in read_capture(tmp_path / "capture")
        if isinstance(r, CaptureRequest) and r.purgatory == "RemoteFetch"
    }
    assert outcomes == {"expired", "completed"}


def _overrides(values: dict[str, str]) -> list[str]:
    return [arg for key, value in values.items() for arg in ("--override", f"{key}={value}")]


def _copy_events(data_dir: Path) -> list[int]:
    """The states of every remote segment event written so far: the records of
    ``__remote_log_metadata`` in the broker's log files."""
    states: list[int] = []
    known: dict[tuple[str, int, str], Any] = {}
    for segment in sorted(data_dir.glob("broker-0/__remote_log_metadata-*/*.log")):
        data = segment.read_bytes()
        for position, header in iter_batches(data, allow_partial_tail=True):
            for _, value in iter_key_values(data[position : position + header.size], header):
                event = decode_event(value or b"", known)
                if event is not None:
                    sid = event.segment_id
                    known[(sid.topic, sid.partition, sid.id)] = event
                    states.append(int(event.state))
    return states


async def test_kill_9_in_the_middle_of_a_copy_loses_nothing_acknowledged(
    tmp_path: Path, broker_process: Any
) -> None:
    slow_copies = {**TIERED_BROKER, "rsm.config.latency.p50.ms": "3000"}
    first = broker_process(["--data-dir", str(tmp_path), *_overrides(slow_copies)])
    admin = AIOKafkaAdminClient(bootstrap_servers=first.bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(TOPIC, 1, 1, topic_configs=TIERED_TOPIC)])
    finally:
        await admin.close()
    producer = AIOKafkaProducer(bootstrap_servers=first.bootstrap, acks="all")
    await producer.start()
    try:
        for i in range(COUNT):
            await producer.send_and_wait(TOPIC, _value(i), partition=0, timestamp_ms=BASE_TS + i)
    finally:
        await producer.stop()
    # A copy has started (COPY_SEGMENT_STARTED written) and takes 3 s: kill it now.
    await wait_until(lambda: 0 in _copy_events(tmp_path), "a copy to start")
    assert 1 not in _copy_events(tmp_path)
    first.kill9()
    second = broker_process(["--data-dir", str(tmp_path), *_overrides(TIERED_BROKER)])
    # Everything acknowledged is there, from offset 0, while the copy is redone...
    assert await _aiokafka_read(second.bootstrap) == EXPECTED
    # ...and once the tier has it and the local log no longer does, still.
    await wait_until(lambda: _copy_events(tmp_path).count(1) >= 3, "copies to finish")
    await wait_until(
        lambda: not any(tmp_path.glob(f"broker-0/{TOPIC}-0*/{0:020d}.log")),
        f"the first local segment to go: {sorted(p.name for p in tmp_path.rglob('*.log'))}",
    )
    assert await _aiokafka_read(second.bootstrap) == EXPECTED


async def test_a_follower_below_the_local_log_start_builds_its_state_from_the_tier() -> None:
    app = _cluster(brokers=2, **{"default.replication.factor": "2"})
    await app.start()
    try:
        app.cluster.create_topic(TOPIC, 1, 2, TIERED_TOPIC)
        state = app.cluster.partition_state(TOPIC, 0)
        assert state is not None
        leader, follower = state.leader, 1 - state.leader
        await app.stop_broker(follower)  # it misses everything, then comes back
        await _produce_and_tier(app, replication_factor=2, create=False)
        await app.start_broker(follower)
        replica = app.brokers[follower].replica_manager.partitions[(TOPIC, 0)]
        # OFFSET_MOVED_TO_TIERED_STORAGE: it starts after the tier, not at 0...
        await wait_until(lambda: replica.log_end_offset == COUNT, "the follower to catch up")
        assert replica.local_log_start_offset > 0
        assert replica.log_start_offset == 0  # ...and knows the tier has the rest
        await wait_until(
            lambda: follower in (app.cluster.partition_state(TOPIC, 0) or state).isr,
            "the follower to rejoin the ISR",
        )
        await app.stop_broker(leader)
        assert await _aiokafka_read(app.bootstrap) == EXPECTED
    finally:
        await app.stop()


TXN_TOPIC = "tiered-txn"
TRANSACTIONS = 24


def _txn_value(txn: int, i: int) -> bytes:
    return b"t%03d-%02d-" % (txn, i) + b"x" * 200


async def test_read_committed_skips_the_aborted_transactions_of_remote_segments() -> None:
    """Kafka's collectAbortedTransactions over the tier: a transactional producer aborts
    every third transaction into a tiered topic; once those segments have left the local
    log, a read_committed consumer from offset 0 gets the committed records only (the
    aborted ones come from the remote tier with the aborted transactions of its copied
    transaction indexes), a read_uncommitted one gets all of them."""
    app = _cluster(
        **{"transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1"}
    )
    await app.start()
    try:
        app.cluster.create_topic(TXN_TOPIC, 1, 1, TIERED_TOPIC)
        producer = AIOKafkaProducer(bootstrap_servers=app.bootstrap, transactional_id="tiered-tx")
        await producer.start()
        committed: list[bytes] = []
        every: list[bytes] = []
        try:
            for txn in range(TRANSACTIONS):
                await producer.begin_transaction()
                values = [_txn_value(txn, i) for i in range(4)]
                for value in values:
                    await producer.send_and_wait(TXN_TOPIC, value, partition=0)
                every += values
                if txn % 3 == 2:
                    await producer.abort_transaction()
                else:
                    await producer.commit_transaction()
                    committed += values
        finally:
            await producer.stop()
        tiered = app.stores.tiered_storage
        assert tiered is not None
        partition = app.brokers[0].replica_manager.partitions[(TXN_TOPIC, 0)]

        def aborted_txns_tiered() -> bool:  # past the 6th aborted transaction's marker
            return partition.local_log_start_offset > TRANSACTIONS * 5 // 2

        await wait_until(aborted_txns_tiered, "the aborted transactions to leave the local log")
        assert await _read_from_zero(app.bootstrap, "read_committed") == committed
        assert await _read_from_zero(app.bootstrap, "read_uncommitted") == every
    finally:
        await app.stop()


async def _read_from_zero(bootstrap: str, isolation: str) -> list[bytes]:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, isolation_level=isolation
    )
    await consumer.start()
    tp = TopicPartition(TXN_TOPIC, 0)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    got: list[bytes] = []
    try:
        end = (await consumer.end_offsets([tp]))[tp]
        while await consumer.position(tp) < end:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                got.extend(r.value for r in records if r.value is not None)
    finally:
        await consumer.stop()
    return got
