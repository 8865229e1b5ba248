"""``minikafka serve --security``, ``--add-scram``, and the pytest plugin's ``security=``:
what a user starts and connects to with the printed settings."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from pathlib import Path

from aiokafka import AIOKafkaProducer
from aiokafka.helpers import create_ssl_context

from broker.config.broker_config import parse_properties
from minikafka.pytest_plugin import start_cluster
from tests.integration.conftest import BrokerProcess


async def _produce(bootstrap: str, **settings: object) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **settings)  # type: ignore[arg-type]
    await producer.start()
    try:
        await producer.send_and_wait("secured", b"value")
    finally:
        await producer.stop()


async def test_serve_security_sasl_ssl_prints_working_client_settings(
    tmp_path: Path, broker_process: type[BrokerProcess]
) -> None:
    proc = await asyncio.to_thread(
        broker_process,
        [
            "--security",
            "sasl_ssl",
            "--security-dir",
            str(tmp_path / "sec"),
            "--add-scram",
            "SCRAM-SHA-256=[name=alice,password=alice-secret]",
        ],
    )
    match = re.search(r" SASL_SSL=(\S+) client_config=(\S+)$", proc.ready_line)
    assert match is not None, proc.ready_line
    props = parse_properties(Path(match.group(2)).read_text())
    assert props["bootstrap.servers"] == match.group(1)
    assert props["security.protocol"] == "SASL_SSL"
    jaas = re.search(r'username="([^"]+)" password="([^"]+)"', props["sasl.jaas.config"])
    assert jaas is not None
    context = create_ssl_context(cafile=props["ssl.truststore.location"])
    await _produce(
        match.group(1),
        security_protocol="SASL_SSL",
        ssl_context=context,
        sasl_mechanism=props["sasl.mechanism"],
        sasl_plain_username=jaas.group(1),
        sasl_plain_password=jaas.group(2),
    )
    await _produce(  # the seeded user
        match.group(1),
        security_protocol="SASL_SSL",
        ssl_context=context,
        sasl_mechanism="SCRAM-SHA-256",
        sasl_plain_username="alice",
        sasl_plain_password="alice-secret",
    )
    assert proc.terminate() == 0


def test_serve_refuses_a_bad_add_scram(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "minikafka",
            "serve",
            "--port",
            "0",
            "--add-scram",
            "SCRAM-SHA-1=[x]",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "--add-scram" in result.stderr


async def test_plugin_security_cluster_exposes_client_settings() -> None:
    cluster = await asyncio.to_thread(start_cluster, 1, None, security="sasl_plaintext")
    try:
        settings = cluster.client_settings
        assert settings is not None and settings.security_protocol == "SASL_PLAINTEXT"
        assert settings.bootstrap_servers != cluster.bootstrap_servers
        await _produce(
            settings.bootstrap_servers,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="PLAIN",
            sasl_plain_username=settings.username,
            sasl_plain_password=settings.password,
        )
    finally:
        await asyncio.to_thread(cluster.stop)


def test_serve_names_a_bad_listener_config(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "minikafka",
            "serve",
            "--port",
            "0",
            "--override",
            "listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
            "--override",
            "ssl.keystore.type=PEM",
            "--override",
            f"ssl.keystore.location={tmp_path / 'missing.pem'}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert "listener SSL: cannot load the keystore" in result.stderr
