"""The replay's SASL step: authenticate a replayed connection as its captured user.

A capture records each request's principal (``User:alice``). With ``--target-users``
(user -> password) a connection whose principal is ``User:x`` is replayed over the
target's SASL listener as ``x``: this module's ``authenticate`` runs on the fresh socket
before the replay's first request, as a Kafka client's ``SaslClientAuthenticator`` does —
SaslHandshake (v1), then SaslAuthenticate (v2) frames, PLAIN in one round (RFC 4616) or
SCRAM-SHA-256/512 in two (RFC 5802/7677, with the server's signature checked). The
replay's own requests then go on on the same connection's correlation sequence.

Kafka 4 answers SaslAuthenticate failures with SASL_AUTHENTICATION_FAILED (58) and
closes; here that is a ``SaslFailed`` carrying the broker's message, which the replay
reports on every request of the connection. GSSAPI and OAUTHBEARER are not replayed (a
capture holds no token and no ticket).

Only this step knows SASL; the connection plumbing (socket, reader task) stays the
replay client's, so the step is a function over a fresh `client_io.ClientShell`, used one
request at a time before the replay starts its reader.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from client_io.shell import ClientShell
from protocol.builders import request_builder
from protocol.errors import ProtocolError

__all__ = [
    "MECHANISMS",
    "SaslFailed",
    "authenticate",
    "read_users",
    "replay_user",
    "scram_client_final",
    "scram_client_first",
]

SASL_HANDSHAKE: Final = 17
SASL_AUTHENTICATE: Final = 36
_HANDSHAKE_VERSION: Final = 1
_AUTHENTICATE_VERSION: Final = 2
_HASHES: Final = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MECHANISMS: Final = ("PLAIN", *_HASHES)


class SaslFailed(ConnectionError):
    """The broker refused the handshake or the credentials."""


def read_users(path: Path) -> dict[str, str]:
    """``--target-users FILE``: a JSON object ``{"alice": "secret"}`` or ``user=password``
    lines (blank lines and ``#`` comments ignored); ``ValueError`` naming a bad line."""
    text = path.read_text(encoding="utf-8")
    if text.lstrip().startswith("{"):
        document = json.loads(text)
        if not isinstance(document, dict):
            raise ValueError("a users document is one JSON object, user -> password")
        users = {str(k): str(v) for k, v in document.items()}
    else:
        users = {}
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            name, sep, password = line.strip().partition("=")
            if not sep or not name:
                raise ValueError(f"line {number}: not user=password")
            users[name] = password
    bad = [name for name in users if not name or any(c in name for c in ' ,="[]')]
    if bad or not users:
        raise ValueError(f"no usable users (bad names: {bad})" if bad else "no users")
    return users


def replay_user(principal: str | None, users: Mapping[str, str]) -> str | None:
    """The user a connection captured as ``principal`` replays as, if ``users`` has it."""
    if principal is None or not principal.startswith("User:"):
        return None
    name = principal[len("User:") :]
    return name if name in users else None


async def authenticate(shell: ClientShell, user: str, password: str, mechanism: str) -> None:
    """Authenticate the fresh connection ``shell`` (opened with the captured client id)
    as ``user``, one request at a time, before its reader task starts."""
    if mechanism not in MECHANISMS:
        raise ValueError(f"cannot replay SASL mechanism {mechanism} (one of {MECHANISMS})")
    handshake = request_builder(SASL_HANDSHAKE, _HANDSHAKE_VERSION).SaslHandshakeRequest
    answer = await _exchange(shell, SASL_HANDSHAKE, handshake(mechanism=mechanism))
    if int(answer.error_code) != 0:
        offered = ", ".join(answer.mechanisms)
        raise SaslFailed(f"SASL handshake refused {mechanism} (broker offers: {offered})")
    if mechanism == "PLAIN":
        await _authenticate_round(shell, f"\0{user}\0{password}".encode())
        return
    first, nonce = scram_client_first(user)
    server_first = await _authenticate_round(shell, first.encode())
    final, server_signature = scram_client_final(
        _HASHES[mechanism], password, first, server_first.decode(), nonce
    )
    server_final = await _authenticate_round(shell, final.encode())
    if server_final.decode() != f"v={server_signature}":
        raise SaslFailed("SCRAM: the broker's signature does not match")


def scram_client_first(user: str) -> tuple[str, str]:
    """The client-first message (gs2 header "n,," and the bare part) and its nonce."""
    nonce = secrets.token_urlsafe(18)
    name = user.replace("=", "=3D").replace(",", "=2C")
    return f"n,,n={name},r={nonce}", nonce


def scram_client_final(
    hash_name: str, password: str, client_first: str, server_first: str, nonce: str
) -> tuple[str, str]:
    """(client-final message, the server signature to expect), RFC 5802 section 3."""
    fields = dict(part.split("=", 1) for part in server_first.split(","))
    if not fields.get("r", "").startswith(nonce):
        raise SaslFailed("SCRAM: the broker's nonce does not extend ours")
    salted = hashlib.pbkdf2_hmac(
        hash_name, password.encode(), base64.b64decode(fields["s"]), int(fields["i"])
    )
    client_key = hmac.digest(salted, b"Client Key", hash_name)
    stored_key = hashlib.new(hash_name, client_key).digest()
    without_proof = f"c=biws,r={fields['r']}"
    auth_message = f"{client_first[3:]},{server_first},{without_proof}".encode()
    signature = hmac.digest(stored_key, auth_message, hash_name)
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    server_key = hmac.digest(salted, b"Server Key", hash_name)
    server_signature = hmac.digest(server_key, auth_message, hash_name)
    return (
        f"{without_proof},p={base64.b64encode(proof).decode()}",
        base64.b64encode(server_signature).decode(),
    )


async def _authenticate_round(shell: ClientShell, auth_bytes: bytes) -> bytes:
    request = request_builder(SASL_AUTHENTICATE, _AUTHENTICATE_VERSION).SaslAuthenticateRequest
    answer = await _exchange(shell, SASL_AUTHENTICATE, request(auth_bytes=auth_bytes))
    if int(answer.error_code) != 0:
        raise SaslFailed(f"SASL authentication failed: {answer.error_message}")
    return bytes(answer.auth_bytes)


async def _exchange(shell: ClientShell, api_key: int, body: Any) -> Any:
    version = _HANDSHAKE_VERSION if api_key == SASL_HANDSHAKE else _AUTHENTICATE_VERSION
    try:
        return (await shell.request(api_key, version, body)).body
    except ProtocolError as exc:
        raise SaslFailed(f"SASL: {exc}") from exc
    except ConnectionError as exc:
        cause = exc.__cause__
        if isinstance(cause, ProtocolError):
            raise SaslFailed(f"SASL: {cause}") from exc
        raise SaslFailed("SASL: the broker closed the connection") from exc
