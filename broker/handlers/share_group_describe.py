"""ShareGroupDescribe (key 77): a share group's epochs, assignor and members (KIP-932).

Each member comes with its assignment by topic id and name. A group id this broker does
not coordinate gets the coordinator's error; one it does not know as a share group,
GROUP_ID_NOT_FOUND, as Kafka answers.

Differences from Kafka: authorized operations are never computed (no authorizer).

With an authorizer, a group the principal may not DESCRIBE is GROUP_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from kio.schema.errors import ErrorCode

from broker.group.consumer.errors import ApiError
from broker.group.share import ShareGroup
from broker.handlers.group_describe import (
    OPERATIONS_OMITTED,
    assignment_of,
    describe_each,
    failed_group,
)
from broker.server.context import RequestContext
from protocol.builders import Builder, response_builder

API_KEY = 77
MIN_VERSION = 1
MAX_VERSION = 1

SIMPLE_ASSIGNOR = "simple"


def _described(ctx: RequestContext, b: Builder, group: ShareGroup) -> Any:
    members = tuple(
        b.Member(
            member_id=m.member_id,
            rack_id=m.rack_id,
            member_epoch=m.member_epoch,
            client_id=m.client_id,
            client_host=m.client_host,
            subscribed_topic_names=m.subscribed_topic_names,
            assignment=assignment_of(ctx, b, m.assignment),
        )
        for m in sorted(group.members.values(), key=lambda m: m.member_id)
    )
    return b.DescribedGroup(
        error_code=ErrorCode.none,
        error_message=None,
        group_id=group.group_id,
        group_state=group.state.value,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor_name=SIMPLE_ASSIGNOR,
        members=members,
        authorized_operations=OPERATIONS_OMITTED,
    )


def _group_error(b: Builder, group_id: str, error: ErrorCode, message: str | None) -> Any:
    return failed_group(b, group_id, error, message, assignor_name="")


def handle(ctx: RequestContext, request: Any) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    coordinator = ctx.services.coordinators.share_group

    def described(group_id: str) -> Any:
        group = coordinator.group(group_id)
        if group is None:
            raise ApiError(ErrorCode.group_id_not_found, f"Group {group_id} not found.")
        return _described(ctx, b, group)

    groups = describe_each(ctx, request.group_ids, described, partial(_group_error, b))
    return b.ShareGroupDescribeResponse(throttle_time=0, groups=groups)


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    return b.ShareGroupDescribeResponse(
        throttle_time=0,
        groups=tuple(_group_error(b, g, error, None) for g in request.group_ids),
    )
