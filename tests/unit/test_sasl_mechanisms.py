"""The SASL mechanism servers (PLAIN, SCRAM-SHA-256/512, OAUTHBEARER) and the JAAS parser,
driven by hand-written clients that follow the RFCs, on a manual clock."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.security.jaas import JaasConfigError, parse_jaas_config, plain_users
from broker.security.oauthbearer import OAuthBearerSaslServer, UnsecuredValidatorOptions
from broker.security.plain import PlainSaslServer
from broker.security.sasl import SaslAuthenticationException, SaslException
from broker.security.scram import (
    ScramCredential,
    ScramSaslServer,
    generate_credential,
    salted_password,
)
from broker.security.scram_credentials import ScramCredentialStore
from purgatory import ManualClock

# -- JAAS --------------------------------------------------------------------------------


def test_jaas_plain_login_module_users() -> None:
    entry = parse_jaas_config(
        "org.apache.kafka.common.security.plain.PlainLoginModule required\n"
        '  username="admin" password="admin-secret"\n'
        '  user_admin="admin-secret" user_alice="p\\"w;x" ;'
    )
    assert entry.login_module_name == "org.apache.kafka.common.security.plain.PlainLoginModule"
    assert entry.control_flag == "required"
    assert plain_users(entry) == {"admin": "admin-secret", "alice": 'p"w;x'}


@pytest.mark.parametrize(
    "text",
    [
        "",
        'Module required user_a="x"',  # no ';'
        "Module mandatory;",  # not a flag
        "Module required user_a=;",
        "A required; B required;",  # two modules
    ],
)
def test_jaas_errors(text: str) -> None:
    with pytest.raises(JaasConfigError):
        parse_jaas_config(text)


# -- PLAIN -------------------------------------------------------------------------------


def test_plain_accepts_a_user_and_refuses_others_with_kafkas_messages() -> None:
    server = PlainSaslServer({"alice": "secret"})
    assert server.evaluate_response(b"\x00alice\x00secret") == b""
    assert server.is_complete() and server.authorization_id() == "alice"
    for token, message in [
        (b"\x00alice\x00wrong", "Authentication failed: Invalid username or password"),
        (b"\x00nobody\x00secret", "Authentication failed: Invalid username or password"),
        (b"\x00\x00secret", "Authentication failed: username not specified"),
        (b"\x00alice\x00", "Authentication failed: password not specified"),
        (b"alice\x00secret", "Invalid SASL/PLAIN response: expected 3 tokens, got 2"),
        (
            b"bob\x00alice\x00secret",
            "Authentication failed: Client requested an authorization id that is different "
            "from username",
        ),
    ]:
        with pytest.raises(SaslAuthenticationException, match="^" + message.replace("/", ".")):
            PlainSaslServer({"alice": "secret"}).evaluate_response(token)


# -- SCRAM -------------------------------------------------------------------------------


def _scram_client(
    server: ScramSaslServer, mechanism: str, user: str, password: str, nonce_prefix: str = ""
) -> bytes:
    """RFC 5802's client side; returns the server-final message. ``nonce_prefix`` goes in
    front of the final message's nonce (librdkafka before 2.1 repeats its own there)."""
    hash_name = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
    client_first_bare = f"n={user},r=clientnonce123"
    server_first = server.evaluate_response(f"n,,{client_first_bare}".encode()).decode()
    fields = dict(item.split("=", 1) for item in server_first.split(","))
    assert fields["r"].startswith("clientnonce123")
    salt = base64.b64decode(fields["s"])
    salted = salted_password(mechanism, password.encode(), salt, int(fields["i"]))
    client_key = hmac.new(salted, b"Client Key", hash_name).digest()
    stored_key = hashlib.new(hash_name, client_key).digest()
    without_proof = f"c={base64.b64encode(b'n,,').decode()},r={nonce_prefix}{fields['r']}"
    auth_message = f"{client_first_bare},{server_first},{without_proof}".encode()
    signature = hmac.new(stored_key, auth_message, hash_name).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    final = f"{without_proof},p={base64.b64encode(proof).decode()}"
    server_final = server.evaluate_response(final.encode())
    server_key = hmac.new(salted, b"Server Key", hash_name).digest()
    expected = hmac.new(server_key, auth_message, hash_name).digest()
    assert server_final == b"v=" + base64.b64encode(expected)
    return server_final


