"""What the modern groups' Describe handlers share (ConsumerGroupDescribe,
ShareGroupDescribe, StreamsGroupDescribe): each group id in turn is GROUP_AUTHORIZATION_FAILED
without DESCRIBE on it, else the coordinator's error (NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS), else the group described or the coordinator's refusal
(GROUP_ID_NOT_FOUND), as Kafka's ``KafkaApis`` and ``GroupCoordinatorService`` answer; an
assignment is listed by topic id and name.

Authorized operations are never computed here (Kafka's AUTHORIZED_OPERATIONS_OMITTED).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from broker.group.consumer.errors import ApiError
from broker.handlers.base import AUTHORIZATION_MESSAGES
from broker.handlers.group_common import group_denied
from broker.security.authorizer.authorization import AclOperation
from broker.server.context import RequestContext
from protocol.builders import Builder

OPERATIONS_OMITTED = -2147483648  # Kafka's AUTHORIZED_OPERATIONS_OMITTED

Failed = Callable[[str, ErrorCode, str | None], Any]


def describe_each(
    ctx: RequestContext, group_ids: Iterable[str], described: Callable[[str], Any], failed: Failed
) -> tuple[Any, ...]:
    """Each group's ``DescribedGroup``: ``described(group_id)`` (an ``ApiError`` it raises
    is the group's error), unless the principal may not DESCRIBE it or this broker does
    not coordinate it (``failed(group_id, error, message)``)."""
    manager = ctx.services.coordinators.group_metadata_manager
    groups = []
    for group_id in group_ids:
        if group_denied(ctx, group_id, AclOperation.DESCRIBE):
            denied = ErrorCode.group_authorization_failed
            groups.append(failed(group_id, denied, AUTHORIZATION_MESSAGES[denied]))
            continue
        error = manager.check_coordinator(group_id)
        if error is not ErrorCode.none:
            groups.append(failed(group_id, error, None))
            continue
        try:
            groups.append(described(group_id))
        except ApiError as refused:
            groups.append(failed(group_id, refused.error, refused.message))
    return tuple(groups)


def failed_group(
    b: Builder, group_id: str, error: ErrorCode, message: str | None, **type_fields: Any
) -> Any:
    """The ``DescribedGroup`` of a group that is not described (its type's own empty
    fields in ``type_fields``)."""
    return b.DescribedGroup(
        error_code=error,
        error_message=message,
        group_id=group_id,
        group_state="",
        group_epoch=-1,
        assignment_epoch=-1,
        members=(),
        authorized_operations=OPERATIONS_OMITTED,
        **type_fields,
    )


def assignment_of(
    ctx: RequestContext, b: Builder, assignment: Mapping[uuid.UUID, Collection[int]]
) -> Any:
    """An ``Assignment`` by topic id (in id order), with the topics' names. (Not named
    ``topic_partitions``: a handler module's ``topic_partitions`` is the fault rules' hook
    for APIs whose requests name topics, `broker/handlers/registry.py`.)"""
    metadata = ctx.services.metadata
    topics = []
    for topic_id, partitions in sorted(assignment.items(), key=lambda kv: str(kv[0])):
        info = metadata.topic_by_id(topic_id)
        topics.append(
            b.TopicPartitions(
                topic_id=topic_id,
                topic_name=info.name if info is not None else "",
                partitions=tuple(sorted(partitions)),
            )
        )
    return b.Assignment(topic_partitions=tuple(topics))
