"""ListGroups (key 16): the groups this broker coordinates, filtered by state (v4+) and
type (v5+).

Classic groups come with type ``classic``, KIP-848 consumer groups with type ``consumer``
and protocol type ``consumer``, in their own states (Empty, Assigning, Reconciling,
Stable), as Kafka 4 lists them; share groups (KIP-932) with type and protocol type
``share``, in theirs (Empty, Stable); streams groups (KIP-1071) with type and protocol type
``streams``, in theirs (Empty, NotReady, Assigning, Reconciling, Stable). A consumer or
streams group's offsets are kept in an Empty classic group of the same id
(``broker/group/consumer/``): that one is not listed.

With an authorizer, a principal without DESCRIBE on the cluster sees only the groups it
may DESCRIBE (``KafkaApis.handleListGroupsRequest``).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.group import GroupOverview, group_admin
from broker.security.authorizer.authorization import (
    AclOperation,
    ResourceType,
    authorize_cluster,
    filter_by_authorized,
)
from broker.server.context import RequestContext
from protocol.builders import response_builder

API_KEY = 16
MIN_VERSION = 0
MAX_VERSION = 5


def _response(
    ctx: RequestContext, error: ErrorCode, groups: list[tuple[GroupOverview, str]]
) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    return b.ListGroupsResponse(
        throttle_time=0,
        error_code=error,
        groups=tuple(
            b.ListedGroup(
                group_id=g.group_id,
                protocol_type=g.protocol_type,
                group_state=g.state,
                group_type=group_type,
            )
            for g, group_type in groups
        ),
    )


def handle(ctx: RequestContext, request: Any) -> Any:
    states = tuple(getattr(request, "states_filter", ()) or ())
    types = {t.lower() for t in getattr(request, "types_filter", ()) or ()}
    consumer_groups = ctx.services.coordinators.consumer_group
    error, classic = group_admin.handle_list_groups(
        ctx.services.coordinators.group_metadata_manager, states
    )
    listed: list[tuple[GroupOverview, str]] = []
    streams_groups = ctx.services.coordinators.streams_group
    if not types or "classic" in types:
        listed += [
            (g, "classic")
            for g in classic
            if not consumer_groups.is_consumer_group(g.group_id)
            and not streams_groups.is_streams_group(g.group_id)
        ]
    if not types or "consumer" in types:
        wanted = {s.lower() for s in states}
        listed += [
            (GroupOverview(g.group_id, "consumer", g.state.value), "consumer")
            for g in consumer_groups.groups
            if not wanted or g.state.value.lower() in wanted
        ]
    if not types or "share" in types:  # KIP-932's share groups (broker/group/share/)
        wanted = {s.lower() for s in states}
        listed += [
            (GroupOverview(g.group_id, "share", g.state.value), "share")
            for g in ctx.services.coordinators.share_group.groups()
            if not wanted or g.state.value.lower() in wanted
        ]
    if not types or "streams" in types:  # KIP-1071's streams groups (broker/group/streams/)
        wanted = {s.lower() for s in states}
        listed += [
            (GroupOverview(g.group_id, "streams", g.state.value), "streams")
            for g in streams_groups.groups
            if not wanted or g.state.value.lower() in wanted
        ]
    if ctx.services.security.authorizer is not None and not authorize_cluster(
        ctx, AclOperation.DESCRIBE
    ):
        allowed = filter_by_authorized(
            ctx,
            AclOperation.DESCRIBE,
            ResourceType.GROUP,
            (g.group_id for g, _ in listed),
            log_if_denied=False,
        )
        listed = [(g, kind) for g, kind in listed if g.group_id in allowed]
    return _response(ctx, error, listed)


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    return _response(ctx, error, [])
