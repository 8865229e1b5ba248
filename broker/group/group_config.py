"""The coordinator's settings, under Kafka's broker config names, split as Kafka splits them.

``GroupConfig`` (``group.*``) is what the :class:`~broker.group.group_coordinator.GroupCoordinator`
reads; ``OffsetConfig`` (``offsets.*``, ``offset.metadata.max.bytes``) is what the
:class:`~broker.group.group_metadata_manager.GroupMetadataManager` reads. Each field is
the snake_case form of the Kafka key in its comment, with Kafka's default, so
``from_broker_config(broker_config)`` is a plain copy.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Self

# Kafka's GroupCoordinator.NewMemberJoinTimeoutMs: a member added by a JoinGroup cannot
# heartbeat until that JoinGroup is answered, so it gets this long instead of its
# session timeout before it is dropped (it would have retried if still alive).
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


class _FromBrokerConfig:
    @classmethod
    def from_broker_config(cls, config: Any) -> Self:
        """Copy the fields of the same name from a broker config object (BrokerConfig)."""
        values = {
            f.name: getattr(config, f.name)
            for f in fields(cls)  # type: ignore[arg-type]
            if getattr(config, f.name, None) is not None
        }
        return cls(**values)


@dataclass(frozen=True)
class GroupConfig(_FromBrokerConfig):
    """Group membership settings (Kafka's ``GroupConfig``: names and defaults)."""

    group_initial_rebalance_delay_ms: int = 3000  # group.initial.rebalance.delay.ms
    group_min_session_timeout_ms: int = 6000  # group.min.session.timeout.ms
    group_max_session_timeout_ms: int = 1800000  # group.max.session.timeout.ms
    group_max_size: int = 2147483647  # group.max.size

    def __post_init__(self) -> None:
        if self.group_initial_rebalance_delay_ms < 0:
            raise ValueError("group.initial.rebalance.delay.ms must be >= 0")
        if self.group_min_session_timeout_ms > self.group_max_session_timeout_ms:
            raise ValueError(
                "group.min.session.timeout.ms must not exceed group.max.session.timeout.ms"
            )
        if self.group_max_size < 1:
            raise ValueError("group.max.size must be >= 1")


@dataclass(frozen=True)
class OffsetConfig(_FromBrokerConfig):
    """Offsets-topic settings (Kafka's ``OffsetConfig``: names and defaults)."""

    offset_metadata_max_bytes: int = 4096  # offset.metadata.max.bytes
    offsets_retention_minutes: int = 10080  # offsets.retention.minutes (7 days)
    offsets_retention_check_interval_ms: int = 600000  # offsets.retention.check.interval.ms
    offsets_topic_num_partitions: int = 50  # offsets.topic.num.partitions
    offsets_topic_replication_factor: int = 3  # offsets.topic.replication.factor
    offsets_commit_timeout_ms: int = 5000  # offsets.commit.timeout.ms
    offsets_commit_required_acks: int = -1  # offsets.commit.required.acks
    offsets_topic_segment_bytes: int = 104857600  # offsets.topic.segment.bytes
    offsets_load_buffer_size: int = 5242880  # offsets.load.buffer.size

    def __post_init__(self) -> None:
        if self.offsets_topic_num_partitions < 1:
            raise ValueError("offsets.topic.num.partitions must be >= 1")
        if self.offsets_topic_replication_factor < 1:
            raise ValueError("offsets.topic.replication.factor must be >= 1")
        if self.offsets_retention_check_interval_ms < 1:
            raise ValueError("offsets.retention.check.interval.ms must be >= 1")
        if self.offsets_load_buffer_size < 1:
            raise ValueError("offsets.load.buffer.size must be >= 1")

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60 * 1000
