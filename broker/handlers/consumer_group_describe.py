"""ConsumerGroupDescribe (key 69): a KIP-848 group's epochs, assignor and members.

Each member comes with its current assignment and its target assignment, by topic id and
name. A group id this broker does not coordinate gets the coordinator's error; one it
does not know, or one that is a classic group, GROUP_ID_NOT_FOUND, as Kafka answers.

The v1 ``member_type`` (KIP-1099) is 0 for a classic member of the group (one that joined
through JoinGroup: Kafka 4's online migration) and 1 for a KIP-848 member.

Differences from Kafka: authorized operations are never computed. With an authorizer, a
group the principal may not DESCRIBE is GROUP_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from kio.schema.errors import ErrorCode

from broker.group.consumer import ConsumerGroup
from broker.handlers.group_describe import (
    OPERATIONS_OMITTED,
    assignment_of,
    describe_each,
    failed_group,
)
from broker.server.context import RequestContext
from protocol.builders import Builder, response_builder

API_KEY = 69
MIN_VERSION = 0
MAX_VERSION = 1

_CLASSIC_MEMBER_TYPE = 0
_CONSUMER_MEMBER_TYPE = 1


def _described(ctx: RequestContext, b: Builder, group: ConsumerGroup, assignor: str) -> Any:
    members = []
    for member in sorted(group.members.values(), key=lambda m: m.member_id):
        fields: dict[str, Any] = {
            "member_id": member.member_id,
            "instance_id": member.instance_id,
            "rack_id": member.rack_id,
            "member_epoch": member.member_epoch,
            "client_id": member.client_id,
            "client_host": member.client_host,
            "subscribed_topic_names": member.subscribed_topic_names,
            "subscribed_topic_regex": member.subscribed_topic_regex,
            "assignment": assignment_of(ctx, b, member.assigned_partitions),
            "target_assignment": assignment_of(
                ctx, b, group.target_assignment_of(member.member_id)
            ),
        }
        if ctx.api_version >= 1:
            fields["member_type"] = (
                _CLASSIC_MEMBER_TYPE if member.use_classic_protocol else _CONSUMER_MEMBER_TYPE
            )
        members.append(b.Member(**fields))
    return b.DescribedGroup(
        error_code=ErrorCode.none,
        error_message=None,
        group_id=group.group_id,
        group_state=group.state.value,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor_name=assignor,
        members=tuple(members),
        authorized_operations=OPERATIONS_OMITTED,
    )


def _group_error(b: Builder, group_id: str, error: ErrorCode, message: str | None) -> Any:
    return failed_group(b, group_id, error, message, assignor_name="")


def handle(ctx: RequestContext, request: Any) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    coordinator = ctx.services.coordinators.consumer_group

    def described(group_id: str) -> Any:
        group = coordinator.consumer_group(group_id)  # GROUP_ID_NOT_FOUND
        return _described(ctx, b, group, coordinator.assignor_name(group))

    groups = describe_each(ctx, request.group_ids, described, partial(_group_error, b))
    return b.ConsumerGroupDescribeResponse(throttle_time=0, groups=groups)


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    return b.ConsumerGroupDescribeResponse(
        throttle_time=0,
        groups=tuple(_group_error(b, g, error, None) for g in request.group_ids),
    )
