"""Kafka's SaslServerAuthenticator state machine, fed request frames, on a manual clock."""

from __future__ import annotations

import base64
import json
import struct

import pytest
from kio.schema.errors import ErrorCode

from broker.security.oauthbearer import OAuthBearerSaslServer
from broker.security.plain import PlainSaslServer
from broker.security.sasl import SaslServer
from broker.security.sasl_server import AuthenticationFailed, SaslServerAuthenticator
from protocol.builders import request_builder
from protocol.codec import decode_response, encode_request
from purgatory import ManualClock


def _frame(api_key: int, version: int, payload: object) -> bytes:
    return encode_request(api_key, version, 7, "t", payload)[4:]  # type: ignore[arg-type]


def _handshake(version: int, mechanism: str) -> bytes:
    return _frame(
        17, version, request_builder(17, version).SaslHandshakeRequest(mechanism=mechanism)
    )


def _authenticate(version: int, token: bytes) -> bytes:
    return _frame(
        36, version, request_builder(36, version).SaslAuthenticateRequest(auth_bytes=token)
    )


def _jws(sub: str, exp_s: float) -> str:
    def part(obj: object) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'none'})}.{part({'sub': sub, 'exp': exp_s})}."


def _authenticator(
    clock: ManualClock, max_reauth: int = 0, previous: SaslServerAuthenticator | None = None
) -> SaslServerAuthenticator:
    def new_server(mechanism: str) -> SaslServer:
        if mechanism == "PLAIN":
            return PlainSaslServer({"alice": "pw", "bob": "pw"})
        return OAuthBearerSaslServer(clock.now_ms)

    return SaslServerAuthenticator(
        ["PLAIN", "OAUTHBEARER"],
        new_server,
        clock.now_ms,
        {"PLAIN": max_reauth, "OAUTHBEARER": max_reauth},
        previous,
    )


def _response(api_key: int, version: int, data: bytes | None) -> object:
    assert data is not None
    return decode_response(api_key, version, data[4:])[1]


def test_api_versions_passes_other_requests_close() -> None:
    auth = _authenticator(ManualClock())
    api_versions = _frame(18, 0, request_builder(18, 0).ApiVersionsRequest())
    assert auth.on_frame(api_versions) is None
    metadata = _frame(3, 1, request_builder(3, 1).MetadataRequest(topics=None))
    with pytest.raises(AuthenticationFailed, match="type METADATA during SASL handshake"):
        auth.on_frame(metadata)


def test_session_lifetime_is_the_shorter_of_max_reauth_and_the_token() -> None:
    clock = ManualClock(1_000_000)
    auth = _authenticator(clock, max_reauth=60_000)
    auth.on_frame(_handshake(1, "OAUTHBEARER"))
    initial = f"n,,\x01auth=Bearer {_jws('alice', 1030)}\x01\x01".encode()
    response = _response(36, 2, auth.on_frame(_authenticate(2, initial)))
    assert response.error_code == ErrorCode.none  # type: ignore[attr-defined]
    assert response.session_lifetime.total_seconds() == 30  # type: ignore[attr-defined]
    assert auth.complete and str(auth.principal) == "User:alice"
    assert auth.supports_reauthentication and not auth.session_expired()
    clock.advance(30_001)
    assert auth.session_expired()


def test_no_expiry_without_max_reauth_or_credential_lifetime() -> None:
    clock = ManualClock()
    auth = _authenticator(clock)
    auth.on_frame(_handshake(0, "PLAIN"))
    answer = auth.on_frame(b"\x00alice\x00pw")
    assert answer == struct.pack(">i", 0)  # the raw path: a size-prefixed empty challenge
    assert auth.complete and not auth.supports_reauthentication
    clock.advance(10**12)
    assert not auth.session_expired()


def test_reauthentication_as_someone_else_fails() -> None:
    clock = ManualClock()
    first = _authenticator(clock, max_reauth=1000)
    first.on_frame(_handshake(1, "PLAIN"))
    first.on_frame(_authenticate(1, b"\x00alice\x00pw"))
    again = _authenticator(clock, 1000, previous=first)
    again.on_frame(_handshake(1, "PLAIN"))
    with pytest.raises(AuthenticationFailed) as failed:
        again.on_frame(_authenticate(1, b"\x00bob\x00pw"))
    response = _response(36, 1, failed.value.response)
    assert response.error_message == (  # type: ignore[attr-defined]
        "Cannot change principals during re-authentication from User.alice: User.bob"
    )
    other = _authenticator(clock, 1000, previous=first)
    other.on_frame(_handshake(1, "OAUTHBEARER"))
    with pytest.raises(AuthenticationFailed, match="not supported for re-authentication"):
        other.on_frame(_authenticate(1, b"anything"))


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
async def test_inter_broker_client_logs_in(mechanism: str) -> None:
    """The brokers' own client side (sasl_client.py) against the server side."""
    from broker.security.sasl_client import InterBrokerAuthenticationError, InterBrokerClient
    from broker.security.scram import ScramSaslServer, generate_credential

    creds = {
        ("admin", m): generate_credential(m, "pw", b"salt", 4096)
        for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")
    }

    def new_server(name: str) -> SaslServer:
        if name == "PLAIN":
            return PlainSaslServer({"admin": "pw"})
        return ScramSaslServer(name, lambda u, m: creds.get((u, m)), lambda n: b"s" * n)

    async def login(password: str) -> SaslServerAuthenticator:
        server = SaslServerAuthenticator(
            ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"], new_server, ManualClock().now_ms, {}
        )

        async def request(api_key: int, version: int, payload: object) -> object:
            try:
                answer = server.on_frame(_frame(api_key, version, payload))
            except AuthenticationFailed as exc:
                answer = exc.response
            return _response(api_key, version, answer)

        client = InterBrokerClient(
            "SASL_SSL", None, mechanism, lambda n: b"c" * n, "admin", password
        )
        await client.authenticate(request)
        return server

    server = await login("pw")
    assert server.complete and str(server.principal) == "User:admin"
    with pytest.raises(InterBrokerAuthenticationError):
        await login("wrong")
