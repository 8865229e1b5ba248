"""JoinGroup (key 11): join or rejoin a group; parks in the Rebalance purgatory.

From v4 a new member without an id is answered MEMBER_ID_REQUIRED with its id and must
rejoin with it (KIP-394). Differences from Kafka: none known in the classic protocol.
"""

from __future__ import annotations

from typing import Any

from broker.context import RequestContext
from broker.purgatories import PurgatoryName
from broker.group import JoinGroupResult
from broker.handlers.group_common import answer_when_called, coordinator_of
from protocol.builders import response_builder

API_KEY = 11
MIN_VERSION = 0
MAX_VERSION = 9


def handle(ctx: RequestContext, request: Any) -> Any:
    b = response_builder(API_KEY, ctx.api_version)

    def build(result: JoinGroupResult) -> Any:
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

    error = ctx.services.group_coordinator.check_coordinator(request.group_id)
    if error.value != 0:
        return build(JoinGroupResult(member_id=request.member_id, error=error))
    session_ms = int(request.session_timeout.total_seconds() * 1000)
    rebalance = getattr(request, "rebalance_timeout", None)
    rebalance_ms = int(rebalance.total_seconds() * 1000) if rebalance is not None else session_ms
    return answer_when_called(
        ctx,
        PurgatoryName.REBALANCE,
        lambda callback: coordinator_of(ctx).handle_join_group(
            request.group_id,
            request.member_id,
            getattr(request, "group_instance_id", None),
            ctx.api_version >= 4,
            ctx.header.client_id or "",
            "/" + ctx.connection.client_host,
            rebalance_ms,
            session_ms,
            request.protocol_type,
            [(p.name, bytes(p.metadata)) for p in request.protocols],
            callback,
            support_skipping_assignment=ctx.api_version >= 9,
            reason=getattr(request, "reason", None),
        ),
        build,
    )
