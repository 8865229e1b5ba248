"""ReadShareGroupStateSummary (key 87): a share partition's state epoch, leader epoch and
start offset, without its batches (inter-broker, KIP-932: what
DescribeShareGroupOffsets reads).

The errors are ReadShareGroupState's. Differences from Kafka: v1's
DeliveryCompleteCount is answered as -1 (not kept).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.context import RequestContext
from broker.handlers.share_state_common import (
    by_topic,
    cluster_action_denied,
    invalid,
    partition_keys,
)
from broker.share_coordinator.share_coordinator import UNINITIALIZED
from protocol.builders import response_builder

API_KEY = 87
MIN_VERSION = 0
MAX_VERSION = 1


def handle(ctx: RequestContext, request: Any) -> Any:
    if cluster_action_denied(ctx):
        return error_response(ctx, request, ErrorCode.cluster_authorization_failed)
    coordinator = ctx.services.share_coordinator
    b = response_builder(API_KEY, ctx.api_version)
    parts = []
    for key, p in partition_keys(request):
        bad = invalid(request, key)
        if bad is not None:
            error, message, state = bad[0], bad[1], UNINITIALIZED
        else:
            error, message, state = coordinator.read_state_summary(key, int(p.leader_epoch))
        parts.append(
            (
                key,
                b.PartitionResult(
                    partition=key.partition,
                    error_code=error,
                    error_message=message,
                    state_epoch=state.state_epoch,
                    leader_epoch=state.leader_epoch,
                    start_offset=state.start_offset,
                    delivery_complete_count=-1,
                ),
            )
        )
    return b.ReadShareGroupStateSummaryResponse(
        results=tuple(
            b.ReadStateSummaryResult(topic_id=topic_id, partitions=tuple(ps))
            for topic_id, ps in by_topic(parts).items()
        )
    )


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    return b.ReadShareGroupStateSummaryResponse(
        results=tuple(
            b.ReadStateSummaryResult(
                topic_id=t.topic_id,
                partitions=tuple(
                    b.PartitionResult(
                        partition=int(p.partition),
                        error_code=error,
                        error_message=None,
                        state_epoch=0,
                        leader_epoch=-1,
                        start_offset=-1,
                        delivery_complete_count=-1,
                    )
                    for p in t.partitions
                ),
            )
            for t in request.topics
        )
    )
