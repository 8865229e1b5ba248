"""``minikafka serve`` as users run it: ready line, signals, bad config, kill -9."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from testkit.broker_process import BrokerProcess


def test_ready_line_and_clean_exit_on_sigterm(broker_process: type[BrokerProcess]) -> None:
    proc = broker_process(["--brokers", "2"])
    assert proc.ready_line.startswith("minikafka ready: bootstrap=127.0.0.1:")
    assert len(proc.bootstrap.split(",")) == 2
    assert proc.terminate(signal.SIGTERM) == 0


def test_sigint_also_exits_zero(broker_process: type[BrokerProcess]) -> None:
    proc = broker_process([])
    assert proc.terminate(signal.SIGINT) == 0


@pytest.mark.parametrize(
    ("override", "named"),
    [
        ("num.partiton=3", "num.partiton"),
        ("num.partitions=zero", "num.partitions"),
        ("min.insync.replicas=0", "min.insync.replicas"),
    ],
)
def test_bad_config_stops_at_start_naming_the_key(override: str, named: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "minikafka", "serve", "--port", "0", "--override", override],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert named in result.stderr
    assert "ready" not in result.stdout


def test_config_file_is_read(tmp_path: Path, broker_process: type[BrokerProcess]) -> None:
    props = tmp_path / "server.properties"
    props.write_text("# a Kafka config\nnum.partitions=4\nlog.retention.hours=1\n")
    proc = broker_process(["--config", str(props)])

    async def partitions() -> set[int]:
        producer = AIOKafkaProducer(bootstrap_servers=proc.bootstrap)
        await producer.start()
        try:
            await producer.send_and_wait("from-file", b"x")
            return producer.client.cluster.partitions_for_topic("from-file") or set()
        finally:
            await producer.stop()

    assert asyncio.run(partitions()) == {0, 1, 2, 3}
    assert proc.terminate() == 0


def test_acknowledged_records_survive_kill_9(
    tmp_path: Path, broker_process: type[BrokerProcess]
) -> None:
    data = tmp_path / "data"
    first = broker_process(["--data-dir", str(data)])

    async def produce(bootstrap: str, start: int, count: int) -> list[int]:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
        await producer.start()
        try:
            offsets = []
            for i in range(start, start + count):
                md = await producer.send_and_wait("durable", f"r{i}".encode(), partition=0)
                offsets.append(md.offset)
            return offsets
        finally:
            await producer.stop()

    assert asyncio.run(produce(first.bootstrap, 0, 50)) == list(range(50))
    first.kill9()

    second = broker_process(["--data-dir", str(data)])
    # Offsets continue where the acknowledged log ended.
    assert asyncio.run(produce(second.bootstrap, 50, 5)) == list(range(50, 55))

    async def consume(bootstrap: str) -> list[bytes]:
        consumer = AIOKafkaConsumer(
            "durable",
            bootstrap_servers=bootstrap,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        await consumer.start()
        values: list[bytes] = []
        try:
            while len(values) < 55:
                batch = await consumer.getmany(timeout_ms=3000)
                assert batch, f"stalled after {len(values)} records"
                for records in batch.values():
                    values.extend(r.value for r in records)
        finally:
            await consumer.stop()
        return values

    assert asyncio.run(consume(second.bootstrap)) == [f"r{i}".encode() for i in range(55)]
    assert second.terminate() == 0


def test_advertised_host_is_what_metadata_tells_clients(
    broker_process: type[BrokerProcess],
) -> None:
    """Listen on one address, advertise another (Kafka's advertised.listeners)."""
    proc = broker_process(["--host", "127.0.0.1", "--advertised-host", "localhost"])
    assert proc.bootstrap.startswith("localhost:")
    port = int(proc.bootstrap.split(":")[1])

    async def advertised() -> set[str]:
        producer = AIOKafkaProducer(bootstrap_servers=f"127.0.0.1:{port}")
        await producer.start()
        try:
            return {b.host for b in producer.client.cluster.brokers()}
        finally:
            await producer.stop()

    assert asyncio.run(advertised()) == {"localhost"}
    assert proc.terminate() == 0
