"""The admin side of Kafka's ``GroupCoordinator``: describe, list and delete groups, and
delete offsets (``handleDescribeGroup``, ``handleListGroups``, ``handleDeleteGroups``,
``handleDeleteOffsets``).

None of these parks anything or touches a member's session: they read the groups the
:class:`~broker.group.group_metadata_manager.GroupMetadataManager` holds, and deletions
go through its ``cleanup_group_metadata`` (tombstones to ``__consumer_offsets``, Dead
groups forgotten), as in Kafka. The handlers have already checked that this broker
coordinates the groups named.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from kio.schema.errors import ErrorCode

from broker.group.group_metadata_manager import GroupMetadataManager
from broker.group.group_state import GroupState, parse_state
from broker.group.results import NO_PROTOCOL, GroupOverview, GroupSummary, TopicPartition

log = logging.getLogger("broker.group")

E = ErrorCode


def handle_describe_groups(
    manager: GroupMetadataManager, group_ids: Iterable[str], *, not_found_as_error: bool = False
) -> list[GroupSummary]:
    """DescribeGroups. An unknown group is reported in state Dead, or with
    GROUP_ID_NOT_FOUND when ``not_found_as_error`` (DescribeGroups v6+)."""
    out = []
    for group_id in group_ids:
        group = manager.get_group(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            out.append(
                GroupSummary(
                    group_id,
                    E.group_id_not_found if not_found_as_error else E.none,
                    GroupState.DEAD.value,
                    "",
                    NO_PROTOCOL,
                )
            )
            continue
        # Metadata and assignments only once a protocol is settled (Stable).
        protocol = group.protocol_name if group.is_in(GroupState.STABLE) else None
        out.append(
            GroupSummary(
                group_id,
                E.none,
                group.state.value,
                group.protocol_type or "",
                protocol or NO_PROTOCOL,
                [m.summary(protocol) for m in group.all_member_metadata],
            )
        )
    return out


def handle_list_groups(
    manager: GroupMetadataManager, states: Iterable[str] = ()
) -> tuple[ErrorCode, list[GroupOverview]]:
    """ListGroups, optionally filtered by state names (case-insensitive, v4+). While a
    partition is being loaded the groups known so far come with
    COORDINATOR_LOAD_IN_PROGRESS, as Kafka answers (the list may be incomplete)."""
    wanted = {s.lower() for s in states}
    overviews = [
        GroupOverview(g.group_id, g.protocol_type or "", g.state.value)
        for g in manager.current_groups
        if not g.is_in(GroupState.DEAD) and (not wanted or g.state.value.lower() in wanted)
    ]
    error = E.coordinator_load_in_progress if manager.loading_partitions else E.none
    return error, overviews


def is_known_state(name: str) -> bool:
    """For handlers validating a ListGroups states filter."""
    return parse_state(name) is not None


def handle_delete_groups(
    manager: GroupMetadataManager, group_ids: Iterable[str]
) -> dict[str, ErrorCode]:
    """DeleteGroups: only Empty groups; their offsets go with them."""
    errors: dict[str, ErrorCode] = {}
    eligible = []
    for group_id in group_ids:
        group = manager.get_group(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            errors[group_id] = E.group_id_not_found
        elif group.is_in(GroupState.EMPTY):
            group.transition_to(GroupState.DEAD)
            eligible.append(group)
            errors[group_id] = E.none
        else:
            errors[group_id] = E.non_empty_group
    if eligible:
        removed = manager.cleanup_group_metadata(eligible, lambda g: g.remove_all_offsets())
        log.info(
            "The following groups were deleted: %s. A total of %d offsets were removed.",
            ", ".join(g.group_id for g in eligible),
            removed,
        )
    return errors


def handle_delete_offsets(
    manager: GroupMetadataManager, group_id: str, partitions: Iterable[tuple[str, int]]
) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
    """OffsetDelete: refused per partition (GROUP_SUBSCRIBED_TO_TOPIC) for topics a live
    consumer group reads; refused for the group (NON_EMPTY_GROUP) when it has members
    and is not a consumer group. An Empty group left without offsets is deleted."""
    tps = [TopicPartition(*tp) for tp in partitions]
    group = manager.get_group(group_id)
    if group is None or group.is_in(GroupState.DEAD):
        return E.group_id_not_found, {}
    errors: dict[TopicPartition, ErrorCode] = {}
    if group.is_in(GroupState.EMPTY):
        eligible = tps
    elif group.is_consumer_group:
        eligible = []
        for tp in tps:
            if group.is_subscribed_to_topic(tp.topic):
                errors[tp] = E.group_subscribed_to_topic
            else:
                eligible.append(tp)
    else:
        return E.non_empty_group, {}
    if eligible:
        removed = manager.cleanup_group_metadata([group], lambda g: g.remove_offsets(eligible))
        for tp in eligible:
            errors[tp] = E.none
        log.info(
            "The following offsets of the group %s were deleted: %s. A total of %d offsets "
            "were removed.",
            group_id,
            eligible,
            removed,
        )
    return E.none, errors
