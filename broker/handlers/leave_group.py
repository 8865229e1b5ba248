"""LeaveGroup (key 13): one member (v0-2) or several at once (v3+, KIP-345)."""

from __future__ import annotations

from typing import Any

from broker.context import RequestContext
from broker.handlers.group_common import coordinator_of
from protocol.builders import response_builder

API_KEY = 13
MIN_VERSION = 0
MAX_VERSION = 5


def handle(ctx: RequestContext, request: Any) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    if ctx.api_version >= 3:
        members = [(m.member_id, m.group_instance_id) for m in request.members]
    else:
        members = [(request.member_id, None)]
    error = ctx.services.group_coordinator.check_coordinator(request.group_id)
    results: list[Any] = []
    if error.value == 0:
        outcome = coordinator_of(ctx).handle_leave_group(request.group_id, members)
        error = outcome.error
        results = outcome.members
        if ctx.api_version < 3 and error.value == 0 and results:
            error = results[0].error
    return b.LeaveGroupResponse(
        throttle_time=0,
        error_code=error,
        members=tuple(
            b.MemberResponse(
                member_id=m.member_id, group_instance_id=m.group_instance_id, error_code=m.error
            )
            for m in results
        )
        if ctx.api_version >= 3
        else (),
    )
