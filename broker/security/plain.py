"""SASL/PLAIN (RFC 4616) as Kafka's ``PlainSaslServer`` with its default callback handler.

The client sends one token ``authzid NUL authcid NUL passwd``; the password is checked
against the listener's JAAS ``user_<name>`` options (Kafka's
``PlainServerCallbackHandler``). Kafka's messages, which the client is told.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from broker.security.sasl import PLAIN, SaslAuthenticationException


class PlainSaslServer:
    """One PLAIN exchange: a single response completes it or fails."""

    mechanism_name = PLAIN

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self._authorization_id = ""
        self._complete = False

    def evaluate_response(self, response: bytes) -> bytes:
        tokens = response.decode("utf-8", errors="replace").split("\x00")
        if len(tokens) != 3:
            raise SaslAuthenticationException(
                f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}"
            )
        authorization_id, username, password = tokens
        if not username:
            raise SaslAuthenticationException("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationException("Authentication failed: password not specified")
        expected = self._users.get(username)
        if expected is None or not hmac.compare_digest(
            expected.encode("utf-8"), password.encode("utf-8")
        ):
            raise SaslAuthenticationException("Authentication failed: Invalid username or password")
        if authorization_id and authorization_id != username:
            raise SaslAuthenticationException(
                "Authentication failed: Client requested an authorization id that is different "
                "from username"
            )
        self._authorization_id = username
        self._complete = True
        return b""

    def is_complete(self) -> bool:
        return self._complete

    def authorization_id(self) -> str:
        if not self._complete:
            raise RuntimeError("Authentication exchange has not completed")
        return self._authorization_id

    def credential_expiration_ms(self) -> int | None:
        return None

    def token_authenticated(self) -> bool:
        return False
