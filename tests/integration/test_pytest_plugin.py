"""The pytest plugin as a user meets it: a test file outside this project, run by pytest
in the project's environment, that asks for the ``minikafka`` fixture -- nothing
imported, nothing configured: installing minikafka registered it (``pytest11``).

The README's own example file is the first one run, so the README shows a test that
works.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def readme_test_file() -> str:
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    (block,) = [b for b in blocks if "def test_" in b and "minikafka" in b]
    return block


def run_pytest(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=directory,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_readme_example_produces_and_consumes_with_aiokafka(tmp_path: Path) -> None:
    (tmp_path / "test_orders.py").write_text(readme_test_file())
    result = run_pytest(tmp_path, "test_orders.py", "--durations=0")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 passed" in result.stdout, result.stdout
    print(result.stdout)  # --durations: the fixture's setup time, for the curious


USER_TESTS = """
import asyncio
import kafka  # kafka-python: a blocking client, served from the cluster's own thread
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer


def test_defaults_come_from_the_ini_file(minikafka):
    assert minikafka.brokers == 2
    assert len(minikafka.bootstrap_servers.split(",")) == 2
    assert minikafka.config.num_partitions == 3
    assert minikafka.config.group_initial_rebalance_delay_ms == 0


@pytest.mark.minikafka(brokers=3, overrides={"group.initial.rebalance.delay.ms": "100"})
def test_the_marker_wins(minikafka):
    assert minikafka.brokers == 3
    assert minikafka.config.group_initial_rebalance_delay_ms == 100
    assert minikafka.config.num_partitions == 3  # the ini's, not overridden


def test_a_sync_client(minikafka):
    producer = kafka.KafkaProducer(bootstrap_servers=minikafka.bootstrap_servers)
    producer.send("sync", b"v").get(timeout=10)
    producer.close()


def test_faults_from_the_test(minikafka_factory):
    cluster = minikafka_factory(brokers=3, default_replication_factor=3)
    cluster.create_topic("t", partitions=2)

    async def produce():
        producer = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all")
        await producer.start()
        try:
            await producer.send_and_wait("t", b"before", partition=0)
            cluster.stop_broker(1)
            await producer.send_and_wait("t", b"during", partition=0)
            cluster.start_broker(1)
            cluster.pause_replication(2)
            cluster.set_latency(0, 5)
            cluster.clear_faults()
            await producer.send_and_wait("t", b"after", partition=0)
        finally:
            await producer.stop()

        consumer = AIOKafkaConsumer(
            "t", bootstrap_servers=cluster.bootstrap_servers, auto_offset_reset="earliest"
        )
        await consumer.start()
        try:
            got = []
            while len(got) < 3:
                batch = await consumer.getmany(timeout_ms=5000)
                assert batch
                got += [r.value for records in batch.values() for r in records]
            return got
        finally:
            await consumer.stop()

    assert asyncio.run(produce()) == [b"before", b"during", b"after"]


def test_failures_injected_from_the_test(minikafka):
    minikafka.fail(0, "Metadata", "CLUSTER_AUTHORIZATION_FAILED", count=1)
    minikafka.clear_faults()
    assert minikafka.call(lambda: minikafka.app.faults.rules()) == []


@pytest.mark.minikafka(quotas=[({"client-id": "slow"}, {"producer_byte_rate": 1024})])
def test_quotas_from_the_marker(minikafka):
    entries = minikafka.call(lambda: minikafka.app.client_quotas.entries())
    assert entries == {(("client-id", "slow"),): {"producer_byte_rate": 1024.0}}
    with pytest.raises(ValueError, match="must be greater than 0"):
        minikafka.set_quota({"user": None}, {"consumer_byte_rate": -1})
"""

PYTEST_INI = """[pytest]
minikafka_brokers = 2
minikafka_overrides =
    num.partitions=3
"""


def test_fixtures_marker_ini_options_and_faults(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text(PYTEST_INI)
    (tmp_path / "test_user.py").write_text(USER_TESTS)
    result = run_pytest(tmp_path, "test_user.py")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "6 passed" in result.stdout, result.stdout


def test_the_plugin_can_be_turned_off(tmp_path: Path) -> None:
    (tmp_path / "test_off.py").write_text("def test_off(minikafka):\n    pass\n")
    result = run_pytest(tmp_path, "-p", "no:minikafka", "test_off.py")
    assert result.returncode != 0
    assert "fixture 'minikafka' not found" in result.stdout
