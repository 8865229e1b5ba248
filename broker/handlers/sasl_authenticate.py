"""SaslAuthenticate (key 36) once a connection is past authentication, or without SASL.

On a SASL listener the exchange is the authenticator's (``broker/security/sasl_server.py``);
a SaslAuthenticate that reaches the dispatcher is answered as Kafka's KafkaApis answers it:
ILLEGAL_SASL_STATE, "SaslAuthenticate request received after successful authentication".
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from broker.handlers.base import error_message
from broker.server.context import RequestContext
from protocol.builders import response_builder

API_KEY = 36
MIN_VERSION = 0
MAX_VERSION = 2

AFTER_AUTHENTICATION = "SaslAuthenticate request received after successful authentication"


def _response(ctx: RequestContext, error: ErrorCode, message: str | None) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    return b.SaslAuthenticateResponse(
        error_code=error,
        error_message=message,
        auth_bytes=b"",
        session_lifetime=datetime.timedelta(0),
    )


def handle(ctx: RequestContext, request: Any) -> Any:
    return _response(ctx, ErrorCode.illegal_sasl_state, AFTER_AUTHENTICATION)


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    return _response(ctx, error, error_message(error))
