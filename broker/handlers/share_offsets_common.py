"""What AlterShareGroupOffsets (91) and DeleteShareGroupOffsets (92) share: the group's
checks (as Kafka's ``GroupCoordinatorService`` and ``GroupMetadataManager``) and running
the persister's calls for many partitions into one answer."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from broker.handlers.group_common import group_denied
from broker.security.authorizer.authorization import AclOperation, ResourceType, authorize
from broker.server.context import RequestContext

# one persister call: given where to answer, it starts the call
Call = Callable[[Callable[[ErrorCode], None]], None]


def group_error(
    ctx: RequestContext, group_id: str, operation: AclOperation, create: bool = False
) -> tuple[ErrorCode, str | None]:
    """The group-level error, if any: authorization, coordinator placement,
    GROUP_ID_NOT_FOUND for a group that is not a share group here (with ``create``, only
    for another type's group: an unknown one is made, empty), NON_EMPTY_GROUP for one
    with members (offsets change only while nobody consumes)."""
    if group_denied(ctx, group_id, operation):
        return ErrorCode.group_authorization_failed, None
    placement = ctx.services.coordinators.group_metadata_manager.check_coordinator(group_id)
    if placement is not ErrorCode.none:
        return placement, None
    coordinator = ctx.services.coordinators.share_group
    group = coordinator.get_or_create_group(group_id) if create else coordinator.group(group_id)
    if group is None:
        return ErrorCode.group_id_not_found, f"Group {group_id} is not a share group."
    if group.members:
        return ErrorCode.non_empty_group, "The group is not empty."
    return ErrorCode.none, None


def topic_denied(ctx: RequestContext, topic: str) -> bool:
    """With an authorizer, a topic the principal may not READ: TOPIC_AUTHORIZATION_FAILED
    for it, checked before whether it exists (``KafkaApis``)."""
    return not authorize(ctx, AclOperation.READ, ResourceType.TOPIC, topic)


def run_calls(calls: list[tuple[Call, Callable[[ErrorCode], None]]], build: Any) -> Any:
    """Start every call; answer ``build()`` once each has answered its callback (at once
    when there are none)."""
    if not calls:
        return build()
    waiting = [len(calls)]
    future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    def start(call: Call, on_done: Callable[[ErrorCode], None]) -> None:
        def answered(error: ErrorCode) -> None:
            on_done(error)
            waiting[0] -= 1
            if waiting[0] == 0 and not future.done():
                future.set_result(build())

        call(answered)

    for call, on_done in calls:
        start(call, on_done)
    return future
