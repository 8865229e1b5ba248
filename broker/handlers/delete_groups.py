"""DeleteGroups (key 42): remove empty groups and their offsets (NON_EMPTY_GROUP else)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.context import RequestContext
from broker.handlers.group_common import coordinator_of
from protocol.builders import response_builder

API_KEY = 42
MIN_VERSION = 0
MAX_VERSION = 2


def handle(ctx: RequestContext, request: Any) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    service = ctx.services.group_coordinator
    results: dict[str, ErrorCode] = {}
    ours = []
    for group_id in request.groups_names:
        error = service.check_coordinator(group_id)
        if error is ErrorCode.none:
            ours.append(group_id)
        else:
            results[group_id] = error
    if ours:
        results.update(coordinator_of(ctx).handle_delete_groups(ours))
    return b.DeleteGroupsResponse(
        throttle_time=0,
        results=tuple(
            b.DeletableGroupResult(group_id=group_id, error_code=results[group_id])
            for group_id in request.groups_names
        ),
    )
