"""SCRAM-SHA-256/512 (RFC 5802, RFC 7677) as Kafka's ``ScramSaslServer``.

Theory of operation: the client sends ``gs2-header client-first-bare`` (``n,,n=<user>,
r=<client nonce>[,extensions]``); the server looks up the user's stored credential (salt,
iterations, StoredKey, ServerKey — never the password, as Kafka stores it) and answers
``r=<client nonce + server nonce>,s=<salt>,i=<iterations>``; the client proves it knows the
password with ``c=<gs2 header>,r=<nonce>,p=<ClientProof>``, and the server checks
``H(ClientProof XOR HMAC(StoredKey, AuthMessage)) == StoredKey`` and answers
``v=<ServerSignature>``. Kafka's rules: the user name is a SASL name (``=2C`` is ``,``,
``=3D`` is ``=``); an authorization id, when given, must equal the user name; a credential
with fewer than 4096 iterations is refused. Unknown users and wrong proofs are
``SaslException`` (the client learns only "invalid credentials").

A delegation token (KIP-48) logs in with the ``tokenauth=true`` extension: the user name
is the token id, the password the token's HMAC in base64; the credential and owner come
from ``token_lookup`` (Kafka's DelegationTokenCredentialCallback), the authorization id is
the owner's name, the session ends when the token expires and the principal is marked
token-authenticated. An unknown (or expired) token id is "Token Authentication failed:
Invalid tokenId : <id>".
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from collections.abc import Callable
from dataclasses import dataclass

from broker.security.sasl import (
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    SaslAuthenticationException,
    SaslException,
)

#: Kafka's ScramMechanism: hash name and minimum iterations.
SCRAM_MECHANISMS: dict[str, str] = {SCRAM_SHA_256: "sha256", SCRAM_SHA_512: "sha512"}
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384  # what AlterUserScramCredentials accepts (Kafka's controller)
#: Kafka's ScramMechanism type codes on the wire (Describe/AlterUserScramCredentials).
MECHANISM_TYPES: dict[str, int] = {SCRAM_SHA_256: 1, SCRAM_SHA_512: 2}
MECHANISM_NAMES: dict[int, str] = {code: name for name, code in MECHANISM_TYPES.items()}

_CLIENT_FIRST = re.compile(
    r"^(?P<gs2>n,(?:a=(?P<authzid>[^,]*))?,)n=(?P<user>[^,]*),r=(?P<nonce>[\x21-\x2b\x2d-\x7e]+)"
    r"(?P<ext>(?:,[A-Za-z]+=[^,]*)*)$"
)
_CLIENT_FINAL = re.compile(
    r"^c=(?P<c>[A-Za-z0-9+/=]*),r=(?P<nonce>[^,]*)(?:,[^,]*)*,p=(?P<p>[A-Za-z0-9+/=]+)$"
)


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What Kafka stores per user and mechanism: salt, StoredKey, ServerKey, iterations."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


@dataclass(frozen=True, slots=True)
class TokenLogin:
    """What a SCRAM login with a token needs (Kafka's DelegationTokenCredentialCallback):
    the token's credential, its owner's name and its expiry (epoch ms)."""

    credential: ScramCredential
    owner_name: str
    expiry_timestamp_ms: int


TokenLookup = Callable[[str, str], TokenLogin | None]


def _hmac(hash_name: str, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, hash_name).digest()


def salted_password(mechanism: str, password: bytes, salt: bytes, iterations: int) -> bytes:
    """RFC 5802's Hi(): PBKDF2 with the mechanism's hash."""
    return hashlib.pbkdf2_hmac(SCRAM_MECHANISMS[mechanism], password, salt, iterations)


def credential_from_salted_password(
    mechanism: str, salted: bytes, salt: bytes, iterations: int
) -> ScramCredential:
    """Kafka's ScramFormatter: StoredKey = H(HMAC(salted, "Client Key")), ServerKey."""
    hash_name = SCRAM_MECHANISMS[mechanism]
    client_key = _hmac(hash_name, salted, b"Client Key")
    stored_key = hashlib.new(hash_name, client_key).digest()
    server_key = _hmac(hash_name, salted, b"Server Key")
    return ScramCredential(salt, stored_key, server_key, iterations)


def generate_credential(
    mechanism: str, password: str, salt: bytes, iterations: int
) -> ScramCredential:
    salted = salted_password(mechanism, password.encode("utf-8"), salt, iterations)
    return credential_from_salted_password(mechanism, salted, salt, iterations)


def username_from_sasl_name(name: str) -> str:
    """RFC 5802's saslname: ``=2C`` is ``,`` and ``=3D`` is ``=``."""
    if re.search(r"=(?!2C|3D)", name):
        raise SaslException(f"Invalid username: {name}")
    return name.replace("=2C", ",").replace("=3D", "=")


class ScramSaslServer:
    """One SCRAM exchange: client-first, then client-final."""

    def __init__(
        self,
        mechanism: str,
        lookup: Callable[[str, str], ScramCredential | None],
        random_bytes: Callable[[int], bytes],
        token_lookup: TokenLookup | None = None,
    ) -> None:
        if mechanism not in SCRAM_MECHANISMS:
            raise ValueError(f"not a SCRAM mechanism: {mechanism}")
        self.mechanism_name = mechanism
        self._hash = SCRAM_MECHANISMS[mechanism]
        self._lookup = lookup
        self._random_bytes = random_bytes
        self._token_lookup = token_lookup
        self._token: TokenLogin | None = None
        self._state = "RECEIVE_CLIENT_FIRST_MESSAGE"
        self._username = ""
        self._credential: ScramCredential | None = None
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""

    def evaluate_response(self, response: bytes) -> bytes:
        try:
            text = response.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslException("Invalid SCRAM message: not UTF-8") from None
        if self._state == "RECEIVE_CLIENT_FIRST_MESSAGE":
            return self._client_first(text)
        if self._state == "RECEIVE_CLIENT_FINAL_MESSAGE":
            return self._client_final(text)
        raise SaslException(f"Unexpected challenge in Sasl server state {self._state}")

    def _client_first(self, text: str) -> bytes:
        match = _CLIENT_FIRST.match(text)
        if match is None:
            raise SaslException(f"Invalid SCRAM client first message {text[:100]!r}")
        username = username_from_sasl_name(match["user"])
        if re.search(r"(?i)(^|,)tokenauth=true(,|$)", match["ext"] or ""):
            token = (
                self._token_lookup(username, self.mechanism_name) if self._token_lookup else None
            )
            if token is None:
                raise SaslException(f"Token Authentication failed: Invalid tokenId : {username}")
            self._token = token
            credential: ScramCredential | None = token.credential
        else:
            credential = self._lookup(username, self.mechanism_name)
        if credential is None:
            raise SaslException("Authentication failed: Invalid user credentials")
        authzid = match["authzid"] or ""
        if authzid and authzid != username:
            raise SaslAuthenticationException(
                "Authentication failed: Client requested an authorization id that is different "
                "from username"
            )
        if credential.iterations < MIN_ITERATIONS:
            raise SaslException(
                f"Iterations {credential.iterations} is less than the minimum "
                f"{MIN_ITERATIONS} for {self.mechanism_name}"
            )
        self._username = username if self._token is None else self._token.owner_name
        self._credential = credential
        self._client_first_bare = text[len(match["gs2"]) :]
        server_nonce = base64.b64encode(self._random_bytes(18)).decode().replace(",", "_")
        self._nonce = match["nonce"] + server_nonce
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={credential.iterations}"
        self._state = "RECEIVE_CLIENT_FINAL_MESSAGE"
        return self._server_first.encode()

    def _client_final(self, text: str) -> bytes:
        self._state = "FAILED"
        match = _CLIENT_FINAL.match(text)
        if match is None:
            raise SaslException("Authentication failed: Invalid client final message")
        # Kafka checks endsWith, not equality: librdkafka before 2.1 (Debian's kcat) sends
        # its client nonce again in front of the combined nonce, and Kafka accepts it.
        if not match["nonce"].endswith(self._nonce):
            raise SaslException("Invalid client nonce in the final client message.")
        credential = self._credential
        assert credential is not None
        without_proof = text[: text.rindex(",p=")]
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        try:
            proof = base64.b64decode(match["p"], validate=True)
        except ValueError:
            raise SaslException("Authentication failed: Invalid client final message") from None
        signature = _hmac(self._hash, credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise SaslException("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        computed = hashlib.new(self._hash, client_key).digest()
        if not hmac.compare_digest(computed, credential.stored_key):
            raise SaslException("Invalid client credentials")
        server_signature = _hmac(self._hash, credential.server_key, auth_message)
        self._state = "COMPLETE"
        return b"v=" + base64.b64encode(server_signature)

    def is_complete(self) -> bool:
        return self._state == "COMPLETE"

    def authorization_id(self) -> str:
        if not self.is_complete():
            raise RuntimeError("Authentication exchange has not completed")
        return self._username

    def credential_expiration_ms(self) -> int | None:
        return self._token.expiry_timestamp_ms if self._token is not None else None

    def token_authenticated(self) -> bool:
        return self._token is not None
