"""Heartbeat (key 12): keeps a member alive; REBALANCE_IN_PROGRESS tells it to rejoin."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.context import RequestContext
from protocol.builders import response_builder

API_KEY = 12
MIN_VERSION = 0
MAX_VERSION = 4


def handle(ctx: RequestContext, request: Any) -> Any:
    error = ctx.services.group_metadata_manager.check_coordinator(request.group_id)
    if error is ErrorCode.none:
        error = ctx.services.group_coordinator.handle_heartbeat(
            request.group_id,
            request.member_id,
            getattr(request, "group_instance_id", None),
            int(request.generation_id),
        )
    return error_response(ctx, request, error)


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    return b.HeartbeatResponse(throttle_time=0, error_code=error)
