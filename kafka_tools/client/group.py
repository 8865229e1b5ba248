"""A consumer group member of Kafka's classic protocol, and the consumer protocol's
subscription and assignment bytes (every version starts with the fields read here)."""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_tools.client.cluster import (
    HEARTBEAT,
    JOIN_GROUP,
    LEAVE_GROUP,
    SYNC_GROUP,
    AdminError,
    KafkaClient,
    error_name,
)
from protocol.builders import Builder


def encode_subscription(topics: Sequence[str]) -> bytes:
    """ConsumerProtocolSubscription v0: version, topics, null user data."""
    out = bytearray(struct.pack(">hi", 0, len(topics)))
    for topic in topics:
        raw = topic.encode()
        out += struct.pack(">h", len(raw)) + raw
    return bytes(out + struct.pack(">i", -1))


def decode_subscription(data: bytes) -> list[str]:
    """The topics of a subscription (every version starts with them); [] if unreadable."""
    try:
        (count,) = struct.unpack_from(">i", data, 2)
        pos, topics = 6, []
        for _ in range(max(count, 0)):
            (length,) = struct.unpack_from(">h", data, pos)
            topics.append(data[pos + 2 : pos + 2 + length].decode())
            pos += 2 + length
        return topics
    except (struct.error, UnicodeDecodeError):
        return []


def encode_assignment(assignment: dict[str, list[int]]) -> bytes:
    """ConsumerProtocolAssignment v0: version, [topic, [partition]], null user data."""
    out = bytearray(struct.pack(">hi", 0, len(assignment)))
    for topic, partitions in sorted(assignment.items()):
        raw = topic.encode()
        out += struct.pack(">h", len(raw)) + raw + struct.pack(">i", len(partitions))
        for partition in partitions:
            out += struct.pack(">i", partition)
    return bytes(out + struct.pack(">i", -1))


def decode_assignment(data: bytes | None) -> dict[str, list[int]]:
    """Topic -> partitions of an assignment (every version starts with them)."""
    if not data:
        return {}
    try:
        (count,) = struct.unpack_from(">i", data, 2)
        pos = 6
        result: dict[str, list[int]] = {}
        for _ in range(max(count, 0)):
            (length,) = struct.unpack_from(">h", data, pos)
            topic = data[pos + 2 : pos + 2 + length].decode()
            pos += 2 + length
            (n,) = struct.unpack_from(">i", data, pos)
            pos += 4
            result[topic] = list(struct.unpack_from(f">{max(n, 0)}i", data, pos))
            pos += 4 * max(n, 0)
        return result
    except (struct.error, UnicodeDecodeError):
        return {}


def range_assign(
    subscriptions: dict[str, list[str]], partitions: dict[str, int]
) -> dict[str, dict[str, list[int]]]:
    """Kafka's RangeAssignor: per topic, members in id order take consecutive ranges."""
    result: dict[str, dict[str, list[int]]] = {m: {} for m in subscriptions}
    for topic, count in sorted(partitions.items()):
        members = sorted(m for m, topics in subscriptions.items() if topic in topics)
        if not members:
            continue
        per, extra = divmod(count, len(members))
        start = 0
        for i, member in enumerate(members):
            n = per + (1 if i < extra else 0)
            if n:
                result[member][topic] = list(range(start, start + n))
            start += n
    return result


@dataclass
class GroupMember:
    """This process as a member of a consumer group (Kafka's classic protocol)."""

    group: str
    topics: list[str]
    coordinator: int = -1
    member_id: str = ""
    generation: int = -1
    assignment: dict[str, list[int]] = field(default_factory=dict)
    session_timeout_ms: int = 45000
    rebalance_timeout_ms: int = 300000
    heartbeat_interval_ms: int = 3000
    needs_rejoin: bool = True


