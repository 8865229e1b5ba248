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


def _der(tag: int, body: bytes) -> bytes:
    """One DER TLV."""
    size = len(body)
    if size < 0x80:
        return bytes([tag, size]) + body
    length = size.to_bytes((size.bit_length() + 7) // 8, "big")
    return bytes([tag, 0x80 | len(length)]) + length + body


#: The DER of the OIDs sha256WithRSAEncryption and sha1WithRSAEncryption (same length).
_SHA256_RSA_OID = bytes.fromhex("06092a864886f70d01010b")
_SHA1_RSA_OID = bytes.fromhex("06092a864886f70d010105")


def sha1_signed_keystore(directory: Path) -> tuple[Path, Path]:
    """(keystore PEM: key + a leaf for 127.0.0.1 that a SHA-256 CA signed with SHA-1, the
    CA PEM): the kind of certificate OpenSSL's default security level refuses to load.

    cryptography no longer signs certificates with SHA-1, so the leaf is made with
    SHA-256, its to-be-signed part given SHA-1's algorithm id, and signed again by hand."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import padding, rsa
    from cryptography.x509.oid import NameOID

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    now = datetime.datetime.now(datetime.UTC)
    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ca = (
        x509.CertificateBuilder()
        .subject_name(name("sha1 test CA"))
        .issuer_name(name("sha1 test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    leaf = (
        x509.CertificateBuilder()
        .subject_name(name("localhost"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    tbs = leaf.tbs_certificate_bytes.replace(_SHA256_RSA_OID, _SHA1_RSA_OID, 1)
    signature = ca_key.sign(tbs, padding.PKCS1v15(), hashes.SHA1())
    algorithm = _der(0x30, _SHA1_RSA_OID + b"\x05\x00")
    der = _der(0x30, tbs + algorithm + _der(0x03, b"\x00" + signature))
    sha1_leaf = x509.load_der_x509_certificate(der)
    pem = serialization.Encoding.PEM
    key_pem = key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    keystore, ca_file = directory / "sha1-server.pem", directory / "sha1-ca.pem"
    keystore.write_bytes(key_pem + sha1_leaf.public_bytes(pem))
    ca_file.write_bytes(ca.public_bytes(pem))
    return keystore, ca_file
