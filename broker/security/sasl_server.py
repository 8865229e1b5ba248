"""Kafka's ``SaslServerAuthenticator``: one connection's SASL exchange, before any request.

Theory of operation. On a SASL_PLAINTEXT or SASL_SSL listener the connection hands every
frame to this object until it is ``complete``, as Kafka's channel does before it is
ready. States as Kafka's:

* ``HANDSHAKE_OR_VERSIONS_REQUEST``: ApiVersions is served by the dispatcher as usual
  (``on_frame`` returns ``PASS``); SaslHandshake (v0-v1) names a mechanism: an enabled one
  is answered NONE with the enabled list, another UNSUPPORTED_SASL_MECHANISM with the list
  and the connection is closed. Any other request closes the connection ("Unexpected
  Kafka request of type X during SASL handshake.", Kafka's IllegalSaslStateException).
* ``AUTHENTICATE``: after SaslHandshake v1 the client sends SaslAuthenticate requests
  (v0-v2), each answered with the mechanism's challenge; after SaslHandshake v0 it sends
  raw size-prefixed tokens (kafka-python, old clients) answered with raw size-prefixed
  challenges. A failure is answered SASL_AUTHENTICATION_FAILED with the mechanism's
  message (``SaslAuthenticationException``) or Kafka's generic "Authentication failed
  during authentication due to invalid credentials with SASL mechanism M"
  (``SaslException``), then the connection is closed; on the raw path it is closed with no
  answer, as in Kafka. Any other request closes the connection.
* ``COMPLETE``: the principal is ``User:<authorization id>`` (a delegation token's owner,
  marked token-authenticated, after SCRAM with ``tokenauth=true``); frames go to the dispatcher,
  whose SaslHandshake/SaslAuthenticate handlers answer ILLEGAL_SASL_STATE.

Re-authentication (KIP-368), as Kafka: the session lasts ``connections.max.reauth.ms``
(``listener.name.<l>.<mechanism>.connections.max.reauth.ms`` first; 0: for ever), or until
the credential expires (OAUTHBEARER's ``exp``), whichever is first; SaslAuthenticate v1+
tells the client (``session_lifetime_ms``). A client that used SaslAuthenticate v1+
re-authenticates by sending SaslHandshake on its connection: a new authenticator
(``previous`` = this one) runs the exchange again, with the same mechanism (another one
closes the connection: "SASL mechanism 'X' requested by client is not supported for
re-authentication of mechanism 'Y'") and the same principal ("Cannot change principals
during re-authentication from User.a: User.b"). Any other request after the session
expired closes the connection (``session_expired``), as Kafka's SocketServer does.

Differences from Kafka: GSSAPI is not served (a first token that is not a Kafka request
is refused as Kafka does when GSSAPI is not enabled).
"""

from __future__ import annotations

import datetime
import logging
import re
import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from broker.security.principal import USER_TYPE, KafkaPrincipal
from broker.security.sasl import SaslAuthenticationException, SaslException, SaslServer
from protocol.api_registry import api_name
from protocol.builders import response_builder
from protocol.codec import decode_request, encode_response, parse_request_header
from protocol.errors import ProtocolError

log = logging.getLogger("broker.security.sasl_server")

API_VERSIONS = 18
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
SASL_HANDSHAKE_VERSIONS = (0, 1)
SASL_AUTHENTICATE_VERSIONS = (0, 2)
PASS = None  # on_frame's answer: the dispatcher serves this frame

SaslServerFactory = Callable[[str], SaslServer]


class AuthenticationFailed(Exception):
    """Close the connection; ``response`` (if any) is written first."""

    def __init__(self, reason: str, response: bytes | None = None) -> None:
        super().__init__(reason)
        self.response = response


