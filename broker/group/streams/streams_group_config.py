"""The streams group coordinator's settings, Kafka 4.2's ``group.streams.*`` broker
configs (``GroupCoordinatorConfig``), names and defaults; the checks are Kafka's."""

from __future__ import annotations

from dataclasses import dataclass

from broker.group.group_config import _FromBrokerConfig


@dataclass(frozen=True)
class StreamsGroupConfig(_FromBrokerConfig):
    group_streams_session_timeout_ms: int = 45000  # group.streams.session.timeout.ms
    group_streams_min_session_timeout_ms: int = 45000  # group.streams.min.session.timeout.ms
    group_streams_max_session_timeout_ms: int = 60000  # group.streams.max.session.timeout.ms
    group_streams_heartbeat_interval_ms: int = 5000  # group.streams.heartbeat.interval.ms
    group_streams_min_heartbeat_interval_ms: int = 5000  # group.streams.min.heartbeat.interval.ms
    group_streams_max_heartbeat_interval_ms: int = 15000  # group.streams.max.heartbeat.interval.ms
    group_streams_max_size: int = 2147483647  # group.streams.max.size
    group_streams_num_standby_replicas: int = 0  # group.streams.num.standby.replicas
    group_streams_max_standby_replicas: int = 2  # group.streams.max.standby.replicas
    group_coordinator_rebalance_protocols: str = (
        "classic,consumer,streams"  # group.coordinator.rebalance.protocols
    )

    def __post_init__(self) -> None:
        def require(ok: bool, what: str) -> None:
            if not ok:
                raise ValueError(what)

        require(
            self.group_streams_min_session_timeout_ms
            <= self.group_streams_session_timeout_ms
            <= self.group_streams_max_session_timeout_ms,
            "group.streams.session.timeout.ms must be within "
            "group.streams.min.session.timeout.ms and group.streams.max.session.timeout.ms",
        )
        require(
            self.group_streams_min_heartbeat_interval_ms
            <= self.group_streams_heartbeat_interval_ms
            <= self.group_streams_max_heartbeat_interval_ms,
            "group.streams.heartbeat.interval.ms must be within "
            "group.streams.min.heartbeat.interval.ms and group.streams.max.heartbeat.interval.ms",
        )
        require(
            self.group_streams_heartbeat_interval_ms < self.group_streams_session_timeout_ms,
            "group.streams.heartbeat.interval.ms must be less than "
            "group.streams.session.timeout.ms",
        )
        require(self.group_streams_max_size >= 1, "group.streams.max.size must be >= 1")
        require(
            0 <= self.group_streams_num_standby_replicas <= self.group_streams_max_standby_replicas,
            "group.streams.num.standby.replicas must be less than or equal to "
            "group.streams.max.standby.replicas",
        )

    @property
    def streams_protocol_enabled(self) -> bool:
        """``streams`` is in ``group.coordinator.rebalance.protocols``."""
        protocols = self.group_coordinator_rebalance_protocols.split(",")
        return "streams" in (p.strip() for p in protocols)