def _store(mechanism: str) -> dict[tuple[str, str], ScramCredential]:
    return {("alice", mechanism): generate_credential(mechanism, "secret", b"salt" * 4, 4096)}


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_exchange(mechanism: str) -> None:
    creds = _store(mechanism)
    server = ScramSaslServer(mechanism, lambda u, m: creds.get((u, m)), lambda n: b"n" * n)
    _scram_client(server, mechanism, "alice", "secret")
    assert server.is_complete() and server.authorization_id() == "alice"


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_final_nonce_only_ends_with_the_servers_as_in_kafka(mechanism: str) -> None:
    """Kafka's check is ``endsWith``: librdkafka 2.0 (kcat 1.7) sends ``r=<client nonce>``
    followed by the combined nonce, and logs in; a nonce that ends otherwise is refused."""
    creds = _store(mechanism)
    server = ScramSaslServer(mechanism, lambda u, m: creds.get((u, m)), lambda n: b"n" * n)
    _scram_client(server, mechanism, "alice", "secret", nonce_prefix="clientnonce123")
    assert server.is_complete() and server.authorization_id() == "alice"
    refused = ScramSaslServer(mechanism, lambda u, m: creds.get((u, m)), lambda n: b"n" * n)
    refused.evaluate_response(b"n,,n=alice,r=clientnonce123")
    with pytest.raises(SaslException, match="Invalid client nonce"):
        refused.evaluate_response(b"c=biws,r=clientnonce123nnnn-other,p=AAAA")


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_wrong_password_and_unknown_user(mechanism: str) -> None:
    creds = _store(mechanism)
    server = ScramSaslServer(mechanism, lambda u, m: creds.get((u, m)), lambda n: b"n" * n)
    with pytest.raises(SaslException, match="Invalid client credentials"):
        _scram_client(server, mechanism, "alice", "wrong")
    unknown = ScramSaslServer(mechanism, lambda u, m: creds.get((u, m)), lambda n: b"n" * n)
    with pytest.raises(SaslException, match="Invalid user credentials"):
        unknown.evaluate_response(b"n,,n=mallory,r=abc")


def test_scram_refuses_garbage_and_other_authzid() -> None:
    creds = _store("SCRAM-SHA-256")
    new = lambda: ScramSaslServer(  # noqa: E731
        "SCRAM-SHA-256", lambda u, m: creds.get((u, m)), lambda n: b"n" * n
    )
    with pytest.raises(SaslException):
        new().evaluate_response(b"\xff\xfe garbage")
    with pytest.raises(SaslException):
        new().evaluate_response(b"y,,n=alice")
    with pytest.raises(SaslAuthenticationException, match="authorization id"):
        new().evaluate_response(b"n,a=bob,n=alice,r=abc")
    server = new()
    server.evaluate_response(b"n,,n=alice,r=abc")
    with pytest.raises(SaslException, match="nonce"):
        server.evaluate_response(b"c=biws,r=other,p=AAAA")


def test_credential_store_is_durable_and_seeded_like_kafka_storage(tmp_path: Path) -> None:
    store = ScramCredentialStore(tmp_path)
    assert store.add_scram("SCRAM-SHA-256=[name=alice,password=alice-secret]", bytes) == "alice"
    store.add_scram("SCRAM-SHA-512=[name=alice,password=x,iterations=8192]", bytes)
    again = ScramCredentialStore(tmp_path)
    assert again.credential("alice", "SCRAM-SHA-256") == store.credential("alice", "SCRAM-SHA-256")
    assert again.credential("alice", "SCRAM-SHA-512").iterations == 8192  # type: ignore[union-attr]
    again.delete_many([("alice", "SCRAM-SHA-256"), ("alice", "SCRAM-SHA-512")])
    assert ScramCredentialStore(tmp_path).users() == []
    with pytest.raises(ValueError):
        store.add_scram("SCRAM-SHA-256=[name=alice]", bytes)
    with pytest.raises(ValueError):
        store.add_scram("SCRAM-SHA-256=[name=a,password=b,iterations=10]", bytes)


# -- OAUTHBEARER -------------------------------------------------------------------------


def _jws(claims: dict[str, object], header: dict[str, object] | None = None) -> str:
    def part(obj: object) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    return f"{part(header or {'alg': 'none'})}.{part(claims)}."


def _initial(token: str, authzid: str = "") -> bytes:
    return f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {token}\x01\x01".encode()


def test_oauthbearer_accepts_an_unexpired_unsecured_token() -> None:
    clock = ManualClock(1_000_000)
    server = OAuthBearerSaslServer(clock.now_ms)
    assert server.evaluate_response(_initial(_jws({"sub": "alice", "exp": 2000}))) == b""
    assert server.authorization_id() == "alice"
    assert server.credential_expiration_ms() == 2_000_000


