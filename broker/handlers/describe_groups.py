"""DescribeGroups (key 15): state, protocol and members of groups."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.context import RequestContext
from broker.handlers.group_common import coordinator_of
from protocol.builders import response_builder

API_KEY = 15
MIN_VERSION = 0
MAX_VERSION = 5


def handle(ctx: RequestContext, request: Any) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    service = ctx.services.group_coordinator
    described = []
    for group_id in request.groups:
        error = service.check_coordinator(group_id)
        if error is not ErrorCode.none:
            described.append(
                b.DescribedGroup(
                    error_code=error,
                    group_id=group_id,
                    group_state="",
                    protocol_type="",
                    protocol_data="",
                    members=(),
                    authorized_operations=-2147483648,
                )
            )
            continue
        (summary,) = coordinator_of(ctx).handle_describe_groups(
            [group_id], not_found_as_error=ctx.api_version >= 6
        )
        described.append(
            b.DescribedGroup(
                error_code=summary.error,
                group_id=summary.group_id,
                group_state=summary.state,
                protocol_type=summary.protocol_type,
                protocol_data=summary.protocol,
                members=tuple(
                    b.DescribedGroupMember(
                        member_id=m.member_id,
                        group_instance_id=m.group_instance_id,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        member_metadata=m.metadata,
                        member_assignment=m.assignment,
                    )
                    for m in summary.members
                ),
                authorized_operations=-2147483648,
            )
        )
    return b.DescribeGroupsResponse(throttle_time=0, groups=tuple(described))
