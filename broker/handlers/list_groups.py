"""ListGroups (key 16): the groups this broker coordinates, filtered by state (v4+).

Every group here is a classic group: a type filter without "classic" lists nothing.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.context import RequestContext
from broker.group import GroupOverview, group_admin
from protocol.builders import response_builder

API_KEY = 16
MIN_VERSION = 0
MAX_VERSION = 5


def _response(ctx: RequestContext, error: ErrorCode, groups: list[GroupOverview]) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    return b.ListGroupsResponse(
        throttle_time=0,
        error_code=error,
        groups=tuple(
            b.ListedGroup(
                group_id=g.group_id,
                protocol_type=g.protocol_type,
                group_state=g.state,
                group_type="classic",
            )
            for g in groups
        ),
    )


def handle(ctx: RequestContext, request: Any) -> Any:
    states = tuple(getattr(request, "states_filter", ()) or ())
    types = {t.lower() for t in getattr(request, "types_filter", ()) or ()}
    error, groups = group_admin.handle_list_groups(ctx.services.group_metadata_manager, states)
    if types and "classic" not in types:
        groups = []
    return _response(ctx, error, groups)


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    return _response(ctx, error, [])
