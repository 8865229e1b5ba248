"""``minikafka groups`` for KIP-848 consumer groups: what Kafka 4's
``kafka-consumer-groups.sh`` shows of them (``ConsumerGroupCommand``), with its columns.

Kafka's admin client describes a group with ConsumerGroupDescribe (API 69) and falls back
to DescribeGroups when the group is not a consumer group (GROUP_ID_NOT_FOUND) or the
broker does not serve the API; ``describe_consumer_group`` is that first step. The views:

* ``--state``: GROUP, COORDINATOR (ID), ASSIGNMENT-STRATEGY, STATE, #MEMBERS; with
  ``--verbose`` GROUP-EPOCH and TARGET-ASSIGNMENT-EPOCH before #MEMBERS;
* ``--members``: GROUP, CONSUMER-ID, GROUP-INSTANCE-ID (when a member has one), HOST,
  CLIENT-ID, #PARTITIONS; with ``--verbose`` CURRENT-EPOCH, CURRENT-ASSIGNMENT,
  TARGET-EPOCH, TARGET-ASSIGNMENT (assignments as ``topic:0,1;other:2``, "-" if none);
* the offsets view is the classic one, each partition's owner from the members'
  current assignments.

``groups list --type`` adds Kafka's TYPE column (Classic, Consumer), from ListGroups v5.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_tools.client import AdminError, KafkaClient, error_name
from kafka_tools.client.cluster import CONSUMER_GROUP_DESCRIBE
from protocol.builders import Builder

MISSING = "-"


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberView:
    member_id: str
    instance_id: str | None
    client_host: str
    client_id: str
    member_epoch: int
    assignment: dict[str, list[int]]
    target_assignment: dict[str, list[int]]
    # ConsumerGroupDescribe v1's MemberType (KIP-1099): 0 classic, 1 consumer, -1 unknown.
    member_type: int = -1


@dataclass(frozen=True, slots=True)
class ConsumerGroupView:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    members: tuple[ConsumerGroupMemberView, ...]


def _assignment(described: Any) -> dict[str, list[int]]:
    topics: dict[str, list[int]] = {}
    for tp in described.topic_partitions if described is not None else ():
        topics.setdefault(str(tp.topic_name), []).extend(int(p) for p in tp.partitions)
    return {t: sorted(ps) for t, ps in topics.items()}


async def describe_consumer_group(
    client: KafkaClient, group: str, coordinator: int
) -> ConsumerGroupView | None:
    """The consumer group ``group``; None when it is not one (or the broker has no
    ConsumerGroupDescribe), as Kafka's admin client falls back to DescribeGroups."""

    def build(b: Builder, version: int) -> Any:
        return b.ConsumerGroupDescribeRequest(
            group_ids=(group,), include_authorized_operations=False
        )

    try:
        response = await client.call(CONSUMER_GROUP_DESCRIBE, build, coordinator)
    except AdminError:  # the broker does not serve API 69
        return None
    (described,) = response.groups
    if described.error_code is ErrorCode.group_id_not_found:
        return None
    if described.error_code is not ErrorCode.none:
        raise AdminError(f"ConsumerGroupDescribe {group}: {error_name(described.error_code)}")
    return ConsumerGroupView(
        group_id=str(described.group_id),
        state=str(described.group_state),
        group_epoch=int(described.group_epoch),
        assignment_epoch=int(described.assignment_epoch),
        assignor=str(described.assignor_name or ""),
        members=tuple(
            ConsumerGroupMemberView(
                member_id=str(m.member_id),
                instance_id=m.instance_id,
                client_host=str(m.client_host),
                client_id=str(m.client_id),
                member_epoch=int(m.member_epoch),
                assignment=_assignment(m.assignment),
                target_assignment=_assignment(m.target_assignment),
                member_type=int(getattr(m, "member_type", -1)),
            )
            for m in described.members
        ),
    )


def assignment_text(assignment: dict[str, list[int]]) -> str:
    """Kafka 4's ``topic:0,1;other:2`` ("-" when empty)."""
    if not any(assignment.values()):
        return MISSING
    return ";".join(
        f"{topic}:{','.join(map(str, partitions))}"
        for topic, partitions in sorted(assignment.items())
        if partitions
    )


def state_rows(
    view: ConsumerGroupView, coordinator: str, verbose: bool
) -> tuple[list[str], list[tuple[object, ...]]]:
    headers = ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE"]
    row: list[object] = [view.group_id, coordinator, view.assignor or MISSING, view.state]
    if verbose:
        headers += ["GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH"]
        row += [view.group_epoch, view.assignment_epoch]
    return [*headers, "#MEMBERS"], [(*row, len(view.members))]


def member_rows(
    view: ConsumerGroupView, verbose: bool
) -> tuple[list[str], list[tuple[object, ...]]]:
    with_instance = any(m.instance_id for m in view.members)
    headers = ["GROUP", "CONSUMER-ID"]
    if with_instance:
        headers.append("GROUP-INSTANCE-ID")
    headers += ["HOST", "CLIENT-ID", "#PARTITIONS"]
    if verbose:
        headers += ["CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT"]
    rows: list[tuple[object, ...]] = []
    for m in sorted(view.members, key=lambda m: m.member_id):
        row: list[object] = [view.group_id, m.member_id]
        if with_instance:
            row.append(m.instance_id or MISSING)
        row += [m.client_host, m.client_id, sum(len(ps) for ps in m.assignment.values())]
        if verbose:
            row += [
                m.member_epoch,
                assignment_text(m.assignment),
                view.assignment_epoch,
                assignment_text(m.target_assignment),
            ]
        rows.append(tuple(row))
    return headers, rows


def type_label(group_type: str) -> str:
    """Kafka's ``GroupType.toString``: Classic, Consumer, Share, Unknown."""
    return group_type.capitalize() if group_type else "Unknown"


def type_filter(text: str | None) -> set[str]:
    """``--type classic,consumer`` (empty: all)."""
    return {t.strip().lower() for t in (text or "").split(",") if t.strip()}


def owners(view: ConsumerGroupView) -> dict[tuple[str, int], Sequence[str]]:
    """Each assigned partition's (member id, host, client id), for the offsets view."""
    owned: dict[tuple[str, int], Sequence[str]] = {}
    for m in view.members:
        for topic, partitions in m.assignment.items():
            for p in partitions:
                owned[(topic, p)] = (m.member_id, m.client_host, m.client_id)
    return owned
