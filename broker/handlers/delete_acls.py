"""DeleteAcls (key 31): no authorizer, so SECURITY_DISABLED for every filter.

As a Kafka broker without ``authorizer.class.name``: the API is advertised and every
request is answered SECURITY_DISABLED, "No Authorizer is configured."
(``handlers/acls.py``).

Differences from Kafka: none while Kafka has no authorizer either; minikafka cannot be
given one. Throttle time 0.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.context import RequestContext
from broker.handlers import acls
from broker.handlers.base import error_message

API_KEY = 31
MIN_VERSION = 1
MAX_VERSION = 3


def handle(ctx: RequestContext, request: Any) -> Any:
    return acls.delete_acls(
        API_KEY, ctx.api_version, request, ErrorCode.security_disabled, acls.NO_AUTHORIZER
    )


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    return acls.delete_acls(API_KEY, ctx.api_version, request, error, error_message(error))
