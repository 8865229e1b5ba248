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

The validator's options come, as in Kafka, from the listener's
``listener.name.<l>.oauthbearer.sasl.jaas.config`` (``OAuthBearerLoginModule``):
``unsecuredValidatorPrincipalClaimName`` (sub), ``unsecuredValidatorScopeClaimName``
(scope), ``unsecuredValidatorRequiredScope`` (space-delimited; a token without one of them is
answered ``{"status":"insufficient_scope", "scope":"[a, b]"}``) and
``unsecuredValidatorAllowableClockSkewMs`` (0).

Differences from Kafka: a SASL listener with OAUTHBEARER enabled and no such JAAS entry
uses the defaults (Kafka refuses to start without one).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from broker.security.sasl import OAUTHBEARER, SaslAuthenticationException, SaslException

_INITIAL = re.compile(
    r"^n,(?:a=(?P<authzid>[^,]*))?,\x01(?P<kvs>(?:[A-Za-z]+=[\x21-\x7E \t\r\n]*\x01)*)\x01$"
)


class OAuthBearerValidationError(Exception):
    """Why an unsecured JWS is not accepted (Kafka's OAuthBearerIllegalTokenException);
    ``scope``: the required scope when that is what is missing."""

    def __init__(self, message: str, scope: str | None = None) -> None:
        super().__init__(message)
        self.scope = scope


@dataclass(frozen=True)
class UnsecuredValidatorOptions:
    """Kafka's OAuthBearerUnsecuredValidatorCallbackHandler options (JAAS)."""

    principal_claim: str = "sub"
    scope_claim: str = "scope"
    required_scope: tuple[str, ...] = ()
    allowable_clock_skew_ms: int = 0

    @classmethod
    def from_jaas_options(cls, options: Mapping[str, str]) -> UnsecuredValidatorOptions:
        skew = options.get("unsecuredValidatorAllowableClockSkewMs", "").strip() or "0"
        try:
            skew_ms = int(skew)
        except ValueError:
            raise ValueError(
                f"Invalid value for unsecuredValidatorAllowableClockSkewMs: {skew}"
            ) from None
        if skew_ms < 0:
            raise ValueError(f"Allowable clock skew millis must not be negative: {skew}")
        return cls(
            options.get("unsecuredValidatorPrincipalClaimName", "").strip() or "sub",
            options.get("unsecuredValidatorScopeClaimName", "").strip() or "scope",
            tuple(options.get("unsecuredValidatorRequiredScope", "").split()),
            skew_ms,
        )


DEFAULT_OPTIONS = UnsecuredValidatorOptions()


def _b64url(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def validate_unsecured_jws(
    token: str, now_ms: int, options: UnsecuredValidatorOptions = DEFAULT_OPTIONS
) -> tuple[str, int]:
    """The principal and the expiry (ms) of an unsecured JWS; raises when invalid."""
    principal_claim = options.principal_claim
    skew = options.allowable_clock_skew_ms
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
    if now_ms - skew >= expiration_ms:
        raise OAuthBearerValidationError(
            f"The indicated time ({now_ms} ms) is on or after the expiration time "
            f"({expiration_ms} ms)"
        )
    iat = claims.get("iat")
    if isinstance(iat, int | float) and not isinstance(iat, bool) and iat * 1000 > now_ms + skew:
        raise OAuthBearerValidationError("The token was issued in the future")
    _check_scope(claims.get(options.scope_claim), options.required_scope)
    return principal, expiration_ms


def _check_scope(claim: object, required: tuple[str, ...]) -> None:
    """Kafka's validateScope: every required scope element in the token's scope."""
    if not required:
        return
    if isinstance(claim, str):
        scope = set(claim.split())
    elif isinstance(claim, list):
        scope = {s for s in claim if isinstance(s, str)}
    else:
        scope = set()
    for element in required:
        if element not in scope:
            raise OAuthBearerValidationError(
                f"The provided scope was missing a required scope ({element})",
                scope="[" + ", ".join(required) + "]",
            )


class OAuthBearerSaslServer:
    """One OAUTHBEARER exchange (Kafka's OAuthBearerSaslServer)."""

    mechanism_name = OAUTHBEARER

    def __init__(
        self, now_ms: Callable[[], int], options: UnsecuredValidatorOptions = DEFAULT_OPTIONS
    ) -> None:
        self._now_ms = now_ms
        self._options = options
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
            principal, expiration_ms = validate_unsecured_jws(
                auth[7:].strip(), self._now_ms(), self._options
            )
        except OAuthBearerValidationError as exc:
            # Kafka's jsonErrorResponse, spacing included
            if exc.scope is not None:
                self._error = f'{{"status":"insufficient_scope", "scope":"{exc.scope}"}}'
            else:
                self._error = '{"status":"invalid_token"}'
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

    def token_authenticated(self) -> bool:
        return False
