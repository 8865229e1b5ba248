"""DeleteShareGroupState (key 86): the group coordinator deletes share partitions' state
at the share coordinator (inter-broker, KIP-932).

Each partition's ShareSnapshot and ShareUpdate keys get tombstones, appended with
acks=all; its answer waits for the append. NOT_COORDINATOR /
COORDINATOR_LOAD_IN_PROGRESS as the coordinator says.
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
from protocol.builders import response_builder

API_KEY = 86
MIN_VERSION = 0
MAX_VERSION = 0


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
        return b.DeleteShareGroupStateResponse(
            results=tuple(
                b.DeleteStateResult(topic_id=topic_id, partitions=tuple(ps))
                for topic_id, ps in by_topic(parts).items()
            )
        )

    answers = PartitionAnswers([key for key, _p in keys], build)
    for key, _p in keys:
        answer = answers.answer_for(key)
        bad = invalid(request, key)
        if bad is not None:
            answer(*bad)
            continue
        coordinator.delete_state(key, answer)
    return answers.response()


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    return b.DeleteShareGroupStateResponse(
        results=tuple(
            b.DeleteStateResult(
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
