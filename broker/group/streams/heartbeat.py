"""StreamsGroupHeartbeat's request as the coordinator reads it, its answer, and Kafka's
checks of the request before any group is touched (``GroupCoordinatorService``'s
``throwIfStreamsGroupHeartbeatRequestIsInvalid`` and
``...IsUsingUnsupportedFeatures``, in Kafka 4.2's order and words)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from broker.group.consumer.errors import ApiError
from broker.group.streams.configured_topology import CreatableTopic
from broker.group.streams.streams_group_member import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    Endpoint,
)
from broker.group.streams.streams_topology import StreamsTopology
from broker.group.streams.tasks_tuple import TasksTuple

TopicPartitions = tuple[tuple[str, tuple[int, ...]], ...]


@dataclass(frozen=True)
class EndpointToPartitions:
    """A member's user endpoint and the partitions its active and standby tasks read."""

    endpoint: Endpoint
    active: TopicPartitions
    standby: TopicPartitions


@dataclass(frozen=True)
class StreamsGroupHeartbeatParams:
    group_id: str
    member_id: str
    member_epoch: int
    endpoint_information_epoch: int = 0
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    topology: StreamsTopology | None = None
    active_tasks: Mapping[str, tuple[int, ...]] | None = None
    standby_tasks: Mapping[str, tuple[int, ...]] | None = None
    warmup_tasks: Mapping[str, tuple[int, ...]] | None = None
    process_id: str | None = None
    user_endpoint: Endpoint | None = None
    client_tags: tuple[tuple[str, str], ...] | None = None
    has_task_offsets: bool = False
    has_task_end_offsets: bool = False
    shutdown_application: bool = False
    client_id: str = ""
    client_host: str = ""

    def owned_tasks(self) -> TasksTuple | None:
        """The tasks the member says it owns; None when it left them out."""
        if self.active_tasks is None or self.standby_tasks is None or self.warmup_tasks is None:
            return None
        return TasksTuple.of(self.active_tasks, self.standby_tasks, self.warmup_tasks)


@dataclass(frozen=True)
class StreamsGroupHeartbeatResult:
    error: ErrorCode = ErrorCode.none
    error_message: str | None = None
    member_id: str = ""
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    status: tuple[tuple[int, str], ...] = ()
    assignment: TasksTuple | None = None
    endpoint_information_epoch: int = 0
    partitions_by_user_endpoint: tuple[EndpointToPartitions, ...] | None = None
    internal_topics_to_create: Mapping[str, CreatableTopic] = field(default_factory=dict)


def _invalid(message: str) -> ApiError:
    return ApiError(ErrorCode.invalid_request, message)


def throw_if_unsupported(p: StreamsGroupHeartbeatParams) -> None:
    """Kafka 4.2's ``throwIfStreamsGroupHeartbeatRequestIsUsingUnsupportedFeatures``."""
    if p.instance_id is not None:
        raise _invalid("Static membership is not yet supported.")
    if p.has_task_offsets:
        raise _invalid("TaskOffsets are not supported yet.")
    if p.has_task_end_offsets:
        raise _invalid("TaskEndOffsets are not supported yet.")
    if p.warmup_tasks:
        raise _invalid("WarmupTasks are not supported yet.")
    if p.topology is not None and any(
        s.source_topic_regex for s in p.topology.subtopologies.values()
    ):
        raise _invalid("Regular expressions for source topics are not supported yet.")


def throw_if_invalid(p: StreamsGroupHeartbeatParams) -> None:
    """Kafka 4.2's ``throwIfStreamsGroupHeartbeatRequestIsInvalid``."""
    for value, name in (
        (p.member_id, "MemberId"),
        (p.group_id, "GroupId"),
        (p.instance_id, "InstanceId"),
        (p.rack_id, "RackId"),
    ):
        if value is not None and not value.strip():
            raise _invalid(f"{name} can't be empty.")
    owned = (p.active_tasks, p.standby_tasks, p.warmup_tasks)
    if p.member_epoch == JOIN_GROUP_MEMBER_EPOCH:
        if p.rebalance_timeout_ms == -1:
            raise _invalid("RebalanceTimeoutMs must be provided in first request.")
        for tasks, kind in zip(owned, ("ActiveTasks", "StandbyTasks", "WarmupTasks"), strict=True):
            if tasks:
                raise _invalid(f"{kind} must be empty when (re-)joining.")
        if p.topology is None:
            raise _invalid("Topology must be non-null when (re-)joining.")
        _throw_if_invalid_topology(p.topology)
    elif p.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if p.instance_id is None:
            raise _invalid("InstanceId can't be null.")
    elif p.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        raise _invalid(f"MemberEpoch is {p.member_epoch}, but must be greater than or equal to -2.")
    if any(t is not None for t in owned) and any(t is None for t in owned):
        raise _invalid("If one task-type is non-null, all must be non-null.")
    if p.member_epoch != JOIN_GROUP_MEMBER_EPOCH and p.topology is not None:
        raise _invalid("Topology can only be provided when (re-)joining.")


def _throw_if_invalid_topology(topology: StreamsTopology) -> None:
    for s in topology.subtopologies.values():
        for info in s.state_changelog_topics:
            if info.partitions != 0:
                raise ApiError(
                    ErrorCode.streams_invalid_topology,
                    f"Changelog topic {info.name} must have an undefined partition count, "
                    f"but it is set to {info.partitions}.",
                )
