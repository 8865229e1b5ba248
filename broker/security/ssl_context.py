"""A TLS listener's ``ssl.SSLContext`` from Kafka's ``ssl.*`` configs, and the SSL principal.

Kafka's names, read through the listener's lookup (``listener.name.<l>.ssl.X`` before
``ssl.X``, ``listeners.py``):

* keystore: ``ssl.keystore.type=PEM`` with ``ssl.keystore.location`` (a PEM file holding the
  private key and the certificate chain; ``ssl.key.password`` if the key is encrypted) or
  ``ssl.keystore.certificate.chain`` + ``ssl.keystore.key`` (PEM text in the config);
* truststore: ``ssl.truststore.type=PEM`` with ``ssl.truststore.location`` or
  ``ssl.truststore.certificates``; it verifies client certificates;
* ``ssl.client.auth``: none (default), requested, required;
* ``ssl.enabled.protocols`` (default ``TLSv1.2,TLSv1.3``): the lowest and highest become the
  context's version bounds;
* ``ssl.cipher.suites``: handed to OpenSSL as its cipher list (OpenSSL's names; Java's IANA
  names such as ``TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256`` are not translated).

The principal of an SSL connection is Kafka's default principal builder's:
``User:<the client certificate's subject DN in RFC 2253 form>`` (``CN=alice,O=Example``),
``User:ANONYMOUS`` without a client certificate.

PKCS12 keystores and truststores (``ssl.keystore.type=PKCS12``, ``ssl.keystore.password``)
are read with the cryptography library.

A keystore certificate signed with SHA-1 (or MD5) is served, as Kafka (Java) serves it:
OpenSSL's default security level refuses to load such a certificate (CA_MD_TOO_WEAK), so
the context is put at security level 0 (``@SECLEVEL=0``, also after ``ssl.cipher.suites``)
and a warning names the certificate and its signature algorithm. A self-signed
certificate's own signature is not checked by OpenSSL and changes nothing.

Differences from Kafka: JKS (Kafka's default type) is refused at start with a message
saying to use PEM or PKCS12 (no maintained Python library reads JKS);
``ssl.principal.mapping.rules`` is not read (Kafka's DEFAULT rule only).
"""

from __future__ import annotations

import logging
import re
import ssl
import tempfile
from collections.abc import Callable
from pathlib import Path

from cryptography import x509

from broker.security.principal import ANONYMOUS, USER_TYPE, KafkaPrincipal

log = logging.getLogger("broker.security.ssl_context")

ConfigLookup = Callable[[str], str | None]
#: Signature hashes OpenSSL 3 refuses at its default security level (1 and above).
WEAK_SIGNATURE_HASHES = frozenset({"sha1", "md5"})
LOW_SECURITY_LEVEL = "@SECLEVEL=0"
_PEM_CERTIFICATE = re.compile(
    rb"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", re.DOTALL
)

_PROTOCOLS = {
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
_CLIENT_AUTH = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}


class SslConfigError(ValueError):
    """``ssl.*`` settings a TLS listener cannot start with."""


def _store_type(get: ConfigLookup, key: str, default: str) -> str:
    kind = (get(key) or default).upper()
    if kind not in ("PEM", "PKCS12"):
        raise SslConfigError(
            f"{key}={kind}: minikafka reads PEM and PKCS12 keystores and truststores; "
            f"set {key}=PEM or PKCS12"
        )
    return kind


