"""What every SASL mechanism server of ours is: Kafka's ``SaslServer`` contract.

A mechanism server (``plain.py``, ``scram.py``, ``oauthbearer.py``) is fed the client's
tokens in order by the connection's ``SaslServerAuthenticator`` and answers each with a
challenge. Two kinds of failure, as in Kafka:

* ``SaslAuthenticationException``: its message is safe to show the client and is sent
  in the SaslAuthenticate response (Kafka's PlainSaslServer: "Authentication failed:
  Invalid username or password").
* ``SaslException``: the reason may leak what the client should not learn (whether a
  user exists); the client is told only "Authentication failed during authentication due
  to invalid credentials with SASL mechanism <mechanism>", as Kafka's authenticator does.
"""

from __future__ import annotations

from typing import Protocol

PLAIN = "PLAIN"
SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
OAUTHBEARER = "OAUTHBEARER"
GSSAPI = "GSSAPI"

SUPPORTED_MECHANISMS = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512, OAUTHBEARER)


class SaslException(Exception):
    """An authentication failure whose reason the client is not told."""


class SaslAuthenticationException(Exception):
    """An authentication failure whose message the client is told."""


class SaslServer(Protocol):
    """One authentication exchange of one mechanism (javax.security.sasl.SaslServer)."""

    @property
    def mechanism_name(self) -> str: ...

    def evaluate_response(self, response: bytes) -> bytes:
        """The challenge for the client's ``response``; raises on failure."""
        ...

    def is_complete(self) -> bool: ...

    def authorization_id(self) -> str:
        """The authenticated user's name (the principal's name)."""
        ...

    def credential_expiration_ms(self) -> int | None:
        """When the credential expires (OAUTHBEARER's ``exp``, a delegation token's expiry),
        None when it does not."""
        ...

    def token_authenticated(self) -> bool:
        """Whether the client logged in with a delegation token (SCRAM's ``tokenauth``)."""
        ...
