"""kafka-python and confluent-kafka (librdkafka) through the TLS and SASL listeners.

Their calls block, so they run in a thread while the broker runs in the test's loop.
kafka-python authenticates with SaslHandshake + SaslAuthenticate; librdkafka too, with
its built-in unsecured JWS for OAUTHBEARER (``enable.sasl.oauthbearer.unsecure.jwt``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kafka import KafkaConsumer, KafkaProducer
from kafka.net.sasl.oauth import AbstractTokenProvider

from broker.app import MiniKafka
from tests.integration.conftest import running_cluster
from tests.integration.security_setup import (
    USERS,
    Pki,
    make_pki,
    security_overrides,
    unsecured_jws,
)

DEADLINE_S = 60


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return make_pki(tmp_path)


@pytest.fixture
async def secure(pki: Pki) -> AsyncIterator[MiniKafka]:
    async with running_cluster(**security_overrides(pki)) as app:
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            app.scram_credentials.add_scram(
                f"{mechanism}=[name=alice,password={USERS['alice']}]", lambda n: b"s" * n
            )
        yield app


# -- kafka-python ----------------------------------------------------------------------


class _Token(AbstractTokenProvider):  # type: ignore[misc]
    def token(self) -> str:
        return unsecured_jws("alice", 3600)


def _kafka_python_settings(pki: Pki, protocol: str, mechanism: str | None) -> dict[str, Any]:
    settings: dict[str, Any] = {"security_protocol": protocol}
    if protocol in ("SSL", "SASL_SSL"):
        settings["ssl_cafile"] = str(pki.ca_file)
        settings["ssl_check_hostname"] = False
        if protocol == "SSL":
            settings["ssl_certfile"] = str(pki.client_cert_file)
    if mechanism == "OAUTHBEARER":
        settings.update(sasl_mechanism=mechanism, sasl_oauth_token_provider=_Token())
    elif mechanism is not None:
        settings.update(
            sasl_mechanism=mechanism,
            sasl_plain_username="alice",
            sasl_plain_password=USERS["alice"],
        )
    return settings


def _kafka_python_round_trip(bootstrap: str, topic: str, settings: dict[str, Any]) -> bytes:
    producer = KafkaProducer(bootstrap_servers=bootstrap, **settings)
    try:
        producer.send(topic, b"kafka-python value").get(timeout=DEADLINE_S)
    finally:
        producer.close()
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        consumer_timeout_ms=1000,
        **settings,
    )
    try:
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            for record in consumer:
                return bytes(record.value)
        raise AssertionError("no record consumed")
    finally:
        consumer.close()


@pytest.mark.parametrize(
    ("protocol", "mechanism"),
    [
        ("SSL", None),
        ("SASL_PLAINTEXT", "PLAIN"),
        ("SASL_SSL", "SCRAM-SHA-256"),
        ("SASL_PLAINTEXT", "OAUTHBEARER"),
    ],
)
async def test_kafka_python(
    secure: MiniKafka, pki: Pki, protocol: str, mechanism: str | None
) -> None:
    settings = _kafka_python_settings(pki, protocol, mechanism)
    value = await asyncio.to_thread(
        _kafka_python_round_trip,
        secure.listener_bootstrap(protocol),
        f"kp-{protocol}-{mechanism}".lower(),
        settings,
    )
    assert value == b"kafka-python value"


# -- confluent-kafka -------------------------------------------------------------------


def _confluent_settings(pki: Pki, protocol: str, mechanism: str | None) -> dict[str, Any]:
    conf: dict[str, Any] = {"security.protocol": protocol.lower(), "log_level": 3}
    if protocol in ("SSL", "SASL_SSL"):
        conf["ssl.ca.location"] = str(pki.ca_file)
        if protocol == "SSL":
            conf["ssl.certificate.location"] = str(pki.client_cert_file)
            conf["ssl.key.location"] = str(pki.client_cert_file)
    if mechanism == "OAUTHBEARER":
        conf.update(
            {
                "sasl.mechanism": mechanism,
                "enable.sasl.oauthbearer.unsecure.jwt": True,
                "sasl.oauthbearer.config": "principal=alice",
            }
        )
    elif mechanism is not None:
        conf.update(
            {"sasl.mechanism": mechanism, "sasl.username": "alice", "sasl.password": USERS["alice"]}
        )
    return conf


def _confluent_round_trip(bootstrap: str, topic: str, conf: dict[str, Any]) -> bytes:
    errors: list[KafkaError] = []
    producer = Producer({"bootstrap.servers": bootstrap, **conf})
    producer.produce(
        topic,
        value=b"librdkafka value",
        partition=0,
        on_delivery=lambda e, m: e and errors.append(e),
    )
    assert producer.flush(DEADLINE_S) == 0
    assert not errors, errors
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "g", "enable.auto.commit": False, **conf}
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                return bytes(msg.value())
        raise AssertionError("no record consumed")
    finally:
        consumer.close()


@pytest.mark.parametrize(
    ("protocol", "mechanism"),
    [
        ("SSL", None),
        ("SASL_SSL", "PLAIN"),
        ("SASL_PLAINTEXT", "SCRAM-SHA-512"),
        ("SASL_SSL", "OAUTHBEARER"),
    ],
)
async def test_confluent_kafka(
    secure: MiniKafka, pki: Pki, protocol: str, mechanism: str | None
) -> None:
    conf = _confluent_settings(pki, protocol, mechanism)
    value = await asyncio.to_thread(
        _confluent_round_trip,
        secure.listener_bootstrap(protocol),
        f"ck-{protocol}-{mechanism}".lower(),
        conf,
    )
    assert value == b"librdkafka value"


def _confluent_auth_error(bootstrap: str, conf: dict[str, Any]) -> str:
    seen: list[str] = []
    producer = Producer(
        {"bootstrap.servers": bootstrap, **conf, "error_cb": lambda e: seen.append(str(e))}
    )
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline and not seen:
        producer.poll(0.5)
    return " | ".join(seen)


async def test_confluent_kafka_wrong_password_is_kafkas_error(secure: MiniKafka, pki: Pki) -> None:
    conf = _confluent_settings(pki, "SASL_PLAINTEXT", "SCRAM-SHA-256")
    conf["sasl.password"] = "wrong"
    error = await asyncio.to_thread(
        _confluent_auth_error, secure.listener_bootstrap("SASL_PLAINTEXT"), conf
    )
    assert "Authentication failed during authentication due to invalid credentials" in error


def _admin_scram_round_trip(bootstrap: str, sasl_bootstrap: str) -> dict[str, Any]:
    """confluent-kafka's admin: add bob's SCRAM-SHA-512 credential, describe, log in, delete."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
    upsert = UserScramCredentialUpsertion("bob", info, b"bob-secret", b"bob-salt")
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(DEADLINE_S)
    described = admin.describe_user_scram_credentials(["alice", "bob"])
    out: dict[str, Any] = {}
    for user, future in described.items():
        infos = future.result(DEADLINE_S).scram_credential_infos
        out[user] = sorted((str(c.mechanism), c.iterations) for c in infos)
    conf = {
        "security.protocol": "sasl_plaintext",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "bob",
        "sasl.password": "bob-secret",
        "log_level": 3,
    }
    producer = Producer({"bootstrap.servers": sasl_bootstrap, **conf})
    producer.produce("scram-admin", value=b"from bob")
    out["bob delivered"] = producer.flush(DEADLINE_S) == 0
    delete = UserScramCredentialDeletion("bob", ScramMechanism.SCRAM_SHA_512)
    for future in admin.alter_user_scram_credentials([delete]).values():
        future.result(DEADLINE_S)
    try:
        admin.describe_user_scram_credentials(["bob"])["bob"].result(DEADLINE_S)
    except Exception as exc:  # the unknown user's RESOURCE_NOT_FOUND
        out["after delete"] = str(exc)
    return out


async def test_scram_credentials_admin_api(secure: MiniKafka) -> None:
    out = await asyncio.to_thread(
        _admin_scram_round_trip, secure.bootstrap, secure.listener_bootstrap("SASL_PLAINTEXT")
    )
    assert out["alice"] == [
        ("ScramMechanism.SCRAM_SHA_256", 4096),
        ("ScramMechanism.SCRAM_SHA_512", 4096),
    ]
    assert out["bob"] == [("ScramMechanism.SCRAM_SHA_512", 8192)]
    assert out["bob delivered"]
    assert "Attempt to describe a user credential that does not exist: bob" in out["after delete"]
