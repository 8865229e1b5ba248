"""Certificates and listener configs for the security tests (trustme's throwaway CAs)."""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass
from pathlib import Path

import trustme

USERS = {"alice": "alice-secret", "bob": "bob-secret"}
MECHANISMS = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER"


@dataclass(frozen=True)
class Pki:
    ca_file: Path
    client_cert_file: Path  # a client certificate (key + chain) the broker's CA signed
    stranger_cert_file: Path  # one from another CA
    server_file: Path


def make_pki(directory: Path) -> Pki:
    ca = trustme.CA()
    other = trustme.CA()
    server = ca.issue_cert("localhost", "127.0.0.1")
    client = ca.issue_cert("alice@example.com", common_name="alice")
    stranger = other.issue_cert("mallory@example.com", common_name="mallory")
    ca.cert_pem.write_to_path(str(directory / "ca.pem"))
    server.private_key_and_cert_chain_pem.write_to_path(str(directory / "server.pem"))
    client.private_key_and_cert_chain_pem.write_to_path(str(directory / "client.pem"))
    stranger.private_key_and_cert_chain_pem.write_to_path(str(directory / "stranger.pem"))
    return Pki(
        directory / "ca.pem",
        directory / "client.pem",
        directory / "stranger.pem",
        directory / "server.pem",
    )


def jaas(users: dict[str, str]) -> str:
    entries = " ".join(f'user_{name}="{password}"' for name, password in users.items())
    return f"org.apache.kafka.common.security.plain.PlainLoginModule required {entries};"


def security_overrides(pki: Pki) -> dict[str, str]:
    """Four listeners: PLAINTEXT, SSL (client certificates required), SASL_PLAINTEXT, SASL_SSL."""
    return {
        "listeners": (
            "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,"
            "SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0"
        ),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki.server_file),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki.ca_file),
        "listener.name.ssl.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": MECHANISMS,
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas(USERS),
        "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas(USERS),
    }


def unsecured_jws(sub: str, lifetime_s: float) -> str:
    """KIP-255's unsecured JWS (alg none, no signature) for ``sub``."""

    def part(obj: object) -> str:
        raw = json.dumps(obj).encode()
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    now = time.time()
    claims = {"sub": sub, "iat": int(now) - 1, "exp": now + lifetime_s}
    return f"{part({'alg': 'none'})}.{part(claims)}."
