"""Share groups' settings (KIP-932), under Kafka's broker config names.

Each field is the snake_case form of the Kafka key in its comment, with Kafka 4.2's
default (``GroupCoordinatorConfig``, ``ShareGroupConfig``, ``ShareSessionCache``), so
``from_broker_config`` is a plain copy; ``__post_init__`` checks Kafka's bounds.

Difference from Kafka: share groups are on unless ``group.share.enable`` (Kafka 4.0's
internal switch) is false; Kafka 4.1+ turns them on with the ``share.version`` feature
instead, which ApiVersions reports here as finalized 1 while they are on. (Kafka 4.0
also wanted ``share`` in ``group.coordinator.rebalance.protocols``; the consumer group
coordinator's config owns that key and accepts only classic and consumer.)
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.group.group_config import _FromBrokerConfig


@dataclass(frozen=True)
class ShareGroupConfig(_FromBrokerConfig):
    """Share-group membership and share-partition settings (Kafka's names, defaults)."""

    group_share_enable: bool = True  # group.share.enable
    group_share_session_timeout_ms: int = 45000  # group.share.session.timeout.ms
    group_share_min_session_timeout_ms: int = 45000  # group.share.min.session.timeout.ms
    group_share_max_session_timeout_ms: int = 60000  # group.share.max.session.timeout.ms
    group_share_heartbeat_interval_ms: int = 5000  # group.share.heartbeat.interval.ms
    group_share_min_heartbeat_interval_ms: int = 5000  # group.share.min.heartbeat.interval.ms
    group_share_max_heartbeat_interval_ms: int = 15000  # group.share.max.heartbeat.interval.ms
    group_share_max_size: int = 200  # group.share.max.size
    group_share_record_lock_duration_ms: int = 30000  # group.share.record.lock.duration.ms
    group_share_min_record_lock_duration_ms: int = 15000  # group.share.min.record.lock.duration.ms
    group_share_max_record_lock_duration_ms: int = 60000  # group.share.max.record.lock.duration.ms
    group_share_delivery_count_limit: int = 5  # group.share.delivery.count.limit
    group_share_min_delivery_count_limit: int = 2  # group.share.min.delivery.count.limit
    group_share_max_delivery_count_limit: int = 10  # group.share.max.delivery.count.limit
    group_share_partition_max_record_locks: int = 2000  # group.share.partition.max.record.locks
    # group.share.min.partition.max.record.locks, group.share.max.partition.max.record.locks
    group_share_min_partition_max_record_locks: int = 100
    group_share_max_partition_max_record_locks: int = 10000
    group_share_max_share_sessions: int = 2000  # group.share.max.share.sessions
    share_fetch_purgatory_purge_interval_requests: int = (
        1000  # share.fetch.purgatory.purge.interval.requests
    )

    def __post_init__(self) -> None:
        def require(ok: bool, what: str) -> None:
            if not ok:
                raise ValueError(what)

        require(
            self.group_share_min_session_timeout_ms
            <= self.group_share_session_timeout_ms
            <= self.group_share_max_session_timeout_ms,
            "group.share.session.timeout.ms must be within "
            "group.share.min.session.timeout.ms and group.share.max.session.timeout.ms",
        )
        require(
            self.group_share_min_heartbeat_interval_ms
            <= self.group_share_heartbeat_interval_ms
            <= self.group_share_max_heartbeat_interval_ms,
            "group.share.heartbeat.interval.ms must be within "
            "group.share.min.heartbeat.interval.ms and group.share.max.heartbeat.interval.ms",
        )
        require(
            self.group_share_heartbeat_interval_ms < self.group_share_session_timeout_ms,
            "group.share.heartbeat.interval.ms must be less than group.share.session.timeout.ms",
        )
        require(
            1000 <= self.group_share_record_lock_duration_ms <= 3600000,
            "group.share.record.lock.duration.ms must be in [1000, 3600000]",
        )
        require(
            self.group_share_min_record_lock_duration_ms
            <= self.group_share_record_lock_duration_ms
            <= self.group_share_max_record_lock_duration_ms,
            "group.share.record.lock.duration.ms must be within "
            "group.share.min.record.lock.duration.ms and "
            "group.share.max.record.lock.duration.ms",
        )
        require(
            2 <= self.group_share_delivery_count_limit <= 10,
            "group.share.delivery.count.limit must be in [2, 10]",
        )
        require(
            100 <= self.group_share_partition_max_record_locks <= 10000,
            "group.share.partition.max.record.locks must be in [100, 10000]",
        )
        require(1 <= self.group_share_max_size <= 1000, "group.share.max.size must be in [1, 1000]")
        require(
            self.group_share_max_share_sessions >= 0,
            "group.share.max.share.sessions must be >= 0",
        )
