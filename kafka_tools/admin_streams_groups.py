"""``minikafka groups describe`` for KIP-1071 streams groups: what Kafka 4.2's
``kafka-streams-groups.sh --describe`` shows (``StreamsGroupCommand``), with its columns.

The group is described with StreamsGroupDescribe (API 89, v0) at its coordinator. Views:

* ``--members``: GROUP, MEMBER, PROCESS, CLIENT-ID, ASSIGNMENTS, the assignments as
  Kafka prints them (``ACTIVE: 0:[0,1]; STANDBY: 1:[2]; ``); with ``--verbose``
  TARGET-ASSIGNMENT-EPOCH, TOPOLOGY-EPOCH, MEMBER-PROTOCOL and MEMBER-EPOCH too, and the
  target assignment (``TARGET-ACTIVE: ...``);
* ``--state``: GROUP, COORDINATOR (ID), STATE, #MEMBERS; with ``--verbose`` GROUP-EPOCH
  and TARGET-ASSIGNMENT-EPOCH before #MEMBERS;
* by default: the members view, then the topology: SUBTOPOLOGY, SOURCE-TOPICS,
  REPARTITION-SINK-TOPICS, REPARTITION-SOURCE-TOPICS and CHANGELOG-TOPICS (internal topics
  with their partition counts). Kafka's tool prints the group's offset lags here instead;
  ours shows the topology, which the tool has no view of.

``groups list --type streams`` lists them (ListGroups v5's type).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_tools.client import AdminError, KafkaClient, error_name
from protocol.builders import request_builder

STREAMS_GROUP_DESCRIBE = 89
VERSION = 0

Table = Callable[[Sequence[str], Sequence[Sequence[object]]], str]
Tasks = tuple[tuple[str, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class StreamsMemberView:
    member_id: str
    member_epoch: int
    process_id: str
    client_id: str
    client_host: str
    topology_epoch: int
    assignment: tuple[Tasks, Tasks, Tasks]  # active, standby, warm-up
    target: tuple[Tasks, Tasks, Tasks]


@dataclass(frozen=True, slots=True)
class SubtopologyView:
    subtopology_id: str
    source_topics: tuple[str, ...]
    repartition_sink_topics: tuple[str, ...]
    repartition_source_topics: tuple[tuple[str, int], ...]
    changelog_topics: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class StreamsGroupView:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    topology_epoch: int
    subtopologies: tuple[SubtopologyView, ...]
    members: tuple[StreamsMemberView, ...]


def _tasks(items: Any) -> Tasks:
    return tuple((str(t.subtopology_id), tuple(int(p) for p in t.partitions)) for t in items)


def _three(a: Any) -> tuple[Tasks, Tasks, Tasks]:
    return _tasks(a.active_tasks), _tasks(a.standby_tasks), _tasks(a.warmup_tasks)


def _view(described: Any) -> StreamsGroupView:
    topology = described.topology
    subtopologies: tuple[SubtopologyView, ...] = ()
    if topology is not None:
        subtopologies = tuple(
            SubtopologyView(
                str(s.subtopology_id),
                tuple(str(t) for t in s.source_topics),
                tuple(str(t) for t in s.repartition_sink_topics),
                tuple((str(t.name), int(t.partitions)) for t in s.repartition_source_topics),
                tuple((str(t.name), int(t.partitions)) for t in s.state_changelog_topics),
            )
            for s in topology.subtopologies or ()
        )
    return StreamsGroupView(
        group_id=str(described.group_id),
        state=str(described.group_state),
        group_epoch=int(described.group_epoch),
        assignment_epoch=int(described.assignment_epoch),
        topology_epoch=int(topology.epoch) if topology is not None else -1,
        subtopologies=subtopologies,
        members=tuple(
            StreamsMemberView(
                str(m.member_id),
                int(m.member_epoch),
                str(m.process_id),
                str(m.client_id),
                str(m.client_host),
                int(m.topology_epoch),
                _three(m.assignment),
                _three(m.target_assignment),
            )
            for m in described.members
        ),
    )


async def describe_streams_group(
    client: KafkaClient, group: str, coordinator: int
) -> StreamsGroupView | None:
    """The streams group ``group``; None when it is not one (GROUP_ID_NOT_FOUND, or a
    broker without streams groups)."""
    payload = request_builder(STREAMS_GROUP_DESCRIBE, VERSION).StreamsGroupDescribeRequest(
        group_ids=(group,), include_authorized_operations=False
    )
    try:
        connection = await client.connection(coordinator)
        response = await connection.request(STREAMS_GROUP_DESCRIBE, VERSION, payload)
    except (ConnectionError, TimeoutError):  # an older broker closes on an unknown API
        client.forget(coordinator)
        return None
    (described,) = response.groups
    if described.error_code in (ErrorCode.group_id_not_found, ErrorCode.unsupported_version):
        return None
    if described.error_code is not ErrorCode.none:
        raise AdminError(f"StreamsGroupDescribe {group}: {error_name(described.error_code)}")
    return _view(described)


def tasks_text(kinds: Sequence[Tasks], labels: Sequence[str]) -> str:
    """Kafka's ``getTasksForPrinting``: ``ACTIVE: 0:[0,1]; STANDBY: 1:[2]; ``."""
    out = []
    for tasks, label in zip(kinds, labels, strict=True):
        if tasks:
            parts = "".join(f"{s}:[{','.join(map(str, ps))}]; " for s, ps in tasks)
            out.append(f"{label}: {parts}")
    return "".join(out)


