"""SyncGroup (key 14): the leader hands out assignments; members wait for theirs."""

from __future__ import annotations

from typing import Any

from broker.context import RequestContext
from broker.purgatories import PurgatoryName
from broker.group import SyncGroupResult
from broker.handlers.group_common import answer_when_called, coordinator_of
from protocol.builders import response_builder

API_KEY = 14
MIN_VERSION = 0
MAX_VERSION = 5


def handle(ctx: RequestContext, request: Any) -> Any:
    b = response_builder(API_KEY, ctx.api_version)

    def build(result: SyncGroupResult) -> Any:
        return b.SyncGroupResponse(
            throttle_time=0,
            error_code=result.error,
            protocol_type=result.protocol_type,
            protocol_name=result.protocol_name,
            assignment=result.assignment,
        )

    error = ctx.services.group_coordinator.check_coordinator(request.group_id)
    if error.value != 0:
        return build(SyncGroupResult(error=error))
    assignments = {a.member_id: bytes(a.assignment) for a in request.assignments}
    return answer_when_called(
        ctx,
        PurgatoryName.REBALANCE,
        lambda callback: coordinator_of(ctx).handle_sync_group(
            request.group_id,
            int(request.generation_id),
            request.member_id,
            getattr(request, "group_instance_id", None),
            assignments,
            callback,
            protocol_type=getattr(request, "protocol_type", None),
            protocol_name=getattr(request, "protocol_name", None),
        ),
        build,
    )
