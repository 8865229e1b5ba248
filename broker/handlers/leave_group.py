"""LeaveGroup (key 13): one member (v0-2) or several at once (v3+, KIP-345)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.group import LeaveMemberResult
from broker.handlers.group_common import group_denied
from broker.server.context import RequestContext
from protocol.builders import response_builder

API_KEY = 13
MIN_VERSION = 0
MAX_VERSION = 5


def _response(ctx: RequestContext, error: ErrorCode, members: list[LeaveMemberResult]) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    return b.LeaveGroupResponse(
        throttle_time=0,
        error_code=error,
        members=tuple(
            b.MemberResponse(
                member_id=m.member_id, group_instance_id=m.group_instance_id, error_code=m.error
            )
            for m in members
        )
        if ctx.api_version >= 3
        else (),
    )


def handle(ctx: RequestContext, request: Any) -> Any:
    if group_denied(ctx, request.group_id):
        return error_response(ctx, request, ErrorCode.group_authorization_failed)
    if ctx.api_version >= 3:
        members = [(m.member_id, m.group_instance_id) for m in request.members]
    else:
        members = [(request.member_id, None)]
    error = ctx.services.coordinators.group_metadata_manager.check_coordinator(request.group_id)
    if error is not ErrorCode.none:
        return error_response(ctx, request, error)
    outcome = ctx.services.coordinators.group.handle_leave_group(request.group_id, members)
    error = outcome.error
    if ctx.api_version < 3 and error is ErrorCode.none and outcome.members:
        error = outcome.members[0].error
    return _response(ctx, error, outcome.members)


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    """The error at the top level, no member results (Kafka's ``getErrorResponse``)."""
    return _response(ctx, error, [])