def member_rows(view: StreamsGroupView, verbose: bool) -> tuple[list[str], list[list[object]]]:
    labels = ("ACTIVE", "STANDBY", "WARMUP")
    if not verbose:
        headers = ["GROUP", "MEMBER", "PROCESS", "CLIENT-ID", "ASSIGNMENTS"]
        rows: list[list[object]] = [
            [
                view.group_id,
                m.member_id,
                m.process_id,
                m.client_id,
                tasks_text(m.assignment, labels),
            ]
            for m in view.members
        ]
        return headers, rows
    headers = [
        "GROUP",
        "TARGET-ASSIGNMENT-EPOCH",
        "TOPOLOGY-EPOCH",
        "MEMBER",
        "MEMBER-PROTOCOL",
        "MEMBER-EPOCH",
        "PROCESS",
        "CLIENT-ID",
        "ASSIGNMENTS",
    ]
    targets = ("TARGET-ACTIVE", "TARGET-STANDBY", "TARGET-WARMUP")
    rows = [
        [
            view.group_id,
            view.assignment_epoch,
            view.topology_epoch,
            m.member_id,
            "streams",
            m.member_epoch,
            m.process_id,
            m.client_id,
            tasks_text(m.assignment, labels) + tasks_text(m.target, targets),
        ]
        for m in view.members
    ]
    return headers, rows


def topology_rows(view: StreamsGroupView) -> tuple[list[str], list[list[object]]]:
    def names(topics: Sequence[str]) -> str:
        return ",".join(topics) or "-"

    def counted(topics: Sequence[tuple[str, int]]) -> str:
        return ",".join(f"{t}({p})" for t, p in topics) or "-"

    headers = [
        "SUBTOPOLOGY",
        "SOURCE-TOPICS",
        "REPARTITION-SINK-TOPICS",
        "REPARTITION-SOURCE-TOPICS",
        "CHANGELOG-TOPICS",
    ]
    rows: list[list[object]] = [
        [
            s.subtopology_id,
            names(s.source_topics),
            names(s.repartition_sink_topics),
            counted(s.repartition_source_topics),
            counted(s.changelog_topics),
        ]
        for s in view.subtopologies
    ]
    return headers, rows


def print_streams_group(
    client: KafkaClient,
    args: argparse.Namespace,
    view: StreamsGroupView,
    coordinator: int,
    table: Table,
) -> None:
    group = view.group_id
    if args.state:
        host, port = client.cluster.brokers.get(coordinator, ("?", 0))
        headers = ["GROUP", "COORDINATOR (ID)", "STATE"]
        row: list[object] = [group, f"{host}:{port} ({coordinator})", view.state]
        if args.verbose:
            headers += ["GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH"]
            row += [view.group_epoch, view.assignment_epoch]
        print(table([*headers, "#MEMBERS"], [[*row, len(view.members)]]))
        return
    if not view.members:
        print(f"Streams group '{group}' has no active members.\n")
    elif view.state in ("Assigning", "Reconciling", "NotReady"):
        print(f"Warning: Streams group '{group}' is rebalancing.\n")
    print(table(*member_rows(view, args.verbose)))
    if args.members:
        return
    print(f"\nTopology (epoch {view.topology_epoch}) of streams group '{group}':")
    print(table(*topology_rows(view)))
