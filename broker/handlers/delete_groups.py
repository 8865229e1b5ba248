"""DeleteGroups (key 42): remove empty groups and their offsets (NON_EMPTY_GROUP else)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.context import RequestContext
from broker.group import group_admin
from protocol.builders import response_builder

API_KEY = 42
MIN_VERSION = 0
MAX_VERSION = 2


def _response(ctx: RequestContext, request: Any, results: dict[str, ErrorCode]) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    return b.DeleteGroupsResponse(
        throttle_time=0,
        results=tuple(
            b.DeletableGroupResult(group_id=group_id, error_code=results[group_id])
            for group_id in request.groups_names
        ),
    )


def handle(ctx: RequestContext, request: Any) -> Any:
    manager = ctx.services.group_metadata_manager
    results: dict[str, ErrorCode] = {}
    ours = []
    for group_id in request.groups_names:
        error = manager.check_coordinator(group_id)
        if error is ErrorCode.none:
            ours.append(group_id)
        else:
            results[group_id] = error
    if ours:
        results.update(group_admin.handle_delete_groups(manager, ours))
    return _response(ctx, request, results)


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    """``error`` for every group named."""
    return _response(ctx, request, dict.fromkeys(request.groups_names, error))
