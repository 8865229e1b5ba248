"""``minikafka groups describe`` for KIP-932 share groups: what Kafka 4.2's
``kafka-share-groups.sh --describe`` shows (``ShareGroupCommand``), with its columns.

Kafka's admin client describes a share group with ShareGroupDescribe (API 77) and its
start offsets with DescribeShareGroupOffsets (API 90); ``describe_share_group`` asks
both of the group's coordinator. The views:

* offsets (the default): GROUP, TOPIC, PARTITION, START-OFFSET, LAG ("-" for a
  partition without durable state or a lag the broker does not know); with
  ``--verbose`` LEADER-EPOCH before START-OFFSET;
* ``--state``: GROUP, COORDINATOR (ID), STATE, #MEMBERS; with ``--verbose``
  GROUP-EPOCH and ASSIGNMENT-EPOCH before #MEMBERS;
* ``--members``: GROUP, CONSUMER-ID, HOST, CLIENT-ID, #PARTITIONS, ASSIGNMENT
  (``topic:0,1;other:2``, "-" if none); with ``--verbose`` MEMBER-EPOCH before
  ASSIGNMENT.

``groups list --type share`` already lists them (ListGroups v5's type). This module is
hooked into ``admin_commands.groups_describe`` by one call; it sends its two requests
itself (v1 of each, the versions minikafka and Kafka 4.2 serve) rather than through the
client's version tables, so the client package can move without it.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_tools.client import AdminError, KafkaClient, error_name
from protocol.builders import request_builder

SHARE_GROUP_DESCRIBE, DESCRIBE_SHARE_GROUP_OFFSETS = 77, 90
VERSION = 1  # of both: v1 of 90 has the lag
MISSING = "-"

Table = Callable[[Sequence[str], Sequence[Sequence[object]]], str]


@dataclass(frozen=True, slots=True)
class ShareMemberView:
    member_id: str
    client_host: str
    client_id: str
    member_epoch: int
    assignment: dict[str, list[int]]


@dataclass(frozen=True, slots=True)
class SharePartitionView:
    topic: str
    partition: int
    start_offset: int  # -1: no durable state yet
    leader_epoch: int
    lag: int  # -1: unknown


@dataclass(frozen=True, slots=True)
class ShareGroupView:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    members: tuple[ShareMemberView, ...]
    partitions: tuple[SharePartitionView, ...]


MESSAGES = {
    SHARE_GROUP_DESCRIBE: "ShareGroupDescribeRequest",
    DESCRIBE_SHARE_GROUP_OFFSETS: "DescribeShareGroupOffsetsRequest",
}


async def _call(client: KafkaClient, api_key: int, coordinator: int, **fields: Any) -> Any:
    payload = getattr(request_builder(api_key, VERSION), MESSAGES[api_key])(**fields)
    connection = await client.connection(coordinator)
    return await connection.request(api_key, VERSION, payload)


def _assignment(member: Any) -> dict[str, list[int]]:
    topics: dict[str, list[int]] = {}
    for tp in member.assignment.topic_partitions:
        topics.setdefault(str(tp.topic_name), []).extend(int(p) for p in tp.partitions)
    return {t: sorted(ps) for t, ps in topics.items()}


async def describe_share_group(
    client: KafkaClient, group: str, coordinator: int
) -> ShareGroupView | None:
    """The share group ``group``; None when it is not one (GROUP_ID_NOT_FOUND, or a
    broker without share groups: the caller goes on as for other groups)."""
    try:
        response = await _call(
            client,
            SHARE_GROUP_DESCRIBE,
            coordinator,
            group_ids=(group,),
            include_authorized_operations=False,
        )
    except (ConnectionError, TimeoutError):  # an older broker closes on an unknown API
        client.forget(coordinator)
        return None
    (described,) = response.groups
    if described.error_code is ErrorCode.group_id_not_found:
        return None
    if described.error_code is not ErrorCode.none:
        raise AdminError(f"ShareGroupDescribe {group}: {error_name(described.error_code)}")
    return ShareGroupView(
        group_id=group,
        state=str(described.group_state),
        group_epoch=int(described.group_epoch),
        assignment_epoch=int(described.assignment_epoch),
        members=tuple(
            ShareMemberView(
                str(m.member_id),
                str(m.client_host),
                str(m.client_id),
                int(m.member_epoch),
                _assignment(m),
            )
            for m in described.members
        ),
        partitions=await _start_offsets(client, group, coordinator),
    )


async def _start_offsets(
    client: KafkaClient, group: str, coordinator: int
) -> tuple[SharePartitionView, ...]:
    """Every partition of the group's topics with its start offset (DescribeShareGroupOffsets
    with all topics)."""
    b = request_builder(DESCRIBE_SHARE_GROUP_OFFSETS, VERSION)
    response = await _call(
        client,
        DESCRIBE_SHARE_GROUP_OFFSETS,
        coordinator,
        groups=(b.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None),),
    )
    (described,) = response.groups
    if described.error_code is not ErrorCode.none:
        raise AdminError(f"DescribeShareGroupOffsets {group}: {error_name(described.error_code)}")
    return tuple(
        SharePartitionView(
            str(t.topic_name),
            int(p.partition_index),
            int(p.start_offset),
            int(p.leader_epoch),
            int(getattr(p, "lag", -1)),
        )
        for t in described.topics
        for p in t.partitions
    )


def _known(value: int) -> object:
    return value if value >= 0 else MISSING


def offset_rows(view: ShareGroupView, verbose: bool) -> tuple[list[str], list[tuple[object, ...]]]:
    headers = ["GROUP", "TOPIC", "PARTITION"]
    headers += ["LEADER-EPOCH"] if verbose else []
    rows: list[tuple[object, ...]] = []
    for p in sorted(view.partitions, key=lambda p: (p.topic, p.partition)):
        row: list[object] = [view.group_id, p.topic, p.partition]
        row += [_known(p.leader_epoch)] if verbose else []
        rows.append((*row, _known(p.start_offset), _known(p.lag)))
    return [*headers, "START-OFFSET", "LAG"], rows


def state_rows(
    view: ShareGroupView, coordinator: str, verbose: bool
) -> tuple[list[str], list[tuple[object, ...]]]:
    headers = ["GROUP", "COORDINATOR (ID)", "STATE"]
    row: list[object] = [view.group_id, coordinator, view.state]
    if verbose:
        headers += ["GROUP-EPOCH", "ASSIGNMENT-EPOCH"]
        row += [view.group_epoch, view.assignment_epoch]
    return [*headers, "#MEMBERS"], [(*row, len(view.members))]


def assignment_text(assignment: dict[str, list[int]]) -> str:
    if not any(assignment.values()):
        return MISSING
    return ";".join(f"{t}:{','.join(map(str, ps))}" for t, ps in sorted(assignment.items()) if ps)


def member_rows(view: ShareGroupView, verbose: bool) -> tuple[list[str], list[tuple[object, ...]]]:
    headers = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
    headers += ["MEMBER-EPOCH"] if verbose else []
    rows: list[tuple[object, ...]] = []
    for m in sorted(view.members, key=lambda m: m.member_id):
        row: list[object] = [view.group_id, m.member_id, m.client_host, m.client_id]
        row.append(sum(len(ps) for ps in m.assignment.values()))
        row += [m.member_epoch] if verbose else []
        rows.append((*row, assignment_text(m.assignment)))
    return [*headers, "ASSIGNMENT"], rows


def print_share_group(
    client: KafkaClient,
    args: argparse.Namespace,
    view: ShareGroupView,
    coordinator: int,
    table: Table,
) -> None:
    """The view ``args`` asks for (``--state``, ``--members``, else the offsets)."""
    verbose = bool(getattr(args, "verbose", False))
    if args.state:
        host, port = client.cluster.brokers.get(coordinator, ("?", 0))
        print(table(*state_rows(view, f"{host}:{port} ({coordinator})", verbose)))
        return
    if not view.members:
        print(f"Share group '{view.group_id}' has no active members.\n")
    if args.members:
        print(table(*member_rows(view, verbose)))
        return
    print(table(*offset_rows(view, verbose)))
