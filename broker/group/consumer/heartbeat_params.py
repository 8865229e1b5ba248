"""A ConsumerGroupHeartbeat's fields and its answer, as the coordinator takes and gives them.

``None`` (and -1 for the rebalance timeout) means "not sent": a lightweight heartbeat
leaves out what did not change since the last one, as the wire format does.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from broker.group.consumer.consumer_group_member import Assignment
from broker.group.consumer.current_assignment_builder import OwnedTopicPartitions


@dataclass(frozen=True, slots=True)
class ConsumerGroupHeartbeatParams:
    group_id: str
    member_id: str
    member_epoch: int
    api_version: int = 1
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned_topic_partitions: OwnedTopicPartitions | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class ConsumerGroupHeartbeatResult:
    error: ErrorCode = ErrorCode.none
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    # None: not sent (the member's assignment did not change and the request was light).
    assignment: Assignment | None = None

    def topic_partitions(self) -> list[tuple[uuid.UUID, list[int]]]:
        """The assignment as the response lists it, in a stable order."""
        if self.assignment is None:
            return []
        return [
            (topic_id, sorted(partitions))
            for topic_id, partitions in sorted(self.assignment.items(), key=lambda kv: str(kv[0]))
        ]
