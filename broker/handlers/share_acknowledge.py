"""ShareAcknowledge (key 79): a share group member's acknowledgements, without a fetch.

The request continues the member's share session (it cannot open one: epoch 0 is
INVALID_SHARE_SESSION_EPOCH; SHARE_SESSION_NOT_FOUND without a session; -1 closes the
session once the acknowledgements are applied, releasing what the member still holds).
Each partition's batches are applied all or nothing by its share partition: ACCEPT,
RELEASE, REJECT (and GAP), RENEW from v2; offsets not acquired by the member are
INVALID_RECORD_STATE, malformed batches INVALID_REQUEST, and nothing changes. The answer
waits until the share state the acknowledgements changed is written to the share
coordinator (as Kafka's; a write that fails is the partition's error). At
``share.version`` 2 a REJECTed record of a group with a dead-letter queue (KIP-1191) is
ARCHIVING until it is written there; the answer does not wait for that write.

Differences from Kafka: those of ``SharePartitionManager``; NodeEndpoints are not filled in.

With an authorizer, READ on the group (else GROUP_AUTHORIZATION_FAILED at the top); the
topics' READ is not checked (Kafka's is).
"""

from __future__ import annotations

import asyncio
from typing import Any

from kio.schema.errors import ErrorCode

from broker.handlers.base import AUTHORIZATION_MESSAGES
from broker.handlers.feature_gates import share_groups_enabled
from broker.handlers.group_common import group_denied
from broker.handlers.share_common import (
    Acknowledgements,
    RequestedPartitions,
    acknowledge_all,
    check_ids,
    current_leader,
    lock_timeout_ms,
    read_partitions,
)
from broker.server.context import RequestContext
from broker.share.share_session import FINAL_EPOCH
from protocol.builders import response_builder

API_KEY = 79
MIN_VERSION = 1
MAX_VERSION = 2


def handle(ctx: RequestContext, request: Any) -> Any:
    services = ctx.services
    if not share_groups_enabled(ctx):
        return error_response(ctx, request, ErrorCode.unsupported_version)
    if group_denied(ctx, str(request.group_id)):
        denied = ErrorCode.group_authorization_failed
        return _top_level(ctx, denied, AUTHORIZATION_MESSAGES[denied])
    bad = check_ids(request)
    if bad is not None:
        return _top_level(ctx, ErrorCode.invalid_request, bad)
    manager = services.share_partition_manager
    key = (str(request.group_id), str(request.member_id))
    epoch = int(request.share_session_epoch)
    requested = read_partitions(ctx, request)
    error, _ = manager.new_context(key, epoch, {}, [], acknowledge_only=True)
    if error is not ErrorCode.none:
        return _top_level(ctx, error, None)
    acks = acknowledge_all(ctx, key[0], key[1], requested)
    if epoch == FINAL_EPOCH:
        manager.close_session(key)
    if acks.durable:
        return _response(ctx, key[0], requested, acks)
    future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    def durable() -> None:
        if not future.done():
            future.set_result(_response(ctx, key[0], requested, acks))

    acks.when_durable(durable)
    return future


def _response(
    ctx: RequestContext, group_id: str, requested: RequestedPartitions, acks: Acknowledgements
) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    by_topic: dict[Any, list[Any]] = {}
    for fp, (ack_error, message) in acks.results.items():
        by_topic.setdefault(fp.topic_id, []).append(
            b.PartitionData(
                partition_index=fp.partition,
                error_code=ack_error,
                error_message=message,
                current_leader=current_leader(ctx, b, fp.topic, fp.partition),
            )
        )
    for topic_id, partition in requested.unknown:
        by_topic.setdefault(topic_id, []).append(
            b.PartitionData(
                partition_index=partition,
                error_code=ErrorCode.unknown_topic_id,
                error_message=None,
                current_leader=current_leader(ctx, b, None, partition),
            )
        )
    return b.ShareAcknowledgeResponse(
        throttle_time=0,
        error_code=ErrorCode.none,
        error_message=None,
        acquisition_lock_timeout=lock_timeout_ms(ctx, group_id),
        responses=tuple(
            b.ShareAcknowledgeTopicResponse(topic_id=topic_id, partitions=tuple(parts))
            for topic_id, parts in by_topic.items()
        ),
        node_endpoints=(),
    )


def _top_level(ctx: RequestContext, error: ErrorCode, message: str | None) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    return b.ShareAcknowledgeResponse(
        throttle_time=0,
        error_code=error,
        error_message=message,
        acquisition_lock_timeout=lock_timeout_ms(ctx),
        responses=(),
        node_endpoints=(),
    )


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    """``error`` for every partition the request names; the top level stays NONE."""
    b = response_builder(API_KEY, ctx.api_version)
    return b.ShareAcknowledgeResponse(
        throttle_time=0,
        error_code=ErrorCode.none,
        error_message=None,
        acquisition_lock_timeout=0,
        responses=tuple(
            b.ShareAcknowledgeTopicResponse(
                topic_id=topic.topic_id,
                partitions=tuple(
                    b.PartitionData(
                        partition_index=int(p.partition_index),
                        error_code=error,
                        error_message=None,
                        current_leader=b.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1),
                    )
                    for p in topic.partitions
                ),
            )
            for topic in request.topics
        ),
        node_endpoints=(),
    )
