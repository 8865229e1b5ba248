"""ShareGroupHeartbeat (key 76): a share group member's join, heartbeat and leave (KIP-932).

The request's fields go to the ``ShareGroupCoordinator`` (``broker/group/share/``); the
answer carries the member id, its epoch, the broker's heartbeat interval and, when it
changed or the request was a full one, the member's assignment by topic id (partitions
a member may share with others). While the group's ``__consumer_offsets`` partition
loads, COORDINATOR_LOAD_IN_PROGRESS; on a broker that does not coordinate it,
NOT_COORDINATOR (``check_coordinator``, as the other group APIs).

v1 is what Kafka 4.1+ and librdkafka 2.16 speak (kio has no v0: Kafka 4.0's early-access
version, which Kafka 4.1 removed). With share groups off (``group.share.enable=false``)
the answer is UNSUPPORTED_VERSION.

Differences from Kafka: those of the coordinator (groups in memory only).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.group.share import ShareGroupHeartbeatParams, ShareGroupHeartbeatResult
from broker.handlers.feature_gates import share_groups_enabled
from broker.handlers.group_common import group_denied
from broker.server.context import RequestContext
from protocol.builders import response_builder

API_KEY = 76
MIN_VERSION = 1
MAX_VERSION = 1


def handle(ctx: RequestContext, request: Any) -> Any:
    if group_denied(ctx, request.group_id):
        return error_response(ctx, request, ErrorCode.group_authorization_failed)
    coordinator = ctx.services.coordinators.share_group
    if not share_groups_enabled(ctx):
        return error_response(ctx, request, ErrorCode.unsupported_version)
    if request.group_id:
        error = ctx.services.coordinators.group_metadata_manager.check_coordinator(request.group_id)
        if error is not ErrorCode.none:
            return error_response(ctx, request, error)
    names = request.subscribed_topic_names
    result = coordinator.heartbeat(
        ShareGroupHeartbeatParams(
            group_id=request.group_id,
            member_id=request.member_id,
            member_epoch=int(request.member_epoch),
            rack_id=request.rack_id,
            subscribed_topic_names=tuple(names) if names is not None else None,
            client_id=ctx.header.client_id or "",
            client_host="/" + ctx.connection.client_host,
        )
    )
    return _response(ctx, result)


def _response(ctx: RequestContext, result: ShareGroupHeartbeatResult) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    assignment = None
    if result.assignment is not None:
        assignment = b.Assignment(
            topic_partitions=tuple(
                b.TopicPartitions(topic_id=topic_id, partitions=tuple(partitions))
                for topic_id, partitions in result.topic_partitions()
            )
        )
    return b.ShareGroupHeartbeatResponse(
        throttle_time=0,
        error_code=result.error,
        error_message=result.error_message,
        member_id=result.member_id,
        member_epoch=result.member_epoch,
        heartbeat_interval=result.heartbeat_interval_ms,
        assignment=assignment,
    )


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    return _response(ctx, ShareGroupHeartbeatResult(error=error))
