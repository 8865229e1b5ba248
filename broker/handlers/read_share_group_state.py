"""ReadShareGroupState (key 84): a share partition's new leader reads its durable state
from the share coordinator (inter-broker, KIP-932).

Answered from the coordinator's memory: state epoch, start offset and state batches; a
key without state reads as uninitialised (start offset -1, state epoch 0, as Kafka 4.1).
A newer leader epoch than recorded is recorded (an update record); an older one is
FENCED_LEADER_EPOCH. NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS as the coordinator
says; UNKNOWN_TOPIC_OR_PARTITION for a partition the metadata does not have.
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

API_KEY = 84
MIN_VERSION = 0
MAX_VERSION = 0


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
            error, message, state = coordinator.read_state(key, int(p.leader_epoch))
        parts.append(
            (
                key,
                b.PartitionResult(
                    partition=key.partition,
                    error_code=error,
                    error_message=message,
                    state_epoch=state.state_epoch,
                    start_offset=state.start_offset,
                    state_batches=tuple(
                        b.StateBatch(
                            first_offset=s.first_offset,
                            last_offset=s.last_offset,
                            delivery_state=s.delivery_state,
                            delivery_count=s.delivery_count,
                        )
                        for s in state.state_batches
                    ),
                ),
            )
        )
    return b.ReadShareGroupStateResponse(
        results=tuple(
            b.ReadStateResult(topic_id=topic_id, partitions=tuple(ps))
            for topic_id, ps in by_topic(parts).items()
        )
    )


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    return b.ReadShareGroupStateResponse(
        results=tuple(
            b.ReadStateResult(
                topic_id=t.topic_id,
                partitions=tuple(
                    b.PartitionResult(
                        partition=int(p.partition),
                        error_code=error,
                        error_message=None,
                        state_epoch=0,
                        start_offset=-1,
                        state_batches=(),
                    )
                    for p in t.partitions
                ),
            )
            for t in request.topics
        )
    )
