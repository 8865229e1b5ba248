"""The consumer group coordinator's settings, under Kafka's broker config names.

Each field is the snake_case form of the Kafka key in its comment, with Kafka 4's default
(``GroupCoordinatorConfig``), so ``from_broker_config`` is a plain copy; the checks are
Kafka's ``require``s. ``group.consumer.assignors`` takes the short names (``uniform``,
``range``) or Kafka's class names for them; the first is the default assignor.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.group.group_config import _FromBrokerConfig

ASSIGNOR_CLASS_NAMES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}
REBALANCE_PROTOCOLS = ("classic", "consumer", "streams")
# Kafka's ConsumerGroupMigrationPolicy (case-insensitive): which online conversions of a
# group with members are allowed.
MIGRATION_POLICIES = ("disabled", "upgrade", "downgrade", "bidirectional")


def split_list(text: str) -> tuple[str, ...]:
    """A Kafka LIST value: comma-separated, blanks trimmed, empties dropped."""
    return tuple(item.strip() for item in text.split(",") if item.strip())


def assignor_names(text: str) -> tuple[str, ...]:
    return tuple(ASSIGNOR_CLASS_NAMES.get(name, name) for name in split_list(text))


@dataclass(frozen=True)
class ConsumerGroupConfig(_FromBrokerConfig):
    """KIP-848 group settings (Kafka's names and defaults)."""

    group_consumer_session_timeout_ms: int = 45000  # group.consumer.session.timeout.ms
    group_consumer_min_session_timeout_ms: int = 45000  # group.consumer.min.session.timeout.ms
    group_consumer_max_session_timeout_ms: int = 60000  # group.consumer.max.session.timeout.ms
    group_consumer_heartbeat_interval_ms: int = 5000  # group.consumer.heartbeat.interval.ms
    group_consumer_min_heartbeat_interval_ms: int = 5000  # group.consumer.min.heartbeat.interval.ms
    group_consumer_max_heartbeat_interval_ms: int = (
        15000  # group.consumer.max.heartbeat.interval.ms
    )
    group_consumer_max_size: int = 2147483647  # group.consumer.max.size
    group_consumer_assignors: str = "uniform,range"  # group.consumer.assignors
    group_coordinator_rebalance_protocols: str = (
        "classic,consumer,streams"  # group.coordinator.rebalance.protocols
    )
    group_consumer_migration_policy: str = "bidirectional"  # group.consumer.migration.policy

    def __post_init__(self) -> None:
        def require(ok: bool, what: str) -> None:
            if not ok:
                raise ValueError(what)

        require(
            self.group_consumer_min_session_timeout_ms
            <= self.group_consumer_session_timeout_ms
            <= self.group_consumer_max_session_timeout_ms,
            "group.consumer.session.timeout.ms must be within "
            "group.consumer.min.session.timeout.ms and group.consumer.max.session.timeout.ms",
        )
        require(
            self.group_consumer_min_heartbeat_interval_ms
            <= self.group_consumer_heartbeat_interval_ms
            <= self.group_consumer_max_heartbeat_interval_ms,
            "group.consumer.heartbeat.interval.ms must be within "
            "group.consumer.min.heartbeat.interval.ms and group.consumer.max.heartbeat.interval.ms",
        )
        require(
            self.group_consumer_heartbeat_interval_ms < self.group_consumer_session_timeout_ms,
            "group.consumer.heartbeat.interval.ms must be less than "
            "group.consumer.session.timeout.ms",
        )
        require(self.group_consumer_max_size >= 1, "group.consumer.max.size must be >= 1")
        names = self.assignors
        require(bool(names), "group.consumer.assignors must name at least one assignor")
        unknown = [n for n in names if n not in ("uniform", "range")]
        require(not unknown, f"group.consumer.assignors: unknown assignor(s) {unknown}")
        protocols = split_list(self.group_coordinator_rebalance_protocols)
        bad = [p for p in protocols if p not in REBALANCE_PROTOCOLS]
        require(not bad, f"group.coordinator.rebalance.protocols: unsupported {bad}")
        require(
            "classic" in protocols, "group.coordinator.rebalance.protocols must contain classic"
        )
        require(
            self.group_consumer_migration_policy.lower() in MIGRATION_POLICIES,
            f"Invalid value {self.group_consumer_migration_policy} for configuration "
            f"group.consumer.migration.policy: String must be one of (case insensitive): "
            f"{', '.join(p.upper() for p in MIGRATION_POLICIES)}",
        )

    @property
    def assignors(self) -> tuple[str, ...]:
        return assignor_names(self.group_consumer_assignors)

    @property
    def upgrade_enabled(self) -> bool:
        """Kafka's ``ConsumerGroupMigrationPolicy.isUpgradeEnabled``."""
        return self.group_consumer_migration_policy.lower() in ("upgrade", "bidirectional")

    @property
    def downgrade_enabled(self) -> bool:
        """Kafka's ``ConsumerGroupMigrationPolicy.isDowngradeEnabled``."""
        return self.group_consumer_migration_policy.lower() in ("downgrade", "bidirectional")

    @property
    def consumer_protocol_enabled(self) -> bool:
        return "consumer" in split_list(self.group_coordinator_rebalance_protocols)
