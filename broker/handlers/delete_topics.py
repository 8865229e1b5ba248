"""DeleteTopics (key 20): remove topics by name (v1+) or by topic id (v6+).

As Kafka: an unknown name is UNKNOWN_TOPIC_OR_PARTITION, an unknown id
UNKNOWN_TOPIC_ID; with ``delete.topic.enable=false`` every topic is refused with
TOPIC_DELETION_DISABLED (INVALID_REQUEST before v3, which lacks that code); a topic
named twice, or a v6 entry with both a name and an id (or neither), is INVALID_REQUEST.
Each broker's replica manager drops the partitions and deletes their logs when the
cluster metadata announces the deletion, so parked fetches and produces on them are
woken at once.

Differences from Kafka: the topic is gone from every broker when the response leaves,
so ``timeout`` is never waited on. ``__consumer_offsets`` cannot be deleted
(INVALID_REQUEST): Kafka lets an authorized admin do it, here the group coordinator
needs it. With an authorizer a topic needs DELETE (else TOPIC_AUTHORIZATION_FAILED). A client with a
``controller_mutation_rate`` takes each topic's partitions from it (KIP-599; from v5
strictly: THROTTLING_QUOTA_EXCEEDED while exhausted).
"""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import OFFSETS_TOPIC, MetadataError
from broker.handlers.base import error_message
from broker.handlers.controller_mutation_common import (
    leave_throttle_time,
    mutation_quota,
    take_permits,
)
from broker.quota.controller_mutation_quota import ControllerMutationQuota
from broker.security.authorizer.authorization import AclOperation, ResourceType, authorize
from broker.server.context import RequestContext
from protocol.builders import response_builder

API_KEY = 20
MIN_VERSION = 1
MAX_VERSION = 6
STRICT_QUOTA_SINCE_VERSION = 5

_NO_UUID = uuid.UUID(int=0)


def handle(ctx: RequestContext, request: Any) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    wanted = _wanted(ctx, request)
    seen: dict[object, int] = {}
    for name, topic_id in wanted:
        key = name if name is not None else topic_id
        seen[key] = seen.get(key, 0) + 1
    quota = mutation_quota(ctx, STRICT_QUOTA_SINCE_VERSION)
    results = []
    for name, topic_id in wanted:
        key = name if name is not None else topic_id
        error = ErrorCode.none
        message: str | None = None
        if seen[key] > 1:
            error, message = ErrorCode.invalid_request, f"Duplicate topic {key} in the request"
        elif _denied(ctx, name, topic_id):
            error = ErrorCode.topic_authorization_failed
        else:
            try:
                name, topic_id = _delete(ctx, name, topic_id, quota)
            except MetadataError as exc:
                error, message = exc.error, exc.message
        results.append(
            b.DeletableTopicResult(
                name=name, topic_id=topic_id, error_code=error, error_message=message
            )
        )
    leave_throttle_time(ctx, quota)
    return b.DeleteTopicsResponse(throttle_time=0, responses=tuple(results))


def _denied(ctx: RequestContext, name: str | None, topic_id: uuid.UUID | None) -> bool:
    """DELETE on the topic (named, or known by its id), with an authorizer."""
    if ctx.services.security.authorizer is None:
        return False
    if name is None and topic_id is not None:
        info = ctx.services.metadata.topic_by_id(topic_id)
        name = info.name if info is not None else None
    return name is not None and not authorize(ctx, AclOperation.DELETE, ResourceType.TOPIC, name)


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    """``error`` for every topic of the request; nothing is deleted."""
    b = response_builder(API_KEY, ctx.api_version)
    return b.DeleteTopicsResponse(
        throttle_time=0,
        responses=tuple(
            b.DeletableTopicResult(
                name=name, topic_id=topic_id, error_code=error, error_message=error_message(error)
            )
            for name, topic_id in _wanted(ctx, request)
        ),
    )


def _wanted(ctx: RequestContext, request: Any) -> list[tuple[str | None, uuid.UUID]]:
    """The topics a request names: (name, id) from v6, names only before."""
    if ctx.api_version >= 6:
        return [(t.name, t.topic_id or _NO_UUID) for t in request.topics]
    return [(name, _NO_UUID) for name in request.topic_names]


def _delete(
    ctx: RequestContext, name: str | None, topic_id: uuid.UUID, quota: ControllerMutationQuota
) -> tuple[str, uuid.UUID]:
    cluster = ctx.services.metadata
    if not ctx.services.config.delete_topic_enable:
        # Kafka: versions before 3 had no TOPIC_DELETION_DISABLED to answer with.
        code = (
            ErrorCode.topic_deletion_disabled if ctx.api_version >= 3 else ErrorCode.invalid_request
        )
        raise MetadataError(code, "Topic deletion is disabled.")
    if (name is None) == (topic_id == _NO_UUID):
        raise MetadataError(
            ErrorCode.invalid_request, "Exactly one of topic name and topic id must be given"
        )
    if name is None:
        info = cluster.topic_by_id(topic_id)
        if info is None:
            raise MetadataError(ErrorCode.unknown_topic_id, f"Topic id {topic_id} does not exist")
        name = info.name
    if name == OFFSETS_TOPIC:
        raise MetadataError(
            ErrorCode.invalid_request, f"The internal topic {OFFSETS_TOPIC} cannot be deleted"
        )
    info = cluster.topics.get(name)
    if info is not None:
        take_permits(quota, len(info.partitions))
    deleted = cluster.delete_topic(name)
    return deleted.name, deleted.topic_id
