"""Heartbeat (key 12): keeps a member alive; REBALANCE_IN_PROGRESS tells it to rejoin.

While the group's ``__consumer_offsets`` partition is still loading, the answer is NONE, as
Kafka's (the classic GroupCoordinator and Kafka 4's GroupCoordinatorService alike: "the
group is still loading, so respond blindly"). The member keeps its generation, and once the
load is done the coordinator expects its heartbeats like anyone else's; a member the loaded
group does not know hears UNKNOWN_MEMBER_ID then and rejoins. COORDINATOR_LOAD_IN_PROGRESS
here would be an error no client expects from a heartbeat: aiokafka's heartbeat task dies
of it and the consumer stays wedged.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.handlers.group_common import group_denied
from broker.server.context import RequestContext
from protocol.builders import response_builder

API_KEY = 12
MIN_VERSION = 0
MAX_VERSION = 4


def handle(ctx: RequestContext, request: Any) -> Any:
    if group_denied(ctx, request.group_id):
        return error_response(ctx, request, ErrorCode.group_authorization_failed)
    error = ctx.services.coordinators.group_metadata_manager.check_coordinator(request.group_id)
    if error is ErrorCode.coordinator_load_in_progress:
        error = ErrorCode.none
    elif error is ErrorCode.none:
        error = ctx.services.coordinators.group.handle_heartbeat(
            request.group_id,
            request.member_id,
            getattr(request, "group_instance_id", None),
            int(request.generation_id),
        )
    return error_response(ctx, request, error)


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    return b.HeartbeatResponse(throttle_time=0, error_code=error)
