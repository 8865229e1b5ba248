"""JoinGroup (key 11): join or rejoin a group; parks in the Rebalance purgatory.

From v4 a new member without an id is answered MEMBER_ID_REQUIRED with its id and must
rejoin with it (KIP-394). The coordinator records where a parked JoinGroup waits: the
Rebalance purgatory while the group gathers, or the Produce purgatory when a static
member's rejoin waits for its group-metadata append. Differences from Kafka: none known
in the classic protocol.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from broker.group import JoinGroupParams, JoinGroupResult
from broker.handlers.group_common import answer_when_called, group_denied
from broker.server.context import RequestContext
from protocol.builders import response_builder

API_KEY = 11
MIN_VERSION = 0
MAX_VERSION = 9


def _response(ctx: RequestContext, result: JoinGroupResult) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    return b.JoinGroupResponse(
        throttle_time=0,
        error_code=result.error,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name or "",
        leader=result.leader_id,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=tuple(
            b.JoinGroupResponseMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                metadata=m.metadata,
            )
            for m in result.members
        ),
    )


def join_group_params(ctx: RequestContext, request: Any) -> JoinGroupParams:
    """The request's fields, whatever its version, and what its context adds."""
    session_ms = int(request.session_timeout.total_seconds() * 1000)
    rebalance = getattr(request, "rebalance_timeout", None)
    return JoinGroupParams(
        group_id=request.group_id,
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        session_timeout_ms=session_ms,
        # v0 has no rebalance timeout: the session timeout stands in, as in Kafka.
        rebalance_timeout_ms=(
            int(rebalance.total_seconds() * 1000) if rebalance is not None else session_ms
        ),
        protocol_type=request.protocol_type,
        protocols=tuple((p.name, bytes(p.metadata)) for p in request.protocols),
        client_id=ctx.header.client_id or "",
        client_host="/" + ctx.connection.client_host,
        require_known_member_id=ctx.api_version >= 4,
        support_skipping_assignment=ctx.api_version >= 9,
        reason=getattr(request, "reason", None),
    )


def handle(ctx: RequestContext, request: Any) -> Any:
    if group_denied(ctx, request.group_id):
        return error_response(ctx, request, ErrorCode.group_authorization_failed)
    error = ctx.services.coordinators.group_metadata_manager.check_coordinator(request.group_id)
    if error is not ErrorCode.none:
        return error_response(ctx, request, error)
    params = join_group_params(ctx, request)

    def start(callback: Callable[[JoinGroupResult], None]) -> None:
        ctx.services.coordinators.group.handle_join_group(params, callback, ctx)

    def build(result: JoinGroupResult) -> Any:
        return _response(ctx, result)

    return answer_when_called(start, build)


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    return _response(ctx, JoinGroupResult(member_id=str(request.member_id or ""), error=error))
