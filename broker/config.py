"""Broker configuration under Kafka's own config names.

Users bring a ``server.properties`` from a real Kafka installation or pass
``--override key=value``; both use Kafka's dotted names, so the model is keyed by those
names (pydantic aliases) and rejects anything it does not know. A typo such as
``num.partiton=3`` must stop the broker at start with a message that names the key,
not be ignored silently as a default would hide it.

Only the keys minikafka acts on are accepted. Defaults are Kafka's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator


class ConfigError(ValueError):
    """A configuration key or value the broker cannot start with."""


class BrokerConfig(BaseModel):
    """Kafka broker settings that minikafka honours (Kafka's names and defaults)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    broker_id: int = Field(0, alias="broker.id", ge=0)
    log_dirs: str | None = Field(None, alias="log.dirs")
    num_partitions: int = Field(1, alias="num.partitions", ge=1)
    default_replication_factor: int = Field(1, alias="default.replication.factor", ge=1)
    auto_create_topics_enable: bool = Field(True, alias="auto.create.topics.enable")
    delete_topic_enable: bool = Field(True, alias="delete.topic.enable")
    min_insync_replicas: int = Field(1, alias="min.insync.replicas", ge=1)
    socket_request_max_bytes: int = Field(104857600, alias="socket.request.max.bytes", ge=1024)
    message_max_bytes: int = Field(1048588, alias="message.max.bytes", ge=0)
    # A connection with no request or response in flight for this long is closed.
    connections_max_idle_ms: int = Field(600000, alias="connections.max.idle.ms", ge=1)
    # The listener's accept backlog (Kafka's default 50).
    socket_listen_backlog_size: int = Field(50, alias="socket.listen.backlog.size", ge=1)

    log_segment_bytes: int = Field(1073741824, alias="log.segment.bytes", ge=14)
    log_retention_hours: int = Field(168, alias="log.retention.hours")
    log_retention_minutes: int | None = Field(None, alias="log.retention.minutes")
    log_retention_ms: int | None = Field(None, alias="log.retention.ms")
    log_retention_bytes: int = Field(-1, alias="log.retention.bytes")
    log_retention_check_interval_ms: int = Field(
        300000, alias="log.retention.check.interval.ms", ge=1
    )
    log_message_timestamp_type: Literal["CreateTime", "LogAppendTime"] = Field(
        "CreateTime", alias="log.message.timestamp.type"
    )
    log_cleanup_policy: Literal["delete", "compact", "compact,delete", "delete,compact"] = Field(
        "delete", alias="log.cleanup.policy"
    )
    log_flush_interval_messages: int = Field(
        9223372036854775807, alias="log.flush.interval.messages", ge=1
    )

    replica_lag_time_max_ms: int = Field(30000, alias="replica.lag.time.max.ms", ge=1)
    replica_fetch_wait_max_ms: int = Field(500, alias="replica.fetch.wait.max.ms", ge=0)
    replica_fetch_min_bytes: int = Field(1, alias="replica.fetch.min.bytes", ge=1)
    replica_fetch_max_bytes: int = Field(1048576, alias="replica.fetch.max.bytes", ge=0)

    fetch_purgatory_purge_interval_requests: int = Field(
        1000, alias="fetch.purgatory.purge.interval.requests", ge=1
    )
    producer_purgatory_purge_interval_requests: int = Field(
        1000, alias="producer.purgatory.purge.interval.requests", ge=1
    )

    group_initial_rebalance_delay_ms: int = Field(
        3000, alias="group.initial.rebalance.delay.ms", ge=0
    )
    group_min_session_timeout_ms: int = Field(6000, alias="group.min.session.timeout.ms", ge=0)
    group_max_session_timeout_ms: int = Field(1800000, alias="group.max.session.timeout.ms", ge=0)
    group_max_size: int = Field(2147483647, alias="group.max.size", ge=1)
    offsets_topic_num_partitions: int = Field(50, alias="offsets.topic.num.partitions", ge=1)
    offsets_topic_replication_factor: int = Field(3, alias="offsets.topic.replication.factor", ge=1)
    offsets_retention_minutes: int = Field(10080, alias="offsets.retention.minutes", ge=1)
    offsets_retention_check_interval_ms: int = Field(
        600000, alias="offsets.retention.check.interval.ms", ge=1
    )
    # Offset commits and group metadata wait for the offsets topic's ISR (acks=all) up to
    # this long, as Kafka's coordinator does; the timeout answers COORDINATOR_NOT_AVAILABLE.
    offsets_commit_timeout_ms: int = Field(5000, alias="offsets.commit.timeout.ms", ge=1)
    offsets_commit_required_acks: int = Field(-1, alias="offsets.commit.required.acks", ge=-1, le=1)

    transactional_id_expiration_ms: int = Field(
        604800000, alias="transactional.id.expiration.ms", ge=1
    )

    @model_validator(mode="after")
    def _check_session_bounds(self) -> BrokerConfig:
        if self.group_min_session_timeout_ms > self.group_max_session_timeout_ms:
            raise ValueError(
                "group.min.session.timeout.ms must not exceed group.max.session.timeout.ms"
            )
        return self

    @property
    def log_retention_effective_ms(self) -> int:
        """Kafka's precedence: log.retention.ms, then .minutes, then .hours."""
        if self.log_retention_ms is not None:
            return self.log_retention_ms
        if self.log_retention_minutes is not None:
            return self.log_retention_minutes * 60_000
        return self.log_retention_hours * 3_600_000

    def default_topic_configs(self) -> dict[str, str]:
        """Topic-level configs a new topic inherits from the broker (Kafka's mapping)."""
        return {
            "cleanup.policy": self.log_cleanup_policy,
            "max.message.bytes": str(self.message_max_bytes),
            "message.timestamp.type": self.log_message_timestamp_type,
            "min.insync.replicas": str(self.min_insync_replicas),
            "retention.bytes": str(self.log_retention_bytes),
            "retention.ms": str(self.log_retention_effective_ms),
            "segment.bytes": str(self.log_segment_bytes),
        }


def parse_properties(text: str, source: str = "properties") -> dict[str, str]:
    """Parse Java-properties style ``key=value`` lines (``#``/``!`` comments, ``:`` too)."""
    result: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        for sep in ("=", ":"):
            if sep in line:
                key, value = line.split(sep, 1)
                break
        else:
            raise ConfigError(f"{source}:{number}: expected key=value, got {raw!r}")
        result[key.strip()] = value.strip()
    return result


def parse_overrides(overrides: Iterable[str]) -> dict[str, str]:
    """Parse ``--override key=value`` arguments."""
    result: dict[str, str] = {}
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"--override expects key=value, got {item!r}")
        key, value = item.split("=", 1)
        result[key.strip()] = value.strip()
    return result


def load_config(
    properties_file: Path | None = None, overrides: Mapping[str, str] | None = None
) -> BrokerConfig:
    """Build a validated config; errors name the offending key and value."""
    values: dict[str, str] = {}
    if properties_file is not None:
        try:
            text = properties_file.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read config file {properties_file}: {exc}") from exc
        values.update(parse_properties(text, str(properties_file)))
    values.update(overrides or {})
    try:
        return BrokerConfig.model_validate(values)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            key = ".".join(str(part) for part in error["loc"]) or "config"
            if error["type"] == "extra_forbidden":
                problems.append(f"unknown config key {key!r}")
            else:
                shown = values.get(key, error.get("input"))
                problems.append(f"invalid value {shown!r} for {key!r}: {error['msg']}")
        raise ConfigError("; ".join(problems)) from None
