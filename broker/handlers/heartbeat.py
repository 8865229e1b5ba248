"""Heartbeat (key 12): keeps a member alive; REBALANCE_IN_PROGRESS tells it to rejoin."""

from __future__ import annotations

from typing import Any

from broker.context import RequestContext
from broker.handlers.group_common import coordinator_of
from protocol.builders import response_builder

API_KEY = 12
MIN_VERSION = 0
MAX_VERSION = 4


def handle(ctx: RequestContext, request: Any) -> Any:
    error = ctx.services.group_coordinator.check_coordinator(request.group_id)
    if error.value == 0:
        error = coordinator_of(ctx).handle_heartbeat(
            request.group_id,
            request.member_id,
            getattr(request, "group_instance_id", None),
            int(request.generation_id),
        )
    b = response_builder(API_KEY, ctx.api_version)
    return b.HeartbeatResponse(throttle_time=0, error_code=error)