@pytest.mark.parametrize(
    "token",
    [
        _jws({"sub": "alice", "exp": 1000}),  # expired: exp == now
        _jws({"sub": "alice"}),  # no exp
        _jws({"exp": 2000}),  # no sub
        _jws({"sub": "alice", "exp": 2000}, {"alg": "HS256"}),
        _jws({"sub": "alice", "exp": 2000}) + "signature",
        "not-a-jws",
    ],
)
def test_oauthbearer_invalid_token_gets_kafkas_json_challenge_then_fails(token: str) -> None:
    clock = ManualClock(1_000_000)
    server = OAuthBearerSaslServer(clock.now_ms)
    challenge = server.evaluate_response(_initial(token))
    assert json.loads(challenge) == {"status": "invalid_token"}
    assert not server.is_complete()
    with pytest.raises(SaslAuthenticationException, match='"status":"invalid_token"'):
        server.evaluate_response(b"\x01")


def test_oauthbearer_token_expires_on_the_injected_clock() -> None:
    clock = ManualClock(1_000_000)
    token = _jws({"sub": "alice", "exp": 1500})
    assert OAuthBearerSaslServer(clock.now_ms).evaluate_response(_initial(token)) == b""
    clock.advance(500_000)
    assert OAuthBearerSaslServer(clock.now_ms).evaluate_response(_initial(token)) != b""


def test_oauthbearer_authzid_must_match_and_format_is_checked() -> None:
    clock = ManualClock(0)
    with pytest.raises(SaslAuthenticationException, match="authorization id"):
        OAuthBearerSaslServer(clock.now_ms).evaluate_response(
            _initial(_jws({"sub": "alice", "exp": 10}), authzid="bob")
        )
    with pytest.raises(SaslException):
        OAuthBearerSaslServer(clock.now_ms).evaluate_response(b"garbage")


# -- garbage -----------------------------------------------------------------------------

_SASL_ERRORS = (SaslException, SaslAuthenticationException)


_CREDS = _store("SCRAM-SHA-256")


def _servers() -> list[object]:
    """Every mechanism, and SCRAM waiting for its client-final message."""
    creds = _CREDS
    clock = ManualClock(0)
    waiting = ScramSaslServer("SCRAM-SHA-256", lambda u, m: creds.get((u, m)), lambda n: b"n" * n)
    waiting.evaluate_response(b"n,,n=alice,r=abc")
    return [
        PlainSaslServer({"alice": "secret"}),
        ScramSaslServer("SCRAM-SHA-512", lambda u, m: None, lambda n: b"n" * n),
        waiting,
        OAuthBearerSaslServer(clock.now_ms),
    ]


@given(st.binary(max_size=300))
@settings(max_examples=300, deadline=None)
def test_garbage_tokens_are_sasl_errors_only(token: bytes) -> None:
    """Whatever a client sends, a mechanism answers or raises a SASL error, nothing else."""
    nonce = b"abc" + base64.b64encode(b"n" * 18)
    for attempt in (token, b"c=biws,r=" + nonce + b",p=" + token):
        for server in _servers():
            with contextlib.suppress(_SASL_ERRORS):
                server.evaluate_response(attempt)  # type: ignore[attr-defined]


def test_scram_final_proof_with_bad_base64_is_a_sasl_error() -> None:
    server = _servers()[2]
    nonce = b"abc" + base64.b64encode(b"n" * 18)
    with pytest.raises(SaslException):
        server.evaluate_response(b"c=biws,r=" + nonce + b",p=abc")  # type: ignore[attr-defined]


def test_oauthbearer_unsecured_validator_options_from_jaas() -> None:
    entry = parse_jaas_config(
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        'unsecuredValidatorPrincipalClaimName="client_id" '
        'unsecuredValidatorRequiredScope="read write" '
        'unsecuredValidatorAllowableClockSkewMs="5000";'
    )
    options = UnsecuredValidatorOptions.from_jaas_options(entry.options)
    assert options == UnsecuredValidatorOptions("client_id", "scope", ("read", "write"), 5000)
    clock = ManualClock(1_000_000)
    ok = _jws({"client_id": "svc", "exp": 998, "scope": "read write admin"})  # within skew
    server = OAuthBearerSaslServer(clock.now_ms, options)
    assert server.evaluate_response(_initial(ok)) == b""
    assert server.authorization_id() == "svc"
    narrow = _jws({"client_id": "svc", "exp": 2000, "scope": ["read"]})
    server = OAuthBearerSaslServer(clock.now_ms, options)
    challenge = server.evaluate_response(_initial(narrow))
    assert challenge == b'{"status":"insufficient_scope", "scope":"[read, write]"}'
    with pytest.raises(SaslAuthenticationException, match="insufficient_scope"):
        server.evaluate_response(b"\x01")
    with pytest.raises(ValueError, match="must not be negative"):
        UnsecuredValidatorOptions.from_jaas_options(
            {"unsecuredValidatorAllowableClockSkewMs": "-1"}
        )
