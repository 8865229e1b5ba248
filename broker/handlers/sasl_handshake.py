"""SaslHandshake (key 17) once a connection is past authentication, or on a listener without SASL.

On a SASL listener the handshake is the authenticator's (``broker/security/sasl_server.py``)
and never reaches this module; here it is what Kafka's KafkaApis answers: ILLEGAL_SASL_STATE
with no mechanisms (re-authentication, KIP-368, is not served).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.server.context import RequestContext
from protocol.builders import response_builder

API_KEY = 17
MIN_VERSION = 0
MAX_VERSION = 1


def handle(ctx: RequestContext, request: Any) -> Any:
    return error_response(ctx, request, ErrorCode.illegal_sasl_state)


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    return b.SaslHandshakeResponse(error_code=error, mechanisms=())
