"""Two TLS rules of Kafka's that clients' own suites rely on, with real clients.

* KIP-684: a broker-wide ``ssl.client.auth=required`` is for SSL listeners; a SASL_SSL
  listener takes only ``listener.name.<l>.ssl.client.auth``, so a SASL client without a
  certificate gets through the handshake (confluent-kafka), while the SSL listener still
  refuses one (aiokafka).
* A keystore whose certificate is signed with SHA-1 is served (Kafka serves it; OpenSSL's
  default security level would refuse to load it), with a warning naming it.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import KafkaConnectionError
from aiokafka.helpers import create_ssl_context
from confluent_kafka import Producer

from tests.integration.conftest import running_cluster
from tests.integration.security_setup import USERS, jaas, make_pki, sha1_signed_keystore


async def test_broker_wide_client_auth_leaves_sasl_ssl_clients_without_certificates(
    tmp_path: Path,
) -> None:
    pki = make_pki(tmp_path)
    overrides = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki.server_file),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki.ca_file),
        "ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas(USERS),
    }
    async with running_cluster(**overrides) as app:
        producer = Producer(
            {
                "bootstrap.servers": app.listener_bootstrap("SASL_SSL"),
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "PLAIN",
                "sasl.username": "alice",
                "sasl.password": USERS["alice"],
                "ssl.ca.location": str(pki.ca_file),
                "message.timeout.ms": 30000,
            }
        )
        delivered: list[object] = []
        producer.produce("kip684", b"v", on_delivery=lambda err, msg: delivered.append(err))
        assert await asyncio.to_thread(producer.flush, 30) == 0
        assert delivered == [None]
        no_certificate = AIOKafkaProducer(
            bootstrap_servers=app.listener_bootstrap("SSL"),
            security_protocol="SSL",
            ssl_context=create_ssl_context(cafile=str(pki.ca_file)),
        )
        with pytest.raises(KafkaConnectionError):
            await no_certificate.start()
        await no_certificate.stop()


async def test_a_sha1_signed_keystore_is_served(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    keystore, ca_file = sha1_signed_keystore(tmp_path)
    overrides = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore),
    }
    with caplog.at_level(logging.WARNING, "broker.security.ssl_context"):
        cluster = running_cluster(**overrides)
        app = await cluster.__aenter__()
    try:
        assert "CN=localhost (sha1WithRSAEncryption)" in caplog.text
        # The client verifies the chain; it must accept SHA-1 itself (as Java's does).
        context = create_ssl_context(cafile=str(ca_file))
        context.set_ciphers("DEFAULT:@SECLEVEL=0")
        assert context.verify_mode == ssl.CERT_REQUIRED
        settings = {
            "bootstrap_servers": app.listener_bootstrap("SSL"),
            "security_protocol": "SSL",
            "ssl_context": context,
        }
        producer = AIOKafkaProducer(**settings)
        await producer.start()
        try:
            await producer.send_and_wait("sha1", b"served")
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer("sha1", auto_offset_reset="earliest", **settings)
        await consumer.start()
        try:
            async with asyncio.timeout(60):
                assert (await consumer.getone()).value == b"served"
        finally:
            await consumer.stop()
    finally:
        await cluster.__aexit__(None, None, None)
