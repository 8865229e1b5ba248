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
* ``COMPLETE``: the principal is ``User:<authorization id>``; frames go to the dispatcher,
  whose SaslHandshake/SaslAuthenticate handlers answer ILLEGAL_SASL_STATE.

Differences from Kafka: no re-authentication (KIP-368): ``session_lifetime_ms`` is always 0
(``connections.max.reauth.ms`` is not read), so clients never start one; GSSAPI is not
served (a first token that is not a Kafka request is refused as Kafka does when GSSAPI is
not enabled).
"""

from __future__ import annotations

import datetime
import logging
import struct
from collections.abc import Callable, Sequence
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

    def __init__(self, enabled_mechanisms: Sequence[str], new_server: SaslServerFactory) -> None:
        self._enabled = list(enabled_mechanisms)
        self._new_server = new_server
        self._state = "HANDSHAKE_OR_VERSIONS_REQUEST"
        self._server: SaslServer | None = None
        self._raw_tokens = False
        self.principal: KafkaPrincipal | None = None

    @property
    def complete(self) -> bool:
        return self._state == "COMPLETE"

    def on_frame(self, frame: bytes) -> bytes | None:
        """The bytes to write for ``frame`` (framed), or ``PASS``; raises
        ``AuthenticationFailed`` when the connection must close."""
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
        self._server = self._new_server(mechanism)
        self._raw_tokens = header.api_version == 0
        self._state = "AUTHENTICATE"
        return data

    def _evaluate(self, token: bytes) -> bytes:
        server = self._server
        assert server is not None
        challenge = server.evaluate_response(token)
        if server.is_complete():
            self.principal = KafkaPrincipal(USER_TYPE, server.authorization_id())
            self._state = "COMPLETE"
        return challenge

    def _authenticate(self, header: Any, token: bytes) -> bytes:
        b = response_builder(SASL_AUTHENTICATE, header.api_version)

        def answer(error: ErrorCode, message: str | None, auth_bytes: bytes) -> bytes:
            response = b.SaslAuthenticateResponse(
                error_code=error,
                error_message=message,
                auth_bytes=auth_bytes,
                session_lifetime=datetime.timedelta(0),
            )
            return encode_response(
                SASL_AUTHENTICATE, header.api_version, header.correlation_id, response
            )

        assert self._server is not None
        mechanism = self._server.mechanism_name
        try:
            challenge = self._evaluate(token)
        except SaslAuthenticationException as exc:
            self._state = "FAILED"
            raise AuthenticationFailed(
                str(exc), answer(ErrorCode.sasl_authentication_failed, str(exc), b"")
            ) from None
        except SaslException as exc:
            self._state = "FAILED"
            message = (
                "Authentication failed during authentication due to invalid credentials with "
                f"SASL mechanism {mechanism}"
            )
            log.debug("SASL %s failed: %s", mechanism, exc)
            raise AuthenticationFailed(
                message, answer(ErrorCode.sasl_authentication_failed, message, b"")
            ) from None
        return answer(ErrorCode.none, None, challenge)

    def _raw_token(self, token: bytes) -> bytes:
        try:
            challenge = self._evaluate(token)
        except (SaslAuthenticationException, SaslException) as exc:
            self._state = "FAILED"
            raise AuthenticationFailed(f"SASL authentication failed: {exc}") from None
        return struct.pack(">i", len(challenge)) + challenge


def _name(api_key: int) -> str:
    try:
        return api_name(api_key).upper()
    except Exception:
        return str(api_key)
