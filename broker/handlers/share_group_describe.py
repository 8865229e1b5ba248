"""ShareGroupDescribe (key 77): a share group's epochs, assignor and members (KIP-932).

Each member comes with its assignment by topic id and name. A group id this broker does
not coordinate gets the coordinator's error; one it does not know as a share group,
GROUP_ID_NOT_FOUND, as Kafka answers.

Differences from Kafka: authorized operations are never computed (no authorizer).

With an authorizer, a group the principal may not DESCRIBE is GROUP_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.group.share import ShareGroup
from broker.group.share.share_group import Assignment
from broker.handlers.base import AUTHORIZATION_MESSAGES
from broker.handlers.group_common import group_denied
from broker.security.authorizer.authorization import AclOperation
from broker.server.context import RequestContext
from protocol.builders import Builder, response_builder

API_KEY = 77
MIN_VERSION = 1
MAX_VERSION = 1

_OPERATIONS_OMITTED = -2147483648  # Kafka's AUTHORIZED_OPERATIONS_OMITTED
SIMPLE_ASSIGNOR = "simple"


def _assignment(ctx: RequestContext, b: Builder, assignment: Assignment) -> Any:
    metadata = ctx.services.metadata
    topics = []
    for topic_id, partitions in sorted(assignment.items(), key=lambda kv: str(kv[0])):
        info = metadata.topic_by_id(topic_id)
        topics.append(
            b.TopicPartitions(
                topic_id=topic_id,
                topic_name=info.name if info is not None else "",
                partitions=tuple(sorted(partitions)),
            )
        )
    return b.Assignment(topic_partitions=tuple(topics))


def _described(ctx: RequestContext, b: Builder, group: ShareGroup) -> Any:
    members = tuple(
        b.Member(
            member_id=m.member_id,
            rack_id=m.rack_id,
            member_epoch=m.member_epoch,
            client_id=m.client_id,
            client_host=m.client_host,
            subscribed_topic_names=m.subscribed_topic_names,
            assignment=_assignment(ctx, b, m.assignment),
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
        authorized_operations=_OPERATIONS_OMITTED,
    )


def _group_error(b: Builder, group_id: str, error: ErrorCode, message: str | None) -> Any:
    return b.DescribedGroup(
        error_code=error,
        error_message=message,
        group_id=group_id,
        group_state="",
        group_epoch=-1,
        assignment_epoch=-1,
        assignor_name="",
        members=(),
        authorized_operations=_OPERATIONS_OMITTED,
    )


GROUP_AUTHORIZATION_FAILED = AUTHORIZATION_MESSAGES[ErrorCode.group_authorization_failed]


def handle(ctx: RequestContext, request: Any) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    coordinator = ctx.services.coordinators.share_group
    manager = ctx.services.coordinators.group_metadata_manager
    groups = []
    for group_id in request.group_ids:
        if group_denied(ctx, group_id, AclOperation.DESCRIBE):
            groups.append(
                _group_error(
                    b, group_id, ErrorCode.group_authorization_failed, GROUP_AUTHORIZATION_FAILED
                )
            )
            continue
        error = manager.check_coordinator(group_id)
        if error is not ErrorCode.none:
            groups.append(_group_error(b, group_id, error, None))
            continue
        group = coordinator.group(group_id)
        if group is None:
            groups.append(
                _group_error(
                    b,
                    group_id,
                    ErrorCode.group_id_not_found,
                    f"Group {group_id} not found.",
                )
            )
            continue
        groups.append(_described(ctx, b, group))
    return b.ShareGroupDescribeResponse(throttle_time=0, groups=tuple(groups))


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    return b.ShareGroupDescribeResponse(
        throttle_time=0,
        groups=tuple(_group_error(b, g, error, None) for g in request.group_ids),
    )
