"""OffsetDelete (key 47): drop a group's committed offsets for partitions it no longer
reads (GROUP_SUBSCRIBED_TO_TOPIC for a topic its live members subscribe to). As in
Kafka, an Empty group left without offsets goes with them.

With an authorizer, DELETE on the group (else GROUP_AUTHORIZATION_FAILED); the topics'
READ is not checked (Kafka's is).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.group import TopicPartition, group_admin
from broker.handlers.base import partition_errors_by_topic
from broker.handlers.group_common import group_denied
from broker.security.authorizer.authorization import AclOperation
from broker.server.context import RequestContext
from protocol.builders import response_builder

API_KEY = 47
MIN_VERSION = 0
MAX_VERSION = 0


def handle(ctx: RequestContext, request: Any) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    wanted = [(t.name, int(p.partition_index)) for t in request.topics for p in t.partitions]
    manager = ctx.services.coordinators.group_metadata_manager
    if group_denied(ctx, request.group_id, AclOperation.DELETE):
        return error_response(ctx, request, ErrorCode.group_authorization_failed)
    error = manager.check_coordinator(request.group_id)
    if error is not ErrorCode.none:
        return error_response(ctx, request, error)
    error, per_partition = group_admin.handle_delete_offsets(manager, request.group_id, wanted)
    if error is not ErrorCode.none:
        return error_response(ctx, request, error)
    return b.OffsetDeleteResponse(
        error_code=ErrorCode.none,
        throttle_time=0,
        topics=partition_errors_by_topic(
            ((tp, per_partition.get(TopicPartition(*tp), ErrorCode.none)) for tp in wanted),
            b.OffsetDeleteResponsePartition,
            b.OffsetDeleteResponseTopic,
        ),
    )


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    """``error`` at the top level, no topics (Kafka's ``getErrorResponse``)."""
    b = response_builder(API_KEY, ctx.api_version)
    return b.OffsetDeleteResponse(error_code=error, throttle_time=0, topics=())