def _pkcs12(location: str, password: str | None) -> tuple[bytes | None, list[bytes]]:
    """(private key PEM or None, certificate PEMs: the entry's first) of a PKCS12 file."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    with open(location, "rb") as f:
        data = f.read()
    try:
        key, cert, extra = pkcs12.load_key_and_certificates(
            data, password.encode() if password else None
        )
    except ValueError as exc:
        raise SslConfigError(f"cannot read the PKCS12 file {location}: {exc}") from None
    pem = serialization.Encoding.PEM
    certs = [c.public_bytes(pem) for c in ([cert] if cert is not None else []) + list(extra)]
    key_pem = None
    if key is not None:
        key_pem = key.private_bytes(
            pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    return key_pem, certs


def weak_signatures(chain_pem: bytes) -> list[str]:
    """The keystore's certificates OpenSSL would refuse as signed too weakly, as
    ``"<subject> (<signature algorithm>)"``; self-signed ones are not checked (OpenSSL
    does not check a self-signed certificate's signature either)."""
    weak = []
    for block in _PEM_CERTIFICATE.findall(chain_pem):
        try:
            cert = x509.load_pem_x509_certificate(block)
            algorithm = cert.signature_hash_algorithm
        except Exception:  # unreadable or unusual: OpenSSL's load reports it
            continue
        if algorithm is None or algorithm.name not in WEAK_SIGNATURE_HASHES:
            continue
        if cert.issuer == cert.subject:
            continue
        name = getattr(cert.signature_algorithm_oid, "_name", algorithm.name)
        weak.append(f"{cert.subject.rfc4514_string()} ({name})")
    return weak


def _allow_weak_signatures(context: ssl.SSLContext, chain_pem: bytes) -> bool:
    """Lower the context's security level when the chain needs it (with the warning)."""
    weak = weak_signatures(chain_pem)
    if not weak:
        return False
    log.warning(
        "the keystore's certificate %s is signed with a weak signature algorithm that "
        "OpenSSL's default security level refuses (CA_MD_TOO_WEAK); serving it at %s as "
        "Kafka does",
        ", ".join(weak),
        LOW_SECURITY_LEVEL,
    )
    context.set_ciphers(f"DEFAULT:{LOW_SECURITY_LEVEL}")
    return True


def _load_keystore(context: ssl.SSLContext, get: ConfigLookup) -> bool:
    """Load the keystore; True when its chain needed a lower security level."""
    location = get("ssl.keystore.location")
    chain = get("ssl.keystore.certificate.chain")
    key = get("ssl.keystore.key")
    password = get("ssl.key.password") or get("ssl.keystore.password")
    if location is None and chain is None:
        raise SslConfigError(
            "a TLS listener needs ssl.keystore.location or ssl.keystore.certificate.chain "
            "with ssl.keystore.key"
        )
    kind = _store_type(get, "ssl.keystore.type", "JKS")
    try:
        if location is not None and kind == "PKCS12":
            key_pem, certs = _pkcs12(location, get("ssl.keystore.password"))
            if key_pem is None or not certs:
                raise SslConfigError(f"the PKCS12 keystore {location} has no key entry")
            chain, key, password = b"".join(certs).decode(), key_pem.decode(), None
        elif location is not None:
            weak = _allow_weak_signatures(context, Path(location).read_bytes())
            context.load_cert_chain(location, password=password)
            return weak
        if key is None:
            raise SslConfigError("ssl.keystore.certificate.chain needs ssl.keystore.key")
        weak = _allow_weak_signatures(context, (chain or "").encode())
        with tempfile.TemporaryDirectory() as tmp:
            cert_file, key_file = Path(tmp) / "chain.pem", Path(tmp) / "key.pem"
            cert_file.write_text(chain or "")
            key_file.write_text(key)
            context.load_cert_chain(cert_file, key_file, password=password)
        return weak
    except (OSError, ssl.SSLError) as exc:
        raise SslConfigError(f"cannot load the keystore: {exc}") from None


def _load_truststore(context: ssl.SSLContext, get: ConfigLookup) -> bool:
    location = get("ssl.truststore.location")
    certificates = get("ssl.truststore.certificates")
    if location is None and certificates is None:
        return False
    kind = _store_type(get, "ssl.truststore.type", "JKS")
    try:
        if location is not None and kind == "PKCS12":
            _, certs = _pkcs12(location, get("ssl.truststore.password"))
            context.load_verify_locations(cadata=b"".join(certs).decode())
        elif location is not None:
            context.load_verify_locations(cafile=location)
        if certificates is not None:
            context.load_verify_locations(cadata=certificates)
    except (OSError, ssl.SSLError) as exc:
        raise SslConfigError(f"cannot load the truststore: {exc}") from None
    return True


def build_server_ssl_context(get: ConfigLookup) -> ssl.SSLContext:
    """The server context of one TLS listener; ``SslConfigError`` names what is wrong."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    weak = _load_keystore(context, get)
    has_truststore = _load_truststore(context, get)
    client_auth = (get("ssl.client.auth") or "none").strip().lower()
    if client_auth not in _CLIENT_AUTH:
        raise SslConfigError(
            f"ssl.client.auth={client_auth}: expected one of none, requested, required"
        )
    if client_auth != "none" and not has_truststore:
        raise SslConfigError(f"ssl.client.auth={client_auth} needs a truststore")
    context.verify_mode = _CLIENT_AUTH[client_auth]
    protocols = [p.strip() for p in (get("ssl.enabled.protocols") or "TLSv1.2,TLSv1.3").split(",")]
    versions = []
    for protocol in filter(None, protocols):
        if protocol not in _PROTOCOLS:
            raise SslConfigError(
                f"ssl.enabled.protocols: {protocol} is not served (TLSv1.2, TLSv1.3)"
            )
        versions.append(_PROTOCOLS[protocol])
    if not versions:
        raise SslConfigError("ssl.enabled.protocols is empty")
    context.minimum_version = min(versions)
    context.maximum_version = max(versions)
    ciphers = get("ssl.cipher.suites")
    if ciphers:
        try:
            suites = [c.strip() for c in ciphers.split(",") if c.strip()]
            context.set_ciphers(":".join(suites + ([LOW_SECURITY_LEVEL] if weak else [])))
        except ssl.SSLError as exc:
            raise SslConfigError(f"ssl.cipher.suites={ciphers}: {exc}") from None
    return context


def build_client_ssl_context(get: ConfigLookup) -> ssl.SSLContext:
    """The context this broker connects to another's TLS listener with (inter-broker):
    the listener's truststore verifies the other broker, its keystore is the client
    certificate; ``ssl.endpoint.identification.algorithm`` empty turns host checks off."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if not _load_truststore(context, get):
        raise SslConfigError("the inter-broker listener needs ssl.truststore.* to verify brokers")
    _load_keystore(context, get)
    if (get("ssl.endpoint.identification.algorithm") or "https").strip() == "":
        context.check_hostname = False
    return context


def ssl_principal(ssl_object: ssl.SSLObject | ssl.SSLSocket | None) -> KafkaPrincipal:
    """Kafka's default principal of an SSL connection: the peer certificate's DN."""
    if ssl_object is None:
        return ANONYMOUS
    der = ssl_object.getpeercert(binary_form=True)
    if not der:
        return ANONYMOUS
    subject = x509.load_der_x509_certificate(der).subject
    return KafkaPrincipal(USER_TYPE, subject.rfc4514_string())
