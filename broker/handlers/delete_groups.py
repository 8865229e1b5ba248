"""DeleteGroups (key 42): remove empty groups and their offsets (NON_EMPTY_GROUP else).

A KIP-848 consumer group too: while it has members NON_EMPTY_GROUP, else it is
forgotten along with the Empty classic group that keeps its offsets. A share group
(KIP-932) too: NON_EMPTY_GROUP while it has members, else it goes with the share
partitions this broker leads for it. A streams group (KIP-1071) as a consumer group: its
records go (tombstones) with the Empty classic group keeping its offsets. With an
authorizer, a group the principal may not DELETE is GROUP_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.group import group_admin
from broker.handlers.group_common import group_denied
from broker.security.authorizer.authorization import AclOperation
from broker.server.context import RequestContext
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
    manager = ctx.services.coordinators.group_metadata_manager
    consumer_groups = ctx.services.coordinators.consumer_group
    streams_groups = ctx.services.coordinators.streams_group
    results: dict[str, ErrorCode] = {}
    ours = []
    deleted_consumer_groups = []
    for group_id in request.groups_names:
        error = manager.check_coordinator(group_id)
        if group_denied(ctx, group_id, AclOperation.DELETE):
            results[group_id] = ErrorCode.group_authorization_failed
        elif error is not ErrorCode.none:
            results[group_id] = error
        elif ctx.services.coordinators.share_group.group(group_id) is not None:
            # KIP-932: an empty share group goes, with its share partitions here
            results[group_id] = ctx.services.coordinators.share_group.delete_group(group_id)
            if results[group_id] is ErrorCode.none:
                ctx.services.share_partition_manager.delete_group(group_id)
        elif consumer_groups.is_consumer_group(group_id) or streams_groups.is_streams_group(
            group_id
        ):
            if consumer_groups.is_consumer_group(group_id):
                refused = consumer_groups.delete_group(group_id)
            else:
                refused = streams_groups.delete_group(group_id)
            if refused is not None:
                results[group_id] = refused
            else:
                deleted_consumer_groups.append(group_id)
                ours.append(group_id)
        else:
            ours.append(group_id)
    if ours:
        results.update(group_admin.handle_delete_groups(manager, ours))
    for group_id in deleted_consumer_groups:
        if results[group_id] is ErrorCode.group_id_not_found:  # it had no offsets
            results[group_id] = ErrorCode.none
    return _response(ctx, request, results)


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    """``error`` for every group named."""
    return _response(ctx, request, dict.fromkeys(request.groups_names, error))