class SaslServerAuthenticator:
    """One connection's SASL state; ``on_frame`` until ``complete``."""

    def __init__(
        self,
        enabled_mechanisms: Sequence[str],
        new_server: SaslServerFactory,
        now_ms: Callable[[], int],
        max_reauth_ms: Mapping[str, int],
        previous: SaslServerAuthenticator | None = None,
    ) -> None:
        self._enabled = list(enabled_mechanisms)
        self._new_server = new_server
        self._now_ms = now_ms
        self._max_reauth_ms = max_reauth_ms
        self._previous = previous
        self._state = "HANDSHAKE_OR_VERSIONS_REQUEST"
        self._server: SaslServer | None = None
        self._raw_tokens = False
        self._bad_mechanism: str | None = None
        self.mechanism: str | None = None
        self.principal: KafkaPrincipal | None = None
        self.session_expiration_ms: int | None = None
        # Kafka's connectedClientSupportsReauthentication: a SaslAuthenticate v1+ was seen.
        self.supports_reauthentication = previous is not None

    def session_expired(self) -> bool:
        expiration = self.session_expiration_ms
        return expiration is not None and self._now_ms() > expiration

    @property
    def _doing(self) -> str:
        return "re-authentication" if self._previous is not None else "authentication"

    @property
    def complete(self) -> bool:
        return self._state == "COMPLETE"

    def on_frame(self, frame: bytes) -> bytes | None:
        """The bytes to write for ``frame`` (framed), or ``PASS``; raises
        ``AuthenticationFailed`` when the connection must close."""
        if self._bad_mechanism is not None:
            raise AuthenticationFailed(self._bad_mechanism)
        if self._state == "AUTHENTICATE" and self._raw_tokens:
            return self._raw_token(frame)
        try:
            header, offset = parse_request_header(frame)
        except ProtocolError as exc:
            raise AuthenticationFailed(
                "Exception handling first SASL packet from client, GSSAPI is not supported by "
                f"server ({exc})"
            ) from None
        key = header.api_key
        if self._state == "HANDSHAKE_OR_VERSIONS_REQUEST":
            if key == API_VERSIONS:
                return PASS
            if key != SASL_HANDSHAKE:
                raise AuthenticationFailed(
                    f"Unexpected Kafka request of type {_name(key)} during SASL handshake."
                )
            request = self._decode(header, frame, offset, SASL_HANDSHAKE_VERSIONS)
            return self._handshake(header, request)
        if key != SASL_AUTHENTICATE:
            raise AuthenticationFailed(
                f"Unexpected Kafka request of type {_name(key)} during SASL authentication."
            )
        request = self._decode(header, frame, offset, SASL_AUTHENTICATE_VERSIONS)
        if header.api_version > 0:
            self.supports_reauthentication = True
        return self._authenticate(header, bytes(request.auth_bytes))

    # -- the steps ---------------------------------------------------------------------

    def _decode(self, header: Any, frame: bytes, offset: int, versions: tuple[int, int]) -> Any:
        if not versions[0] <= header.api_version <= versions[1]:
            raise AuthenticationFailed(
                f"Version {header.api_version} is not supported for apiKey {_name(header.api_key)}"
            )
        try:
            return decode_request(header, frame, offset)
        except ProtocolError as exc:
            name = _name(header.api_key)
            raise AuthenticationFailed(f"malformed {name} request: {exc}") from None

    def _handshake(self, header: Any, request: Any) -> bytes:
        mechanism = str(request.mechanism)
        b = response_builder(SASL_HANDSHAKE, header.api_version)
        ok = mechanism in self._enabled
        response = b.SaslHandshakeResponse(
            error_code=ErrorCode.none if ok else ErrorCode.unsupported_sasl_mechanism,
            mechanisms=tuple(self._enabled),
        )
        data = encode_response(SASL_HANDSHAKE, header.api_version, header.correlation_id, response)
        if not ok:
            raise AuthenticationFailed(f"Unsupported SASL mechanism {mechanism}", data)
        previous = self._previous
        if previous is not None and previous.mechanism != mechanism:
            self._bad_mechanism = (
                f"SASL mechanism '{mechanism}' requested by client is not supported for "
                f"re-authentication of mechanism '{previous.mechanism}'"
            )
            return data
        self.mechanism = mechanism
        self._server = self._new_server(mechanism)
        self._raw_tokens = header.api_version == 0
        self._state = "AUTHENTICATE"
        return data

    def _evaluate(self, token: bytes) -> bytes:
        server = self._server
        assert server is not None
        challenge = server.evaluate_response(token)
        if server.is_complete():
            principal = KafkaPrincipal(
                USER_TYPE, server.authorization_id(), server.token_authenticated()
            )
            previous = self._previous
            if previous is not None and previous.principal != principal:
                old = previous.principal
                assert old is not None
                raise SaslAuthenticationException(
                    "Cannot change principals during re-authentication from "
                    f"{old.principal_type}.{old.name}: {principal.principal_type}.{principal.name}"
                )
            self.principal = principal
            self._state = "COMPLETE"
        return challenge

    def _evaluate_guarded(self, token: bytes) -> bytes:
        """``_evaluate``; a mechanism's bug on odd input fails this exchange only."""
        try:
            return self._evaluate(token)
        except (SaslAuthenticationException, SaslException):
            raise
        except Exception as exc:
            log.warning(
                "SASL %s: unexpected error on a client token", self.mechanism, exc_info=True
            )
            raise SaslException(f"unexpected error: {exc}") from exc

    def _session_lifetime_ms(self) -> int:
        """Kafka's calcCompletionTimesAndReturnSessionLifetimeMs; sets the expiration."""
        server = self._server
        assert server is not None
        now = self._now_ms()
        credential_expiration = server.credential_expiration_ms()
        max_reauth = self._max_reauth_ms.get(server.mechanism_name, 0)
        if credential_expiration is None and max_reauth <= 0:
            return 0
        if credential_expiration is None:
            lifetime = max_reauth
        elif max_reauth <= 0:
            lifetime = max(0, credential_expiration - now)
        else:
            lifetime = max(0, min(credential_expiration - now, max_reauth))
        self.session_expiration_ms = now + lifetime
        return lifetime

    def _authenticate(self, header: Any, token: bytes) -> bytes:
        b = response_builder(SASL_AUTHENTICATE, header.api_version)

        def answer(
            error: ErrorCode, message: str | None, auth_bytes: bytes, lifetime_ms: int = 0
        ) -> bytes:
            response = b.SaslAuthenticateResponse(
                error_code=error,
                error_message=message,
                auth_bytes=auth_bytes,
                session_lifetime=datetime.timedelta(milliseconds=lifetime_ms),
            )
            return encode_response(
                SASL_AUTHENTICATE, header.api_version, header.correlation_id, response
            )

        assert self._server is not None
        mechanism = self._server.mechanism_name
        try:
            challenge = self._evaluate_guarded(token)
        except SaslAuthenticationException as exc:
            self._state = "FAILED"
            raise AuthenticationFailed(
                str(exc), answer(ErrorCode.sasl_authentication_failed, str(exc), b"")
            ) from None
        except SaslException as exc:
            self._state = "FAILED"
            message = (
                f"Authentication failed during {self._doing} due to invalid credentials with "
                f"SASL mechanism {mechanism}"
            )
            log.debug("SASL %s failed: %s", mechanism, exc)
            raise AuthenticationFailed(
                message, answer(ErrorCode.sasl_authentication_failed, message, b"")
            ) from None
        lifetime = self._session_lifetime_ms() if self.complete else 0
        return answer(ErrorCode.none, None, challenge, lifetime)

    def _raw_token(self, token: bytes) -> bytes:
        try:
            challenge = self._evaluate_guarded(token)
        except (SaslAuthenticationException, SaslException) as exc:
            self._state = "FAILED"
            raise AuthenticationFailed(f"SASL authentication failed: {exc}") from None
        if self.complete:
            self._session_lifetime_ms()
        return struct.pack(">i", len(challenge)) + challenge


def _name(api_key: int) -> str:
    """Kafka's ApiKeys name: ``ApiVersions`` -> ``API_VERSIONS``."""
    try:
        return re.sub(r"(?<!^)(?=[A-Z])", "_", api_name(api_key)).upper()
    except Exception:
        return str(api_key)
