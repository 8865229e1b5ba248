"""Listeners as Kafka's: each broker a port per listener, Metadata in the listener's
terms, the principal each listener gives, and stalled TLS handshakes that cost only
their own connections."""

from __future__ import annotations

import asyncio
import contextlib
import re
import ssl
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.helpers import create_ssl_context

from broker.server.context import RequestContext
from tests.integration.conftest import running_cluster
from tests.integration.security_setup import USERS, make_pki, security_overrides


class Principals:
    """Records who asked, per listener (a RequestObserver)."""

    def __init__(self) -> None:
        self.seen: set[tuple[str, str, str]] = set()

    def request_received(self, ctx: RequestContext, request: Any, frame: bytes) -> None:
        c = ctx.connection
        self.seen.add((c.listener_name, c.security_protocol, str(c.principal)))

    def request_completed(self, ctx: RequestContext, response: Any, size: int) -> None:
        pass


async def _round_trip(bootstrap: str, topic: str, **settings: Any) -> bytes:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", **settings)
    await producer.start()
    try:
        await producer.send_and_wait(topic, b"replicated", partition=0)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", **settings
    )
    await consumer.start()
    try:
        async with asyncio.timeout(60):
            return bytes((await consumer.getone()).value)
    finally:
        await consumer.stop()


async def test_three_brokers_each_with_a_port_per_listener(tmp_path: Path) -> None:
    pki = make_pki(tmp_path)
    principals = Principals()
    overrides = {**security_overrides(pki), "default.replication.factor": "3"}
    async with running_cluster(3, observers=[principals], **overrides) as app:
        app.scram_credentials.add_scram(
            f"SCRAM-SHA-512=[name=alice,password={USERS['alice']}]", lambda n: b"s" * n
        )
        ports = {
            name: {b.listener_ports[name] for b in app.brokers}
            for name in ("SSL", "SASL_PLAINTEXT", "SASL_SSL")
        }
        plaintext = {b.port for b in app.brokers}
        every = [plaintext, *ports.values()]
        assert all(len(p) == 3 for p in every)
        assert len(set().union(*every)) == 12  # 3 brokers x 4 listeners, all distinct
        ca = str(pki.ca_file)
        tls = create_ssl_context(cafile=ca)
        tls.load_cert_chain(str(pki.client_cert_file))
        sasl = {"sasl_plain_username": "alice", "sasl_plain_password": USERS["alice"]}
        runs = [
            ("SSL", {"security_protocol": "SSL", "ssl_context": tls}),
            (
                "SASL_SSL",
                {
                    "security_protocol": "SASL_SSL",
                    "ssl_context": create_ssl_context(cafile=ca),
                    "sasl_mechanism": "SCRAM-SHA-512",
                    **sasl,
                },
            ),
            (
                "SASL_PLAINTEXT",
                {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN", **sasl},
            ),
        ]
        for listener, settings in runs:
            # one broker as bootstrap: the others are learnt from Metadata, on this listener
            bootstrap = app.listener_bootstrap(listener).split(",")[1]
            value = await _round_trip(bootstrap, f"rf3-{listener.lower()}", **settings)
            assert value == b"replicated"
    seen = {(listener, principal) for listener, _, principal in principals.seen}
    assert ("SASL_SSL", "User:alice") in seen
    assert ("SASL_PLAINTEXT", "User:alice") in seen
    assert ("PLAINTEXT", "User:ANONYMOUS") in seen  # the followers' fetches
    ssl_principals = {p for listener, p in seen if listener == "SSL"}
    (dn,) = ssl_principals
    assert re.fullmatch(r"User:CN=alice,OU=Testing cert #[^,]+,O=trustme v[\d.]+", dn), dn


async def test_stalled_tls_handshakes_cost_only_their_connections(tmp_path: Path) -> None:
    pki = make_pki(tmp_path)
    async with running_cluster(**security_overrides(pki)) as app:
        host, port = app.listener_bootstrap("SASL_SSL").split(":")
        stalled = []
        for _ in range(200):  # TCP connections that never start their handshake
            stalled.append(await asyncio.open_connection(host, int(port)))
        half = []
        for _ in range(20):  # and ones that send a ClientHello's first bytes only
            reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")
            half.append((reader, writer))
        context = create_ssl_context(cafile=str(pki.ca_file))
        value = await _round_trip(
            app.listener_bootstrap("SASL_SSL"),
            "after-stalls",
            security_protocol="SASL_SSL",
            ssl_context=context,
            sasl_mechanism="PLAIN",
            sasl_plain_username="alice",
            sasl_plain_password=USERS["alice"],
        )
        assert value == b"replicated"
        for _, writer in stalled + half:
            writer.close()
        # a handshake with garbage costs its connection too
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(b"\x16\x03\x01\x00\x05hello" * 10)
        async with asyncio.timeout(30):
            with contextlib.suppress(ConnectionError):  # closed, or reset, by the broker
                await reader.read()
        writer.close()
        ok = ssl.create_default_context(cafile=str(pki.ca_file))
        reader, writer = await asyncio.open_connection(host, int(port), ssl=ok)
        writer.close()


async def test_a_restarted_broker_keeps_its_listener_ports(tmp_path: Path) -> None:
    pki = make_pki(tmp_path)
    async with running_cluster(2, **security_overrides(pki)) as app:
        before = dict(app.brokers[1].listener_ports)
        await app.stop_broker(1)
        await app.start_broker(1)
        assert app.brokers[1].listener_ports == before
        host, port = app.cluster.brokers[1].address("SASL_PLAINTEXT")
        assert port == before["SASL_PLAINTEXT"]
        value = await _round_trip(
            f"{host}:{port}",
            "after-restart",
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="PLAIN",
            sasl_plain_username="bob",
            sasl_plain_password=USERS["bob"],
        )
        assert value == b"replicated"
