"""SASL on the wire, as Kafka answers it: the errors and messages, what is served before
authentication, the v0 raw-token path, and SaslHandshake after authentication."""

from __future__ import annotations

import asyncio
import base64
import struct
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from kio.schema.errors import ErrorCode

from broker.app import MiniKafka
from protocol.builders import request_builder
from protocol.codec import decode_response, encode_request
from testkit.polling import wait_until
from tests.integration.conftest import running_cluster
from tests.integration.security_setup import (
    USERS,
    make_pki,
    security_overrides,
    unsecured_jws,
)

HANDSHAKE, AUTHENTICATE, METADATA, API_VERSIONS = 17, 36, 3, 18


class RawConnection:
    """Frames over TCP, one request at a time."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.correlation_id = 0

    async def send_frame(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def read_frame(self) -> bytes | None:
        """One size-prefixed frame, None when the broker closed the connection."""
        async with asyncio.timeout(30):
            try:
                size = struct.unpack(">i", await self.reader.readexactly(4))[0]
                return await self.reader.readexactly(size)
            except (asyncio.IncompleteReadError, ConnectionError):
                return None

    async def call(self, api_key: int, version: int, payload: Any) -> Any:
        self.correlation_id += 1
        await self.send_frame(encode_request(api_key, version, self.correlation_id, "raw", payload))
        frame = await self.read_frame()
        if frame is None:
            return None
        correlation_id, response = decode_response(api_key, version, frame)
        assert correlation_id == self.correlation_id
        return response

    async def closed_by_broker(self) -> bool:
        return await self.read_frame() is None

    def close(self) -> None:
        self.writer.close()


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[MiniKafka]:
    async with running_cluster(**security_overrides(make_pki(tmp_path))) as running:
        running.scram_credentials.add_scram(
            f"SCRAM-SHA-256=[name=alice,password={USERS['alice']}]", lambda n: b"s" * n
        )
        yield running


async def _connect(app: MiniKafka, listener: str = "SASL_PLAINTEXT") -> RawConnection:
    host, port = app.listener_bootstrap(listener).split(",")[0].split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    return RawConnection(reader, writer)


def _handshake(version: int, mechanism: str) -> Any:
    return request_builder(HANDSHAKE, version).SaslHandshakeRequest(mechanism=mechanism)


def _authenticate(version: int, token: bytes) -> Any:
    return request_builder(AUTHENTICATE, version).SaslAuthenticateRequest(auth_bytes=token)


def _metadata() -> Any:
    return request_builder(METADATA, 1).MetadataRequest(topics=None)


async def test_unknown_mechanism_is_unsupported_then_closed(app: MiniKafka) -> None:
    conn = await _connect(app)
    response = await conn.call(HANDSHAKE, 1, _handshake(1, "GSSAPI"))
    assert response.error_code == ErrorCode.unsupported_sasl_mechanism
    assert set(response.mechanisms) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"}
    assert await conn.closed_by_broker()


@pytest.mark.parametrize(
    ("mechanism", "token", "message"),
    [
        ("PLAIN", b"\x00alice\x00wrong", "Authentication failed: Invalid username or password"),
        (
            "SCRAM-SHA-256",
            b"n,,n=mallory,r=abcdef",
            "Authentication failed during authentication due to invalid credentials with SASL "
            "mechanism SCRAM-SHA-256",
        ),
    ],
)
async def test_failed_authentication_is_answered_then_closed(
    app: MiniKafka, mechanism: str, token: bytes, message: str
) -> None:
    conn = await _connect(app)
    assert (await conn.call(HANDSHAKE, 1, _handshake(1, mechanism))).error_code == ErrorCode.none
    response = await conn.call(AUTHENTICATE, 2, _authenticate(2, token))
    assert response.error_code == ErrorCode.sasl_authentication_failed
    assert response.error_message == message
    assert await conn.closed_by_broker()


async def test_expired_oauthbearer_token_gets_the_json_challenge_then_fails(
    app: MiniKafka,
) -> None:
    conn = await _connect(app)
    await conn.call(HANDSHAKE, 1, _handshake(1, "OAUTHBEARER"))
    token = unsecured_jws("alice", -60)
    initial = f"n,,\x01auth=Bearer {token}\x01\x01".encode()
    response = await conn.call(AUTHENTICATE, 2, _authenticate(2, initial))
    assert response.error_code == ErrorCode.none
    assert response.auth_bytes == b'{"status":"invalid_token"}'
    response = await conn.call(AUTHENTICATE, 2, _authenticate(2, b"\x01"))
    assert response.error_code == ErrorCode.sasl_authentication_failed
    assert response.error_message == '{"status":"invalid_token"}'
    assert await conn.closed_by_broker()


async def test_only_api_versions_and_handshake_before_authentication(app: MiniKafka) -> None:
    conn = await _connect(app)
    versions = await conn.call(
        API_VERSIONS,
        3,
        request_builder(API_VERSIONS, 3).ApiVersionsRequest(
            client_software_name="raw", client_software_version="1"
        ),
    )
    keys = {k.api_key for k in versions.api_keys}
    assert {HANDSHAKE, AUTHENTICATE} <= keys
    # Kafka: "Unexpected Kafka request of type METADATA during SASL handshake." -> closed
    assert await conn.call(METADATA, 1, _metadata()) is None
    conn.close()
    conn = await _connect(app)
    await conn.call(HANDSHAKE, 1, _handshake(1, "PLAIN"))
    assert await conn.call(METADATA, 1, _metadata()) is None  # during authentication


async def test_authenticated_connection_is_served_and_handshake_is_illegal(
    app: MiniKafka,
) -> None:
    conn = await _connect(app)
    await conn.call(HANDSHAKE, 1, _handshake(1, "PLAIN"))
    ok = await conn.call(AUTHENTICATE, 0, _authenticate(0, b"\x00alice\x00alice-secret"))
    assert ok.error_code == ErrorCode.none
    metadata = await conn.call(METADATA, 1, _metadata())
    sasl_port = int(app.listener_bootstrap("SASL_PLAINTEXT").split(":")[1])
    assert [b.port for b in metadata.brokers] == [sasl_port]  # the listener's own endpoint
    again = await conn.call(HANDSHAKE, 1, _handshake(1, "PLAIN"))
    assert again.error_code == ErrorCode.illegal_sasl_state
    late = await conn.call(AUTHENTICATE, 1, _authenticate(1, b"\x00alice\x00alice-secret"))
    assert late.error_code == ErrorCode.illegal_sasl_state
    conn.close()


async def test_handshake_v0_then_raw_tokens(app: MiniKafka) -> None:
    """kafka-python's and old clients' path: raw size-prefixed tokens after SaslHandshake v0."""
    conn = await _connect(app)
    assert (await conn.call(HANDSHAKE, 0, _handshake(0, "PLAIN"))).error_code == ErrorCode.none
    token = b"\x00alice\x00alice-secret"
    await conn.send_frame(struct.pack(">i", len(token)) + token)
    assert await conn.read_frame() == b""  # PLAIN's empty challenge, size-prefixed
    assert (await conn.call(METADATA, 1, _metadata())).brokers
    conn.close()
    conn = await _connect(app)
    await conn.call(HANDSHAKE, 0, _handshake(0, "PLAIN"))
    bad = b"\x00alice\x00wrong"
    await conn.send_frame(struct.pack(">i", len(bad)) + bad)
    assert await conn.closed_by_broker()  # no answer on the raw path, as in Kafka


async def test_plaintext_listener_answers_sasl_with_illegal_state(app: MiniKafka) -> None:
    conn = await _connect(app, "PLAINTEXT")
    response = await conn.call(HANDSHAKE, 1, _handshake(1, "PLAIN"))
    assert response.error_code == ErrorCode.illegal_sasl_state
    conn.close()


async def test_garbage_tokens_cost_their_connection_only(app: MiniKafka) -> None:
    conns = []
    for i in range(20):
        conn = await _connect(app)
        await conn.call(HANDSHAKE, 1, _handshake(1, "SCRAM-SHA-256" if i % 2 else "OAUTHBEARER"))
        garbage = base64.b64encode(bytes(range(i, i + 40)))
        response = await conn.call(AUTHENTICATE, 2, _authenticate(2, garbage))
        assert response.error_code == ErrorCode.sasl_authentication_failed
        conns.append(conn)
    probe = await _connect(app, "PLAINTEXT")
    assert (await probe.call(METADATA, 1, _metadata())).brokers
    for conn in conns:
        conn.close()
    probe.close()


async def test_scram_credential_apis_answer_kafkas_errors(app: MiniKafka) -> None:
    conn = await _connect(app, "PLAINTEXT")
    alter = request_builder(51, 0)
    upsert = alter.ScramCredentialUpsertion
    response = await conn.call(
        51,
        0,
        alter.AlterUserScramCredentialsRequest(
            deletions=(
                alter.ScramCredentialDeletion(name="nobody", mechanism=1),
                alter.ScramCredentialDeletion(name="alice", mechanism=1),
            ),
            upsertions=(
                upsert(name="alice", mechanism=1, iterations=4096, salt=b"s", salted_password=b"p"),
                upsert(name="", mechanism=1, iterations=4096, salt=b"s", salted_password=b"p"),
                upsert(name="few", mechanism=1, iterations=100, salt=b"s", salted_password=b"p"),
                upsert(name="many", mechanism=2, iterations=20000, salt=b"s", salted_password=b"p"),
                upsert(name="odd", mechanism=7, iterations=4096, salt=b"s", salted_password=b"p"),
                upsert(name="carol", mechanism=2, iterations=4096, salt=b"s", salted_password=b"p"),
            ),
        ),
    )
    results = {r.user: (r.error_code, r.error_message) for r in response.results}
    assert results == {
        "nobody": (
            ErrorCode.resource_not_found,
            "Attempt to delete a user credential that does not exist",
        ),
        "alice": (
            ErrorCode.duplicate_resource,
            "A user credential cannot be altered twice in the same request",
        ),
        "": (ErrorCode.unacceptable_credential, "Username must not be empty"),
        "few": (ErrorCode.unacceptable_credential, "Too few iterations"),
        "many": (ErrorCode.unacceptable_credential, "Too many iterations"),
        "odd": (ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"),
        "carol": (ErrorCode.none, None),
    }
    describe = request_builder(50, 0)
    described = await conn.call(
        50,
        0,
        describe.DescribeUserScramCredentialsRequest(
            users=tuple(describe.UserName(name=n) for n in ("carol", "alice", "alice", "zed"))
        ),
    )
    by_user = {r.user: r for r in described.results}
    assert [(c.mechanism, c.iterations) for c in by_user["carol"].credential_infos] == [(2, 4096)]
    assert by_user["alice"].error_code == ErrorCode.duplicate_resource
    assert by_user["zed"].error_message == (
        "Attempt to describe a user credential that does not exist: zed"
    )
    everyone = await conn.call(50, 0, describe.DescribeUserScramCredentialsRequest(users=None))
    assert sorted(r.user for r in everyone.results) == ["alice", "carol"]
    conn.close()


@pytest.fixture
async def reauth_app(tmp_path: Path) -> AsyncIterator[MiniKafka]:
    overrides = {
        **security_overrides(make_pki(tmp_path)),
        "listener.name.sasl_plaintext.plain.connections.max.reauth.ms": "600000",
    }
    async with running_cluster(**overrides) as running:
        yield running


async def _login(conn: RawConnection, user: str, version: int = 2) -> Any:
    await conn.call(HANDSHAKE, 1, _handshake(1, "PLAIN"))
    token = f"\x00{user}\x00{USERS[user]}".encode()
    return await conn.call(AUTHENTICATE, version, _authenticate(version, token))


async def test_reauthentication_kip_368(reauth_app: MiniKafka) -> None:
    conn = await _connect(reauth_app)
    first = await _login(conn, "alice")
    assert first.error_code == ErrorCode.none
    assert first.session_lifetime.total_seconds() == 600  # connections.max.reauth.ms
    again = await _login(conn, "alice")  # the same principal: a new session
    assert again.error_code == ErrorCode.none and again.session_lifetime.total_seconds() == 600
    assert (await conn.call(METADATA, 1, _metadata())).brokers
    other = await _login(conn, "bob")
    assert other.error_code == ErrorCode.sasl_authentication_failed
    assert other.error_message == (
        "Cannot change principals during re-authentication from User.alice: User.bob"
    )
    assert await conn.closed_by_broker()


async def test_reauthentication_with_another_mechanism_closes(reauth_app: MiniKafka) -> None:
    conn = await _connect(reauth_app)
    assert (await _login(conn, "alice")).error_code == ErrorCode.none
    handshake = await conn.call(HANDSHAKE, 1, _handshake(1, "SCRAM-SHA-256"))
    assert handshake.error_code == ErrorCode.none  # answered, as Kafka does ...
    await conn.send_frame(
        encode_request(AUTHENTICATE, 2, 99, "raw", _authenticate(2, b"n,,n=alice,r=x"))
    )
    assert await conn.closed_by_broker()  # ... then the exchange is refused


async def test_expired_oauthbearer_session_closes_the_connection(app: MiniKafka) -> None:
    """KIP-368: the session ends with the token; the next request closes the connection."""
    conn = await _connect(app)
    await conn.call(HANDSHAKE, 1, _handshake(1, "OAUTHBEARER"))
    token = unsecured_jws("alice", 3.0)
    initial = f"n,,\x01auth=Bearer {token}\x01\x01".encode()
    response = await conn.call(AUTHENTICATE, 2, _authenticate(2, initial))
    assert response.error_code == ErrorCode.none
    assert 0 < response.session_lifetime.total_seconds() <= 3.0

    async def closed() -> bool:  # the state: the broker closes it once expired
        return await conn.call(METADATA, 1, _metadata()) is None

    await wait_until(closed, "the expired session's connection closed", attempts=600, step_s=0.1)


async def test_describe_configs_hides_jaas_and_key_passwords(app: MiniKafka) -> None:
    conn = await _connect(app, "PLAINTEXT")
    b = request_builder(32, 4)
    response = await conn.call(
        32,
        4,
        b.DescribeConfigsRequest(
            resources=(
                b.DescribeConfigsResource(
                    resource_type=4, resource_name="0", configuration_keys=None
                ),
            ),
            include_synonyms=False,
            include_documentation=False,
        ),
    )
    entries = {c.name: c for c in response.results[0].configs}
    jaas = entries["listener.name.sasl_plaintext.plain.sasl.jaas.config"]
    assert jaas.is_sensitive and jaas.value is None
    assert entries["ssl.keystore.type"].value == "PEM"
    assert "security.configs" not in entries
    conn.close()


async def test_frames_before_authentication_are_bounded(app: MiniKafka) -> None:
    """Kafka's sasl.server.max.receive.size (512 KiB) until authenticated, then the usual."""
    conn = await _connect(app)
    await conn.send_frame(struct.pack(">i", 600_000) + b"\x00" * 1000)
    assert await conn.closed_by_broker()
    producer = AIOKafkaProducer(
        bootstrap_servers=app.listener_bootstrap("SASL_PLAINTEXT"),
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_plain_username="alice",
        sasl_plain_password=USERS["alice"],
    )
    await producer.start()
    try:
        metadata = await producer.send_and_wait("big", b"x" * 600_000)
        assert metadata.offset == 0
    finally:
        await producer.stop()
