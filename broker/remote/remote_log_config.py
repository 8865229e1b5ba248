"""A topic's tiered-storage configs, and Kafka's checks of them.

Topic configs (Kafka's names and defaults): ``remote.storage.enable`` (false),
``local.retention.ms`` / ``local.retention.bytes`` (-2: the same as ``retention.ms`` /
``retention.bytes``), ``remote.log.copy.disable`` and ``remote.log.delete.on.disable``
(false). ``remote_storage_error`` is Kafka's LogConfig.validateTopicLogConfigValues for
them, with Kafka's messages: remote storage needs the broker's
``remote.log.storage.system.enable``, refuses a compacted topic, and local retention may
not exceed the total.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from broker.log.log_config import LogConfig

#: local.retention.* = -2: "as the total retention" (Kafka's default).
SAME_AS_TOTAL = -2


def _bool(value: str | None) -> bool:
    return value is not None and value.strip().lower() == "true"


@dataclass(frozen=True, slots=True)
class RemoteTopicConfig:
    remote_storage_enable: bool = False
    local_retention_ms: int = SAME_AS_TOTAL
    local_retention_bytes: int = SAME_AS_TOTAL
    retention_ms: int = 604800000
    retention_bytes: int = -1
    remote_log_copy_disable: bool = False
    remote_log_delete_on_disable: bool = False

    @classmethod
    def from_topic_configs(cls, configs: Mapping[str, str]) -> RemoteTopicConfig:
        """From a topic's effective configs (overrides over the broker's defaults)."""
        return cls(
            remote_storage_enable=_bool(configs.get("remote.storage.enable")),
            local_retention_ms=int(configs.get("local.retention.ms", SAME_AS_TOTAL)),
            local_retention_bytes=int(configs.get("local.retention.bytes", SAME_AS_TOTAL)),
            retention_ms=int(configs.get("retention.ms", 604800000)),
            retention_bytes=int(configs.get("retention.bytes", -1)),
            remote_log_copy_disable=_bool(configs.get("remote.log.copy.disable")),
            remote_log_delete_on_disable=_bool(configs.get("remote.log.delete.on.disable")),
        )

    @property
    def effective_local_retention_ms(self) -> int:
        """Kafka's localRetentionMs(): -2 follows retention.ms."""
        if self.local_retention_ms == SAME_AS_TOTAL:
            return self.retention_ms
        return self.local_retention_ms

    @property
    def effective_local_retention_bytes(self) -> int:
        if self.local_retention_bytes == SAME_AS_TOTAL:
            return self.retention_bytes
        return self.local_retention_bytes


def _invalid(name: str, value: int, message: str) -> str:
    """Kafka's ConfigException(name, value, message) text."""
    return f"Invalid value {value} for configuration {name}: {message}"


def remote_storage_error(configs: Mapping[str, str], system_enabled: bool) -> str | None:
    """Kafka's checks of a topic's effective configs: the message, or None when fine."""
    config = RemoteTopicConfig.from_topic_configs(configs)
    if not config.remote_storage_enable:
        return None
    if not system_enabled:
        return (
            "Tiered Storage functionality is disabled in the broker. "
            "Topic cannot be configured with remote log storage."
        )
    policies = [p.strip() for p in configs.get("cleanup.policy", "delete").split(",") if p.strip()]
    if policies and policies != ["delete"]:
        return (
            "Remote log storage only supports topics with cleanup.policy=delete "
            "or cleanup.policy being an empty list."
        )
    for total_name, local_name, total, local in (
        (
            "retention.bytes",
            "local.retention.bytes",
            config.retention_bytes,
            config.local_retention_bytes,
        ),
        ("retention.ms", "local.retention.ms", config.retention_ms, config.local_retention_ms),
    ):
        if total != -1 and local != SAME_AS_TOTAL:
            if local == -1:
                return _invalid(
                    local_name,
                    local,
                    f"Value must not be -1 as {total_name} value is set as {total}.",
                )
            if local > total:
                return _invalid(
                    local_name,
                    local,
                    f"Value must not be more than {total_name} property value: {total}",
                )
    return None


def local_log_config(config: LogConfig, remote: RemoteTopicConfig) -> LogConfig:
    """A tiered topic's log keeps local.retention.ms/.bytes (Kafka's UnifiedLog
    deletes local segments by them once copied); others keep their retention."""
    if not remote.remote_storage_enable:
        return config
    return replace(
        config,
        retention_ms=remote.effective_local_retention_ms,
        retention_bytes=remote.effective_local_retention_bytes,
    )
