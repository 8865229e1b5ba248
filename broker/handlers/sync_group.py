"""SyncGroup (key 14): the leader hands out assignments; members wait for theirs.

The coordinator records where a parked SyncGroup waits: a follower in the Rebalance
purgatory (its wait is bounded by the group's DelayedSync), the leader in the Produce
purgatory while its assignment is appended to ``__consumer_offsets`` with acks=all.

While the group's ``__consumer_offsets`` partition is still loading, the answer is
REBALANCE_IN_PROGRESS: the rebalance this SyncGroup belongs to was lost with the failover
(the new coordinator has only what was written), so the member must rejoin, and every
client does so on that error without looking the coordinator up again. This is the classic
coordinator's answer (Kafka 2.0-3.x). Where we differ from Kafka 4: its
GroupCoordinatorService passes COORDINATOR_LOAD_IN_PROGRESS through, which neither the
Java consumer nor aiokafka nor kafka-python expects from a SyncGroup (they raise "Unexpected
error from SyncGroup"); we keep the answer all of them handle.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from broker.group import SyncGroupResult
from broker.handlers.group_common import answer_when_called, group_denied
from broker.server.context import RequestContext
from protocol.builders import response_builder

API_KEY = 14
MIN_VERSION = 0
MAX_VERSION = 5


def _response(ctx: RequestContext, result: SyncGroupResult) -> Any:
    return response_builder(API_KEY, ctx.api_version).SyncGroupResponse(
        throttle_time=0,
        error_code=result.error,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )


def handle(ctx: RequestContext, request: Any) -> Any:
    if group_denied(ctx, request.group_id):
        return error_response(ctx, request, ErrorCode.group_authorization_failed)
    error = ctx.services.coordinators.group_metadata_manager.check_coordinator(request.group_id)
    if error is ErrorCode.coordinator_load_in_progress:
        return error_response(ctx, request, ErrorCode.rebalance_in_progress)
    if error is not ErrorCode.none:
        return error_response(ctx, request, error)
    assignments = {a.member_id: bytes(a.assignment) for a in request.assignments}

    def start(callback: Callable[[SyncGroupResult], None]) -> None:
        ctx.services.coordinators.group.handle_sync_group(
            request.group_id,
            int(request.generation_id),
            request.member_id,
            getattr(request, "group_instance_id", None),
            assignments,
            callback,
            protocol_type=getattr(request, "protocol_type", None),
            protocol_name=getattr(request, "protocol_name", None),
            parked_request=ctx,
        )

    def build(result: SyncGroupResult) -> Any:
        return _response(ctx, result)

    return answer_when_called(start, build)


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    return _response(ctx, SyncGroupResult(error=error))