async def join_group(client: KafkaClient, member: GroupMember) -> None:
    """JoinGroup (twice: the first answers MEMBER_ID_REQUIRED), the leader assigns with
    ``range``, SyncGroup; retried while the coordinator moves or a rebalance restarts."""
    for attempt in range(50):
        if member.coordinator < 0:
            member.coordinator = await client.find_coordinator(member.group)
        try:
            joined = await client.call(
                JOIN_GROUP,
                lambda b, v: b.JoinGroupRequest(
                    group_id=member.group,
                    session_timeout=member.session_timeout_ms,
                    rebalance_timeout=member.rebalance_timeout_ms,
                    member_id=member.member_id,
                    group_instance_id=None,
                    protocol_type="consumer",
                    protocols=(
                        b.JoinGroupRequestProtocol(
                            name="range", metadata=encode_subscription(member.topics)
                        ),
                    ),
                    reason=None,
                ),
                member.coordinator,
                timeout_s=member.rebalance_timeout_ms / 1000 + 5,
            )
        except (OSError, ConnectionError):
            client.forget(member.coordinator)
            member.coordinator = -1
            await asyncio.sleep(0.2)
            continue
        error = joined.error_code
        if error is ErrorCode.member_id_required:
            member.member_id = str(joined.member_id)
            continue
        if error is ErrorCode.unknown_member_id:
            member.member_id = ""
            continue
        if error in (ErrorCode.not_coordinator, ErrorCode.coordinator_not_available):
            member.coordinator = -1
            await asyncio.sleep(0.2)
            continue
        if error in (ErrorCode.rebalance_in_progress, ErrorCode.coordinator_load_in_progress):
            await asyncio.sleep(0.2)
            continue
        if error is not ErrorCode.none:
            raise AdminError(f"JoinGroup {member.group}: {error_name(error)}")
        member.member_id = str(joined.member_id)
        member.generation = int(joined.generation_id)
        assignments: dict[str, dict[str, list[int]]] = {}
        if str(joined.leader) == member.member_id:
            subscriptions = {
                str(m.member_id): decode_subscription(bytes(m.metadata)) for m in joined.members
            }
            counts: dict[str, int] = {}
            for topic in sorted({t for ts in subscriptions.values() for t in ts}):
                with contextlib.suppress(AdminError):
                    counts[topic] = len((await client.partitions_of(topic)).partitions)
            assignments = range_assign(subscriptions, counts)

        def sync(
            b: Builder, version: int, assignments: dict[str, dict[str, list[int]]] = assignments
        ) -> Any:
            return b.SyncGroupRequest(
                group_id=member.group,
                generation_id=member.generation,
                member_id=member.member_id,
                group_instance_id=None,
                protocol_type="consumer",
                protocol_name="range",
                assignments=tuple(
                    b.SyncGroupRequestAssignment(member_id=m, assignment=encode_assignment(a))
                    for m, a in assignments.items()
                ),
            )

        synced = await client.call(
            SYNC_GROUP, sync, member.coordinator, timeout_s=member.rebalance_timeout_ms / 1000 + 5
        )
        if synced.error_code is ErrorCode.none:
            member.assignment = decode_assignment(bytes(synced.assignment or b""))
            member.needs_rejoin = False
            return
        if synced.error_code is ErrorCode.unknown_member_id:
            member.member_id = ""
        elif synced.error_code in (ErrorCode.not_coordinator, ErrorCode.coordinator_not_available):
            member.coordinator = -1
        elif synced.error_code not in (
            ErrorCode.rebalance_in_progress,
            ErrorCode.illegal_generation,
        ):
            raise AdminError(f"SyncGroup {member.group}: {error_name(synced.error_code)}")
        await asyncio.sleep(0.1 * min(attempt + 1, 5))
    raise AdminError(f"could not join group {member.group!r}")


async def heartbeat_loop(client: KafkaClient, member: GroupMember) -> None:
    """Heartbeat every ``heartbeat_interval_ms``; a rebalance or a lost membership
    sets ``needs_rejoin`` (the consume loop then joins again)."""
    while True:
        await asyncio.sleep(member.heartbeat_interval_ms / 1000)
        if member.needs_rejoin or member.generation < 0:
            continue
        try:
            response = await client.call(
                HEARTBEAT,
                lambda b, v: b.HeartbeatRequest(
                    group_id=member.group,
                    generation_id=member.generation,
                    member_id=member.member_id,
                    group_instance_id=None,
                ),
                member.coordinator,
            )
        except (OSError, ConnectionError):
            client.forget(member.coordinator)
            member.coordinator = -1
            member.needs_rejoin = True
            continue
        error = response.error_code
        if error is ErrorCode.none:
            continue
        if error is ErrorCode.unknown_member_id:
            member.member_id = ""
        if error in (ErrorCode.not_coordinator, ErrorCode.coordinator_not_available):
            member.coordinator = -1
        member.needs_rejoin = True


async def leave_group(client: KafkaClient, member: GroupMember) -> None:
    if not member.member_id or member.coordinator < 0:
        return
    with contextlib.suppress(OSError, ConnectionError, AdminError):
        await client.call(
            LEAVE_GROUP,
            lambda b, v: b.LeaveGroupRequest(
                group_id=member.group,
                member_id=member.member_id,
                members=(
                    b.MemberIdentity(
                        member_id=member.member_id, group_instance_id=None, reason=None
                    ),
                ),
            ),
            member.coordinator,
            timeout_s=5,
        )
