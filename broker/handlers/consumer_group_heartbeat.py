"""ConsumerGroupHeartbeat (key 68): KIP-848's join, heartbeat and leave in one API.

The request's fields go to the ``ConsumerGroupCoordinator`` as they are (``None`` for a
field a lightweight heartbeat left out); its answer carries the member id, the member
epoch, the heartbeat interval the broker dictates and, when there is one to send, the
member's assignment by topic id. A heartbeat that changed its group is answered once the
group's records are in ``__consumer_offsets`` (acks=all: it waits in the Produce
purgatory meanwhile, as Kafka's waits for its write); one that changed nothing at once.
The member's own waits (its revocations, its partitions still held by others) are timers
and later heartbeats. While the group's ``__consumer_offsets`` partition loads the
answer is COORDINATOR_LOAD_IN_PROGRESS (``check_coordinator``).

v0 lets the broker generate the member id; v1 (KIP-1082, what librdkafka 2.16 sends)
requires the client's own.

Differences from Kafka: with ``consumer`` left out of ``group.coordinator.rebalance.protocols``
the API is still advertised, and answers UNSUPPORTED_VERSION (Kafka stops advertising it
too); regular-expression subscriptions answer INVALID_REQUEST (phase 2). The id of a
streams group (KIP-1071) is GROUP_ID_NOT_FOUND ("Group g is not a consumer group."), as
Kafka's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from broker.group.consumer import ConsumerGroupHeartbeatParams, ConsumerGroupHeartbeatResult
from broker.handlers.feature_gates import consumer_group_protocol_enabled
from broker.handlers.group_common import answer_when_called, group_denied
from broker.server.context import RequestContext
from protocol.builders import response_builder

API_KEY = 68
MIN_VERSION = 0
MAX_VERSION = 1


def heartbeat_params(ctx: RequestContext, request: Any) -> ConsumerGroupHeartbeatParams:
    """The request's fields, whatever its version, and what its context adds."""
    owned = request.topic_partitions
    rebalance = request.rebalance_timeout
    names = request.subscribed_topic_names
    return ConsumerGroupHeartbeatParams(
        group_id=request.group_id,
        member_id=request.member_id,
        member_epoch=int(request.member_epoch),
        api_version=ctx.api_version,
        instance_id=request.instance_id,
        rack_id=request.rack_id,
        rebalance_timeout_ms=int(rebalance.total_seconds() * 1000),
        subscribed_topic_names=tuple(names) if names is not None else None,
        # v1+ (Kafka: "Version 1 adds SubscribedTopicRegex"); a v0 request has no field
        subscribed_topic_regex=getattr(request, "subscribed_topic_regex", None),
        server_assignor=request.server_assignor,
        owned_topic_partitions=(
            tuple((tp.topic_id, tuple(int(p) for p in tp.partitions)) for tp in owned)
            if owned is not None
            else None
        ),
        client_id=ctx.header.client_id or "",
        client_host="/" + ctx.connection.client_host,
    )


def handle(ctx: RequestContext, request: Any) -> Any:
    if group_denied(ctx, request.group_id):
        return error_response(ctx, request, ErrorCode.group_authorization_failed)
    coordinator = ctx.services.coordinators.consumer_group
    if not consumer_group_protocol_enabled(ctx):
        return error_response(ctx, request, ErrorCode.unsupported_version)
    if not request.group_id:
        return _response(
            ctx,
            ConsumerGroupHeartbeatResult(
                error=ErrorCode.invalid_request, error_message="GroupId can't be empty."
            ),
        )
    error = ctx.services.coordinators.group_metadata_manager.check_coordinator(request.group_id)
    if error is not ErrorCode.none:
        return error_response(ctx, request, error)
    if ctx.services.coordinators.streams_group.is_streams_group(request.group_id):
        return _response(
            ctx,
            ConsumerGroupHeartbeatResult(
                error=ErrorCode.group_id_not_found,
                error_message=f"Group {request.group_id} is not a consumer group.",
            ),
        )
    params = heartbeat_params(ctx, request)

    def start(respond: Callable[[ConsumerGroupHeartbeatResult], None]) -> None:
        coordinator.heartbeat(params, respond, parked_request=ctx)

    return answer_when_called(start, lambda result: _response(ctx, result))


def _response(ctx: RequestContext, result: ConsumerGroupHeartbeatResult) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    assignment = None
    if result.assignment is not None:
        assignment = b.Assignment(
            topic_partitions=tuple(
                b.TopicPartitions(topic_id=topic_id, partitions=tuple(partitions))
                for topic_id, partitions in result.topic_partitions()
            )
        )
    return b.ConsumerGroupHeartbeatResponse(
        throttle_time=0,
        error_code=result.error,
        error_message=result.error_message,
        member_id=result.member_id,
        member_epoch=result.member_epoch,
        heartbeat_interval=result.heartbeat_interval_ms,
        assignment=assignment,
    )


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    return _response(ctx, ConsumerGroupHeartbeatResult(error=error))
