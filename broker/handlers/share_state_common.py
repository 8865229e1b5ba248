"""What the share coordinator's inter-broker APIs (83-87) have in common (KIP-932).

Each request names one group and, per topic id, partitions; each partition is answered
by the share coordinator of its key (``broker/share_coordinator/``) on its own:
NOT_COORDINATOR when this broker is not it, COORDINATOR_LOAD_IN_PROGRESS while it
loads, INVALID_REQUEST for a missing group id or topic id or a negative partition
(Kafka's checks); with an authorizer a principal without CLUSTER_ACTION gets
CLUSTER_AUTHORIZATION_FAILED (``cluster_action_denied``). Answers that wait for a
``__share_group_state`` append come back through ``PartitionAnswers``, which resolves
the handler's future once every partition has its answer.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from broker.handlers.topic_names import NO_UUID
from broker.security.authorizer.authorization import AclOperation, authorize_cluster
from broker.server.context import RequestContext
from broker.share_coordinator.share_coordinator import UNINITIALIZED
from broker.share_coordinator.share_state_records import SharePartitionKey
from protocol.builders import response_builder

PartitionResult = tuple[ErrorCode, str | None]
Keyed = tuple[uuid.UUID, int]


def cluster_action_denied(ctx: RequestContext) -> bool:
    """With an authorizer, these inter-broker APIs need CLUSTER_ACTION on the cluster, as
    Kafka's KafkaApis checks (else CLUSTER_AUTHORIZATION_FAILED for every partition)."""
    return ctx.services.security.authorizer is not None and not authorize_cluster(
        ctx, AclOperation.CLUSTER_ACTION
    )


def partition_keys(request: Any) -> list[tuple[SharePartitionKey, Any]]:
    """(key, the request's partition data) for every partition, in request order."""
    keys: list[tuple[SharePartitionKey, Any]] = []
    for topic in request.topics:
        topic_id = topic.topic_id if isinstance(topic.topic_id, uuid.UUID) else NO_UUID
        for p in topic.partitions:
            keys.append((SharePartitionKey(str(request.group_id), topic_id, int(p.partition)), p))
    return keys


def invalid(request: Any, key: SharePartitionKey) -> PartitionResult | None:
    """Kafka's INVALID_REQUEST checks of one partition."""
    if not request.group_id:
        return ErrorCode.invalid_request, "Group id must be specified and non-empty."
    if key.topic_id == NO_UUID:
        return ErrorCode.invalid_request, "Topic id must be specified."
    if key.partition < 0:
        return ErrorCode.invalid_request, "Partition id must be non-negative."
    return None


def by_topic(results: list[tuple[SharePartitionKey, Any]]) -> dict[uuid.UUID, list[Any]]:
    grouped: dict[uuid.UUID, list[Any]] = {}
    for key, result in results:
        grouped.setdefault(key.topic_id, []).append(result)
    return grouped


class PartitionAnswers:
    """Collects each partition's (error, message) as the coordinator answers; the
    response is built once all have answered (at once when all answered on the spot)."""

    def __init__(
        self,
        keys: list[SharePartitionKey],
        build: Callable[[dict[Keyed, PartitionResult]], Any],
    ) -> None:
        self._waiting = len(keys)
        self._results: dict[Keyed, PartitionResult] = {}
        self._build = build
        self._future: asyncio.Future[Any] | None = None

    def answer_for(self, key: SharePartitionKey) -> Callable[[ErrorCode, str | None], None]:
        def answer(error: ErrorCode, message: str | None) -> None:
            self._results[(key.topic_id, key.partition)] = (error, message)
            self._waiting -= 1
            if self._waiting == 0 and self._future is not None and not self._future.done():
                self._future.set_result(self._build(self._results))

        return answer

    def response(self) -> Any:
        """The response, or a future of it while appends are under way."""
        if self._waiting <= 0:
            return self._build(self._results)
        self._future = asyncio.get_running_loop().create_future()
        return self._future


Answer = Callable[[ErrorCode, str | None], None]


#: kio's class names of an API's response and of its per-topic result.
Names = tuple[str, str]


def _response(b: Any, names: Names, parts: list[tuple[SharePartitionKey, Any]]) -> Any:
    """The response of per-partition results, grouped by topic."""
    result = getattr(b, names[1])
    return getattr(b, names[0])(
        results=tuple(
            result(topic_id=topic_id, partitions=tuple(ps))
            for topic_id, ps in by_topic(parts).items()
        )
    )


def serve_appends(
    ctx: RequestContext,
    request: Any,
    api_key: int,
    names: Names,
    call: Callable[[SharePartitionKey, Any, Answer], None],
) -> Any:
    """The skeleton of the APIs whose partitions answer once their append is acknowledged
    (Initialize, Write, Delete): ``call(key, partition data, answer)`` per valid partition,
    the response (or a future of it) once every partition has answered."""
    if cluster_action_denied(ctx):
        return error_response(ctx, request, api_key, names, ErrorCode.cluster_authorization_failed)
    keys = partition_keys(request)
    b = response_builder(api_key, ctx.api_version)

    def build(results: dict[Keyed, PartitionResult]) -> Any:
        parts = []
        for key, _p in keys:
            error, message = results[(key.topic_id, key.partition)]
            parts.append(
                (
                    key,
                    b.PartitionResult(
                        partition=key.partition, error_code=error, error_message=message
                    ),
                )
            )
        return _response(b, names, parts)

    answers = PartitionAnswers([key for key, _p in keys], build)
    for key, p in keys:
        answer = answers.answer_for(key)
        bad = invalid(request, key)
        if bad is not None:
            answer(*bad)
        else:
            call(key, p, answer)
    return answers.response()


def serve_reads(
    ctx: RequestContext,
    request: Any,
    api_key: int,
    names: Names,
    read: Callable[[SharePartitionKey, Any], tuple[ErrorCode, str | None, Any]],
    fields: Callable[[Any, Any], dict[str, Any]],
) -> Any:
    """The skeleton of the read APIs (Read, ReadSummary), answered at once:
    ``read(key, partition data) -> (error, message, state)`` per valid partition (an
    invalid one reads as uninitialised), ``fields(builder, state)`` the partition result's
    own fields."""
    if cluster_action_denied(ctx):
        return error_response(ctx, request, api_key, names, ErrorCode.cluster_authorization_failed)
    b = response_builder(api_key, ctx.api_version)
    parts = []
    for key, p in partition_keys(request):
        bad = invalid(request, key)
        error, message, state = (bad[0], bad[1], UNINITIALIZED) if bad else read(key, p)
        result = b.PartitionResult(
            partition=key.partition, error_code=error, error_message=message, **fields(b, state)
        )
        parts.append((key, result))
    return _response(b, names, parts)


def error_response(
    ctx: RequestContext, request: Any, api_key: int, names: Names, error: ErrorCode
) -> Any:
    """Every partition of the request answered ``error`` (a read's state as uninitialised:
    fields a version lacks are dropped by the builder)."""
    b = response_builder(api_key, ctx.api_version)
    uninitialised = {
        "state_epoch": 0,
        "leader_epoch": -1,
        "start_offset": -1,
        "state_batches": (),
        "delivery_complete_count": -1,
    }
    parts = [
        (
            key,
            b.PartitionResult(
                partition=int(p.partition), error_code=error, error_message=None, **uninitialised
            ),
        )
        for key, p in partition_keys(request)
    ]
    return _response(b, names, parts)
