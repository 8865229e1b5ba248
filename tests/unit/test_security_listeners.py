"""Listeners beside the PLAINTEXT one: Kafka's config names, per-listener prefixes, and a
clear error at start for what minikafka cannot serve."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
import trustme

from broker.config.broker_config import ConfigError, read_config
from broker.security.listeners import (
    ListenerConfigError,
    inter_broker_client,
    listener_lookup,
    security_listeners,
)

JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="pw";'


@pytest.fixture
def pem(tmp_path: Path) -> dict[str, str]:
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    ca.issue_cert("localhost").private_key_and_cert_chain_pem.write_to_path(
        str(tmp_path / "server.pem")
    )
    return {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(tmp_path / "server.pem"),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(tmp_path / "ca.pem"),
    }


def _listeners(overrides: dict[str, str]):  # type: ignore[no-untyped-def]
    return security_listeners(read_config(None, overrides).config)


def _inter_broker(overrides: dict[str, str]):  # type: ignore[no-untyped-def]
    config = read_config(None, overrides).config
    return inter_broker_client(config, security_listeners(config), lambda n: b"n" * n)


def test_security_keys_pass_overrides_and_the_primary_listener_stays_plaintext(
    pem: dict[str, str],
) -> None:
    overrides = {
        "listeners": "PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9093,SSL://:9094",
        "advertised.listeners": "SASL_SSL://kafka.example:9093",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
        "listener.name.ssl.ssl.client.auth": "required",
        **pem,
    }
    config = read_config(None, overrides).config
    assert config.client_listener().name == "PLAINTEXT"  # type: ignore[union-attr]
    sasl_ssl, tls = security_listeners(config)
    assert (sasl_ssl.name, sasl_ssl.security_protocol, sasl_ssl.port) == (
        "SASL_SSL",
        "SASL_SSL",
        9093,
    )
    assert sasl_ssl.advertised_host == "kafka.example"
    assert sasl_ssl.enabled_mechanisms == ("PLAIN", "SCRAM-SHA-256")
    assert sasl_ssl.plain_users == {"alice": "pw"}
    assert sasl_ssl.ssl_context is not None
    assert sasl_ssl.ssl_context.verify_mode == ssl.CERT_NONE
    assert tls.ssl_context is not None and tls.ssl_context.verify_mode == ssl.CERT_REQUIRED
    assert tls.host == ""


def test_listener_prefix_wins() -> None:
    get = listener_lookup(
        {"ssl.client.auth": "none", "listener.name.ext.ssl.client.auth": "required"}, "EXT"
    )
    assert get("ssl.client.auth") == "required"
    assert listener_lookup({"ssl.client.auth": "none"}, "EXT")("ssl.client.auth") == "none"


def test_custom_listener_names_use_the_protocol_map() -> None:
    (ext,) = _listeners(
        {
            "listeners": "INTERNAL://:9092,EXTERNAL://:9093",
            "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:SASL_PLAINTEXT",
            "inter.broker.listener.name": "INTERNAL",
            "listener.name.external.sasl.enabled.mechanisms": "OAUTHBEARER",
        }
    )
    assert (ext.name, ext.security_protocol, ext.enabled_mechanisms) == (
        "EXTERNAL",
        "SASL_PLAINTEXT",
        ("OAUTHBEARER",),
    )


@pytest.mark.parametrize(
    ("overrides", "words"),
    [
        # Kafka's default sasl.enabled.mechanisms is GSSAPI, which is not served
        ({"listeners": "PLAINTEXT://:1,SASL_PLAINTEXT://:2"}, "GSSAPI|minikafka serves"),
        (
            {"listeners": "PLAINTEXT://:1,SASL_PLAINTEXT://:2", "sasl.enabled.mechanisms": "PLAIN"},
            "plain.sasl.jaas.config is not set",
        ),
        (
            {
                "listeners": "PLAINTEXT://:1,SASL_PLAINTEXT://:2",
                "sasl.enabled.mechanisms": "PLAIN",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": "Nope required;",
            },
            "PlainLoginModule",
        ),
        ({"listeners": "PLAINTEXT://:1,SSL://:2"}, "ssl.keystore.location"),
        (
            {
                "listeners": "PLAINTEXT://:1,SSL://:2",
                "ssl.keystore.location": "/nonexistent.jks",
            },
            "PEM",
        ),
        ({"listeners": "PLAINTEXT://:1,WEIRD://:2"}, "no security protocol"),
    ],
)
def test_listeners_minikafka_cannot_serve_fail_at_start(
    overrides: dict[str, str], words: str
) -> None:
    with pytest.raises((ListenerConfigError, ConfigError), match=words):
        _listeners(overrides)


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        ("ssl.client.auth", "sometimes", "ssl.client.auth"),
        ("ssl.enabled.protocols", "SSLv3", "not served"),
        ("ssl.cipher.suites", "NOT-A-CIPHER", "ssl.cipher.suites"),
        ("ssl.keystore.location", "/nonexistent/server.pem", "cannot load the keystore"),
    ],
)
def test_bad_ssl_settings(pem: dict[str, str], key: str, value: str, words: str) -> None:
    overrides = {"listeners": "PLAINTEXT://:1,SSL://:2", **pem, key: value}
    with pytest.raises(ListenerConfigError, match=words):
        _listeners(overrides)


def test_pem_text_keystore(tmp_path: Path) -> None:
    ca = trustme.CA()
    leaf = ca.issue_cert("localhost")
    (tls,) = _listeners(
        {
            "listeners": "PLAINTEXT://:1,SSL://:2",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.certificate.chain": "".join(
                blob.bytes().decode() for blob in leaf.cert_chain_pems
            ),
            "ssl.keystore.key": leaf.private_key_pem.bytes().decode(),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.certificates": ca.cert_pem.bytes().decode(),
            "ssl.client.auth": "requested",
            "ssl.enabled.protocols": "TLSv1.3",
        }
    )
    assert tls.ssl_context is not None
    assert tls.ssl_context.verify_mode == ssl.CERT_OPTIONAL
    assert tls.ssl_context.minimum_version == ssl.TLSVersion.TLSv1_3


def test_pkcs12_keystore_and_truststore(tmp_path: Path) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    ca = trustme.CA()
    leaf = ca.issue_cert("localhost")
    key = serialization.load_pem_private_key(leaf.private_key_pem.bytes(), None)
    cert = x509.load_pem_x509_certificate(leaf.cert_chain_pems[0].bytes())
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem.bytes())
    keystore = pkcs12.serialize_key_and_certificates(
        b"server",
        key,
        cert,
        [ca_cert],
        serialization.BestAvailableEncryption(b"changeit"),  # type: ignore[arg-type]
    )
    truststore = pkcs12.serialize_key_and_certificates(
        b"ca", None, None, [ca_cert], serialization.BestAvailableEncryption(b"changeit")
    )
    (tmp_path / "server.p12").write_bytes(keystore)
    (tmp_path / "trust.p12").write_bytes(truststore)
    common = {
        "listeners": "PLAINTEXT://:1,SSL://:2",
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(tmp_path / "server.p12"),
        "ssl.keystore.password": "changeit",
        "ssl.truststore.type": "PKCS12",
        "ssl.truststore.location": str(tmp_path / "trust.p12"),
        "ssl.truststore.password": "changeit",
        "ssl.client.auth": "required",
    }
    (tls,) = _listeners(common)
    assert tls.ssl_context is not None
    with pytest.raises(ListenerConfigError, match="PKCS12"):
        _listeners({**common, "ssl.keystore.password": "wrong"})
    with pytest.raises(ListenerConfigError, match="PEM or PKCS12"):
        _listeners({**common, "ssl.keystore.type": "JKS"})


def test_oauthbearer_options_per_listener() -> None:
    base = {
        "listeners": "PLAINTEXT://:1,SASL_PLAINTEXT://:2",
        "sasl.enabled.mechanisms": "OAUTHBEARER",
    }
    (default,) = _listeners(base)
    assert default.oauthbearer.principal_claim == "sub"
    module = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
    key = "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config"
    (custom,) = _listeners({**base, key: f'{module} required unsecuredValidatorRequiredScope="x";'})
    assert custom.oauthbearer.required_scope == ("x",)
    with pytest.raises(ListenerConfigError, match="must not be negative"):
        _listeners({**base, key: f'{module} required unsecuredValidatorAllowableClockSkewMs="-5";'})


def test_inter_broker_listener_login() -> None:
    base = {
        "listeners": "PLAINTEXT://:1,SASL_PLAINTEXT://:2",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
    }
    key = "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config"
    module = "org.apache.kafka.common.security.scram.ScramLoginModule"
    client = _inter_broker({**base, key: f'{module} required username="admin" password="pw";'})
    assert (client.listener_name, client.mechanism, client.username) == (
        "SASL_PLAINTEXT",
        "SCRAM-SHA-256",
        "admin",
    )
    assert _inter_broker({**base, "inter.broker.listener.name": "PLAINTEXT"}) is None
    with pytest.raises(ListenerConfigError, match="username and password"):
        _inter_broker({**base, key: f"{module} required;"})
    with pytest.raises(ListenerConfigError, match="must enable it"):
        _inter_broker({**base, "sasl.mechanism.inter.broker.protocol": "PLAIN"})


def test_broker_wide_client_auth_is_for_ssl_listeners_only_kip_684(pem: dict[str, str]) -> None:
    base = {
        "listeners": "PLAINTEXT://:1,SSL://:2,SASL_SSL://:3",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
        "ssl.client.auth": "required",
        **pem,
    }
    tls, sasl_ssl = _listeners(base)
    assert tls.ssl_context is not None and sasl_ssl.ssl_context is not None
    assert tls.ssl_context.verify_mode == ssl.CERT_REQUIRED
    assert sasl_ssl.ssl_context.verify_mode == ssl.CERT_NONE  # the unprefixed one is not its
    prefixed = {**base, "listener.name.sasl_ssl.ssl.client.auth": "requested"}
    _, sasl_ssl = _listeners(prefixed)
    assert sasl_ssl.ssl_context is not None
    assert sasl_ssl.ssl_context.verify_mode == ssl.CERT_OPTIONAL


def test_a_sha1_signed_keystore_is_served_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, pem: dict[str, str]
) -> None:
    from tests.integration.security_setup import sha1_signed_keystore

    keystore, _ca = sha1_signed_keystore(tmp_path)
    with pytest.raises(ssl.SSLError, match="too weak"):  # what OpenSSL does by default
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(keystore)
    base = {
        "listeners": "PLAINTEXT://:1,SSL://:2",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore),
    }
    with caplog.at_level("WARNING", "broker.security.ssl_context"):
        (tls,) = _listeners(base)
        (with_suites,) = _listeners({**base, "ssl.cipher.suites": "ECDHE-RSA-AES128-GCM-SHA256"})
    assert tls.ssl_context is not None and with_suites.ssl_context is not None
    assert "CN=localhost (sha1WithRSAEncryption)" in caplog.text
    assert "CA_MD_TOO_WEAK" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", "broker.security.ssl_context"):
        _listeners({**base, "ssl.keystore.location": pem["ssl.keystore.location"]})
    assert "weak signature" not in caplog.text  # a SHA-256 one: nothing lowered
