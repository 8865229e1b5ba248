"""SASL/OAUTHBEARER (RFC 7628) with Kafka's default unsecured JWS validation (KIP-255).

The client's initial response is ``n,[a=<authzid>],\\x01auth=Bearer <token>\\x01
[key=value\\x01...]\\x01``. Kafka's ``OAuthBearerUnsecuredValidatorCallbackHandler``
(the default when no other is configured) accepts an *unsecured* JWS: header
``{"alg":"none"}``, an empty signature, the principal in the ``sub`` claim (Kafka's
``unsecuredValidatorPrincipalClaimName`` default), ``exp`` (seconds, required) checked
against the injected clock with no allowed skew, ``iat`` if present not in the future.
An invalid token is answered, as Kafka does, with a JSON error challenge
(``{"status":"invalid_token"}``); the client replies ``\\x01`` and the exchange fails with
that JSON as the message.

Differences from Kafka: the options ``unsecuredValidatorRequiredScope`` and
``unsecuredValidatorAllowableClockSkewMs`` are not read; scopes are not checked.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable
from typing import Any

from broker.security.sasl import OAUTHBEARER, SaslAuthenticationException, SaslException

_INITIAL = re.compile(
    r"^n,(?:a=(?P<authzid>[^,]*))?,\x01(?P<kvs>(?:[A-Za-z]+=[\x21-\x7E \t\r\n]*\x01)*)\x01$"
)


class OAuthBearerValidationError(Exception):
    """Why an unsecured JWS is not accepted (Kafka's OAuthBearerIllegalTokenException)."""


def _b64url(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def validate_unsecured_jws(
    token: str, now_ms: int, principal_claim: str = "sub"
) -> tuple[str, int]:
    """The principal and the expiry (ms) of an unsecured JWS; raises when invalid."""
    parts = token.split(".")
    if len(parts) != 3:
        raise OAuthBearerValidationError("Unsecured JWS compact serializations must have 3 parts")
    if parts[2]:
        raise OAuthBearerValidationError("Unsecured JWS must not contain a digital signature")
    try:
        header: Any = json.loads(_b64url(parts[0]))
        claims: Any = json.loads(_b64url(parts[1]))
    except (binascii.Error, ValueError) as exc:
        raise OAuthBearerValidationError(f"Invalid unsecured JWS: {exc}") from None
    if not isinstance(header, dict) or header.get("alg") != "none":
        raise OAuthBearerValidationError("Unsecured JWS must have alg=none")
    if not isinstance(claims, dict):
        raise OAuthBearerValidationError("Unsecured JWS claims must be a JSON object")
    principal = claims.get(principal_claim)
    if not isinstance(principal, str) or not principal.strip():
        raise OAuthBearerValidationError(f"No principal name in the '{principal_claim}' claim")
    exp = claims.get("exp")
    if not isinstance(exp, int | float) or isinstance(exp, bool):
        raise OAuthBearerValidationError("Required claim 'exp' is missing or not a number")
    expiration_ms = int(exp * 1000)
    if expiration_ms <= now_ms:
        raise OAuthBearerValidationError(
            f"The indicated time ({now_ms} ms) is on or after the expiration time "
            f"({expiration_ms} ms)"
        )
    iat = claims.get("iat")
    if isinstance(iat, int | float) and not isinstance(iat, bool) and iat * 1000 > now_ms:
        raise OAuthBearerValidationError("The token was issued in the future")
    return principal, expiration_ms


class OAuthBearerSaslServer:
    """One OAUTHBEARER exchange (Kafka's OAuthBearerSaslServer)."""

    mechanism_name = OAUTHBEARER

    def __init__(self, now_ms: Callable[[], int]) -> None:
        self._now_ms = now_ms
        self._error: str | None = None
        self._principal = ""
        self._expiration_ms: int | None = None
        self._complete = False

    def evaluate_response(self, response: bytes) -> bytes:
        if response == b"\x01" and self._error is not None:
            raise SaslAuthenticationException(self._error)
        self._error = None
        match = _INITIAL.match(response.decode("utf-8", errors="replace"))
        if match is None:
            raise SaslException("Invalid OAUTHBEARER client first message")
        kvs = dict(kv.split("=", 1) for kv in match["kvs"].split("\x01") if kv)
        auth = kvs.pop("auth", "")
        if not auth.startswith("Bearer "):
            raise SaslException("Invalid OAUTHBEARER client first message: no Bearer token")
        try:
            principal, expiration_ms = validate_unsecured_jws(auth[7:].strip(), self._now_ms())
        except OAuthBearerValidationError:
            self._error = json.dumps({"status": "invalid_token"}, separators=(",", ":"))
            return self._error.encode()
        authzid = match["authzid"] or ""
        if authzid and authzid != principal:
            raise SaslAuthenticationException(
                f"Authentication failed: Client requested an authorization id ({authzid}) that "
                f"is different from the token's principal name ({principal})"
            )
        self._principal = principal
        self._expiration_ms = expiration_ms
        self._complete = True
        return b""

    def is_complete(self) -> bool:
        return self._complete

    def authorization_id(self) -> str:
        if not self._complete:
            raise RuntimeError("Authentication exchange has not completed")
        return self._principal

    def credential_expiration_ms(self) -> int | None:
        return self._expiration_ms
