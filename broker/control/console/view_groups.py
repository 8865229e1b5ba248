"""Groups of every type as the console shows them: classic, consumer (KIP-848) and
share (KIP-932), each with its state, members, assignments, committed offsets and lag;
share groups also with their in-flight records, delivery counts and lock deadlines.

Each running broker's coordinators hold the groups of the ``__consumer_offsets``
partitions it leads; a group is taken from the first broker that has it. Lag is the
partition's high watermark (its leader's) less the committed offset. Streams groups
are not modelled yet.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from broker.control.cluster_control import ClusterControl
from broker.control.console.view_cluster import local_partition
from broker.group.consumer_protocol import decode_assignment

if TYPE_CHECKING:
    from broker.server.broker_server import Broker

__all__ = ["groups"]


def _alive(app: ClusterControl) -> list[Broker]:
    cluster = app.cluster
    return [
        b
        for b in sorted(app.brokers, key=lambda b: b.broker_id)
        if b.broker_id in cluster.brokers and cluster.brokers[b.broker_id].alive
    ]


def _high_watermark(app: ClusterControl, topic: str, partition: int) -> int | None:
    info = app.cluster.topics.get(topic)
    if info is None or partition >= len(info.partitions):
        return None
    leader = local_partition(app, info.partitions[partition].leader, topic, partition)
    return leader.high_watermark if leader is not None else None


def _names(app: ClusterControl) -> dict[uuid.UUID, str]:
    return {info.topic_id: name for name, info in app.cluster.topics.items()}


def _assignment(names: Mapping[uuid.UUID, str], assigned: Mapping[Any, Iterable[int]]) -> str:
    parts = [
        f"{names.get(topic_id, str(topic_id))}-{p}"
        for topic_id, partitions in assigned.items()
        for p in sorted(partitions)
    ]
    return ", ".join(sorted(parts)) or "-"


def _offsets(app: ClusterControl, broker: Broker, group_id: str) -> list[dict[str, Any]]:
    manager = broker.services.coordinators.group_metadata_manager
    group = manager.get_group(group_id)
    if group is None:
        return []
    out = []
    for (topic, partition), committed in sorted(group.offsets.items()):
        hw = _high_watermark(app, topic, partition)
        out.append(
            {
                "topic": topic,
                "partition": partition,
                "committed": committed.offset,
                "end": hw,
                "lag": None if hw is None else max(hw - committed.offset, 0),
            }
        )
    return out


def _share_partitions(broker: Broker, group_id: str, now_ms: int) -> list[dict[str, Any]]:
    out = []
    manager = broker.services.share_partition_manager
    for (gid, topic, partition), sp in sorted(manager.partitions.items()):
        if gid != group_id:
            continue
        out.append(
            {
                "topic": topic,
                "partition": partition,
                "start": sp.start_offset,
                "end": sp.end_offset,
                "in_flight": [
                    {
                        "offset": offset,
                        "state": state.name,
                        "delivery_count": count,
                        "member": member or "-",
                        "lock_left_ms": None if deadline is None else deadline - now_ms,
                    }
                    for offset, state, count, member, deadline in sp.in_flight()
                ],
            }
        )
    return out


def groups(app: ClusterControl) -> list[dict[str, Any]]:
    """Every group of every type, by id."""
    seen: dict[str, dict[str, Any]] = {}
    names = _names(app)
    for broker in _alive(app):
        coordinators = broker.services.coordinators
        for cg in coordinators.consumer_group.groups:
            if cg.group_id in seen:
                continue
            seen[cg.group_id] = {
                "id": cg.group_id,
                "type": "consumer",
                "state": str(cg.state),
                "coordinator": broker.broker_id,
                "epoch": cg.group_epoch,
                "members": [
                    {
                        "id": m.member_id,
                        "client_id": m.client_id,
                        "host": m.client_host,
                        "assignment": _assignment(names, m.assigned_partitions),
                    }
                    for m in cg.members.values()
                ],
                "offsets": _offsets(app, broker, cg.group_id),
            }
        for sg in coordinators.share_group.groups():
            if sg.group_id in seen:
                continue
            seen[sg.group_id] = {
                "id": sg.group_id,
                "type": "share",
                "state": str(sg.state),
                "coordinator": broker.broker_id,
                "epoch": sg.group_epoch,
                "members": [
                    {
                        "id": m.member_id,
                        "client_id": m.client_id,
                        "host": m.client_host,
                        "assignment": _assignment(names, m.assignment),
                    }
                    for m in sg.members.values()
                ],
                "offsets": [],
                "share_partitions": [],
            }
        for group in coordinators.group_metadata_manager.current_groups:
            if group.group_id in seen or str(group.state.value) == "Dead":
                continue
            members = []
            for m in group.all_member_metadata:
                decoded = decode_assignment(m.assignment) if m.assignment else None
                assignment = ", ".join(
                    f"{t}-{p}" for t, ps in sorted((decoded or {}).items()) for p in ps
                )
                members.append(
                    {
                        "id": m.member_id,
                        "client_id": m.client_id,
                        "host": m.client_host,
                        "assignment": assignment or "-",
                    }
                )
            seen[group.group_id] = {
                "id": group.group_id,
                "type": "classic",
                "state": group.state.value,
                "coordinator": broker.broker_id,
                "epoch": group.generation_id,
                "protocol": f"{group.protocol_type or ''} {group.protocol_name or ''}".strip(),
                "members": members,
                "offsets": _offsets(app, broker, group.group_id),
            }
    # A share group's partitions are on their leaders, not on its coordinator.
    for shown in seen.values():
        if shown["type"] == "share":
            for broker in _alive(app):
                now = broker.services.clock.now_ms()
                shown["share_partitions"] += _share_partitions(broker, shown["id"], now)
        shown["lag"] = sum(o["lag"] or 0 for o in shown["offsets"])
    return [seen[k] for k in sorted(seen)]
