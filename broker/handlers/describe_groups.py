"""DescribeGroups (key 15): state, protocol and members of groups.

Versions 0-6.

Behavior:
- A KIP-848 consumer group, a KIP-932 share group or a KIP-1071 streams group is not a
  classic group: as Kafka 4.2 answers, it is described as unknown (Dead;
  GROUP_ID_NOT_FOUND from v6). ConsumerGroupDescribe, ShareGroupDescribe and
  StreamsGroupDescribe describe them.
- With an authorizer, a group the principal may not DESCRIBE is GROUP_AUTHORIZATION_FAILED.

Version notes:
- v6 (KIP-1043): a group Kafka does not find is GROUP_ID_NOT_FOUND instead of Dead, with
  the message of the group coordinator's ``GroupIdNotFoundException`` ("Group g not
  found.", or "Group g is not a classic group." for a group of another type); an
  authorization failure carries Kafka's message for it.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.group import GroupSummary, group_admin
from broker.handlers.base import AUTHORIZATION_MESSAGES, error_message
from broker.handlers.group_common import group_denied
from broker.security.authorizer.authorization import AclOperation
from broker.server.context import RequestContext
from protocol.builders import Builder, response_builder

API_KEY = 15
MIN_VERSION = 0
MAX_VERSION = 6

# Kafka's AUTHORIZED_OPERATIONS_OMITTED.
_OPERATIONS_OMITTED = -2147483648


def _group_error(b: Builder, group_id: str, error: ErrorCode, message: str | None) -> Any:
    """Kafka's ``DescribeGroupsResponse.groupError``: no state, protocol or members."""
    return b.DescribedGroup(
        error_code=error,
        error_message=message,
        group_id=group_id,
        group_state="",
        protocol_type="",
        protocol_data="",
        members=(),
        authorized_operations=_OPERATIONS_OMITTED,
    )


def _is_other_group_type(ctx: RequestContext, group_id: str) -> bool:
    coordinators = ctx.services.coordinators
    return coordinators.share_group.group(
        group_id
    ) is not None or coordinators.streams_group.is_streams_group(group_id)


def handle(ctx: RequestContext, request: Any) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    manager = ctx.services.coordinators.group_metadata_manager
    described = []
    for group_id in request.groups:
        if group_denied(ctx, group_id, AclOperation.DESCRIBE):
            denied = ErrorCode.group_authorization_failed
            described.append(_group_error(b, group_id, denied, AUTHORIZATION_MESSAGES[denied]))
            continue
        error = manager.check_coordinator(group_id)
        if error is not ErrorCode.none:
            described.append(_group_error(b, group_id, error, None))
            continue
        consumer_groups = ctx.services.coordinators.consumer_group
        if consumer_groups.is_consumer_group(group_id) or _is_other_group_type(ctx, group_id):
            # Not a classic group (the Empty classic group keeping its offsets aside).
            not_found = ErrorCode.group_id_not_found if ctx.api_version >= 6 else ErrorCode.none
            summary = GroupSummary(group_id, not_found, "Dead", "", "")
            message = f"Group {group_id} is not a classic group."
        else:
            (summary,) = group_admin.handle_describe_groups(
                manager, [group_id], not_found_as_error=ctx.api_version >= 6
            )
            message = f"Group {group_id} not found."
        if summary.error is ErrorCode.group_id_not_found:
            described.append(_group_error(b, group_id, summary.error, message))
            continue
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
                authorized_operations=_OPERATIONS_OMITTED,
            )
        )
    return b.DescribeGroupsResponse(throttle_time=0, groups=tuple(described))


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    """``error`` for every group named."""
    b = response_builder(API_KEY, ctx.api_version)
    return b.DescribeGroupsResponse(
        throttle_time=0,
        groups=tuple(
            _group_error(b, group_id, error, error_message(error)) for group_id in request.groups
        ),
    )
