"""WriteShareGroupState (key 85): a share partition leader writes changed state batches
to the share coordinator (inter-broker, KIP-932).

Each partition's write becomes one ``__share_group_state`` record (a ShareUpdate, or a
ShareSnapshot for a key's first write and every
``share.coordinator.snapshot.update.records.per.snapshot`` updates) appended with
acks=all; its answer waits for the append. FENCED_LEADER_EPOCH / FENCED_STATE_EPOCH for
an older epoch than recorded, UNKNOWN_TOPIC_OR_PARTITION for a partition the metadata
does not have, NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS as the coordinator says.

Differences from Kafka: v1's DeliveryCompleteCount is accepted and not kept.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.context import RequestContext
from broker.handlers.share_state_common import (
    Keyed,
    PartitionAnswers,
    PartitionResult,
    by_topic,
    cluster_action_denied,
    invalid,
    partition_keys,
)
from broker.share_coordinator.share_state_records import PersisterStateBatch
from protocol.builders import response_builder

API_KEY = 85
MIN_VERSION = 0
MAX_VERSION = 1


def handle(ctx: RequestContext, request: Any) -> Any:
    if cluster_action_denied(ctx):
        return error_response(ctx, request, ErrorCode.cluster_authorization_failed)
    coordinator = ctx.services.share_coordinator
    keys = partition_keys(request)
    b = response_builder(API_KEY, ctx.api_version)

    def build(results: dict[Keyed, PartitionResult]) -> Any:
        parts = [
            (
                key,
                b.PartitionResult(
                    partition=key.partition,
                    error_code=results[(key.topic_id, key.partition)][0],
                    error_message=results[(key.topic_id, key.partition)][1],
                ),
            )
            for key, _p in keys
        ]
        return b.WriteShareGroupStateResponse(
            results=tuple(
                b.WriteStateResult(topic_id=topic_id, partitions=tuple(ps))
                for topic_id, ps in by_topic(parts).items()
            )
        )

    answers = PartitionAnswers([key for key, _p in keys], build)
    for key, p in keys:
        answer = answers.answer_for(key)
        bad = invalid(request, key)
        if bad is not None:
            answer(*bad)
            continue
        batches = tuple(
            PersisterStateBatch(
                int(s.first_offset),
                int(s.last_offset),
                int(s.delivery_state),
                int(s.delivery_count),
            )
            for s in p.state_batches
        )
        coordinator.write_state(
            key, int(p.state_epoch), int(p.leader_epoch), int(p.start_offset), batches, answer
        )
    return answers.response()


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    return b.WriteShareGroupStateResponse(
        results=tuple(
            b.WriteStateResult(
                topic_id=t.topic_id,
                partitions=tuple(
                    b.PartitionResult(
                        partition=int(p.partition), error_code=error, error_message=None
                    )
                    for p in t.partitions
                ),
            )
            for t in request.topics
        )
    )
