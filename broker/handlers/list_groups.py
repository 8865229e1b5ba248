"""ListGroups (key 16): the groups this broker coordinates, filtered by state (v4+).

Every group here is a classic group: a type filter without "classic" lists nothing.
"""

from __future__ import annotations

from typing import Any

from broker.context import RequestContext
from broker.handlers.group_common import coordinator_of
from protocol.builders import response_builder

API_KEY = 16
MIN_VERSION = 0
MAX_VERSION = 5


def handle(ctx: RequestContext, request: Any) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    states = tuple(getattr(request, "states_filter", ()) or ())
    types = {t.lower() for t in getattr(request, "types_filter", ()) or ()}
    error, groups = coordinator_of(ctx).handle_list_groups(states)
    if types and "classic" not in types:
        groups = []
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
