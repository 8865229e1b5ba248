"""aiokafka through each listener kind: SSL (client certificates), SASL_PLAINTEXT and
SASL_SSL with PLAIN, SCRAM-SHA-256/512 and OAUTHBEARER; and what is refused."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.abc import AbstractTokenProvider
from aiokafka.errors import KafkaConnectionError
from aiokafka.helpers import create_ssl_context

from broker.app import MiniKafka
from tests.integration.conftest import running_cluster
from tests.integration.security_setup import (
    USERS,
    Pki,
    make_pki,
    security_overrides,
    unsecured_jws,
)


class _Token(AbstractTokenProvider):
    def __init__(self, sub: str, lifetime_s: float) -> None:
        self._sub = sub
        self._lifetime_s = lifetime_s

    async def token(self) -> str:
        return unsecured_jws(self._sub, self._lifetime_s)


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return make_pki(tmp_path)


@pytest.fixture
async def secure(pki: Pki) -> AsyncIterator[MiniKafka]:
    async with running_cluster(**security_overrides(pki)) as app:
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            for user, password in USERS.items():
                app.scram_credentials.add_scram(
                    f"{mechanism}=[name={user},password={password}]", lambda n: b"s" * n
                )
        yield app


def _client_settings(pki: Pki, protocol: str, mechanism: str | None, **extra: Any) -> Any:
    settings: dict[str, Any] = {"security_protocol": protocol}
    if protocol in ("SSL", "SASL_SSL"):
        context = create_ssl_context(cafile=str(pki.ca_file))
        if protocol == "SSL":
            context.load_cert_chain(str(extra.pop("cert", pki.client_cert_file)))
        settings["ssl_context"] = context
    if mechanism is not None:
        settings["sasl_mechanism"] = mechanism
        if mechanism == "OAUTHBEARER":
            settings["sasl_oauth_token_provider"] = _Token("alice", extra.pop("lifetime", 3600))
        else:
            settings["sasl_plain_username"] = "alice"
            settings["sasl_plain_password"] = extra.pop("password", USERS["alice"])
    return settings


CASES = [
    ("SSL", None),
    ("SASL_PLAINTEXT", "PLAIN"),
    ("SASL_PLAINTEXT", "SCRAM-SHA-256"),
    ("SASL_SSL", "SCRAM-SHA-512"),
    ("SASL_SSL", "PLAIN"),
    ("SASL_SSL", "OAUTHBEARER"),
]


@pytest.mark.parametrize(("protocol", "mechanism"), CASES)
async def test_produce_and_consume_through_listener(
    secure: MiniKafka, pki: Pki, protocol: str, mechanism: str | None
) -> None:
    bootstrap = secure.listener_bootstrap(protocol)
    assert bootstrap != secure.bootstrap
    settings = _client_settings(pki, protocol, mechanism)
    topic = f"t-{protocol}-{mechanism}".lower()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **settings)
    await producer.start()
    try:
        await producer.send_and_wait(topic, b"secret value", key=b"k")
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", **settings
    )
    await consumer.start()
    try:
        async with asyncio.timeout(60):
            record = await consumer.getone()
        assert record.value == b"secret value"
    finally:
        await consumer.stop()


@pytest.mark.parametrize(
    ("protocol", "mechanism", "extra", "logged"),
    [
        (
            "SASL_PLAINTEXT",
            "PLAIN",
            {"password": "wrong"},
            "Authentication failed: Invalid username or password",
        ),
        (
            "SASL_SSL",
            "SCRAM-SHA-256",
            {"password": "wrong"},
            "invalid credentials with SASL mechanism SCRAM-SHA-256",
        ),
        # aiokafka does not answer the JSON challenge: the broker's close is what it sees
        ("SASL_SSL", "OAUTHBEARER", {"lifetime": -60}, "closed"),
    ],
)
async def test_bad_credentials_are_refused(
    secure: MiniKafka,
    pki: Pki,
    caplog: pytest.LogCaptureFixture,
    protocol: str,
    mechanism: str,
    extra: dict[str, Any],
    logged: str,
) -> None:
    settings = _client_settings(pki, protocol, mechanism, **extra)
    producer = AIOKafkaProducer(
        bootstrap_servers=secure.listener_bootstrap(protocol), request_timeout_ms=10_000, **settings
    )
    with pytest.raises(KafkaConnectionError):
        await producer.start()
    await producer.stop()
    assert logged in caplog.text


async def test_client_certificate_from_another_ca_is_refused(secure: MiniKafka, pki: Pki) -> None:
    context = ssl.create_default_context(cafile=str(pki.ca_file))
    context.load_cert_chain(str(pki.stranger_cert_file))
    host, port = secure.listener_bootstrap("SSL").split(":")
    # TLS 1.3: the server's refusal of the certificate arrives with the first read.
    with pytest.raises((ssl.SSLError, ConnectionError)):
        reader, writer = await asyncio.open_connection(host, int(port), ssl=context)
        try:
            writer.write(b"\x00\x00\x00\x00")
            await writer.drain()
            async with asyncio.timeout(30):
                data = await reader.read(1)
            if not data:
                raise ConnectionError("closed by the broker")
        finally:
            writer.close()
