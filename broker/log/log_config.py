"""Per-topic log settings under Kafka's topic-config names.

Only the settings the log itself acts on live here; the metadata layer stores and
validates the full set of topic configs and hands us the relevant ones.

`cleanup.policy=compact` topics are compacted by the log cleaner (log_cleaner.py), which
reads delete.retention.ms, min.cleanable.dirty.ratio and min.compaction.lag.ms from here;
retention.ms/bytes apply only when the policy includes "delete", as in Kafka. An empty
cleanup.policy (Kafka accepts the empty list: its validator checks each item) is
neither: the log is neither deleted by retention nor compacted, only DeleteRecords
could trim it and Kafka refuses that too (POLICY_VIOLATION, no "delete").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"
LONG_MAX = 2**63 - 1
#: Kafka 4's message.timestamp.after.max.ms default, one hour (KIP-1030, KAFKA-16368;
#: Long.MAX_VALUE before 4.0). message.timestamp.before.max.ms stays Long.MAX_VALUE.
DEFAULT_TIMESTAMP_AFTER_MAX_MS = 3_600_000

_MIN_SEGMENT_BYTES = 14  # Kafka's lower bound (the smallest legacy record)
_INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1073741824  # segment.bytes
    retention_ms: int = 604800000  # retention.ms (-1: keep forever)
    retention_bytes: int = -1  # retention.bytes (-1: no size limit)
    max_message_bytes: int = 1048588  # max.message.bytes (largest batch accepted)
    message_timestamp_type: str = CREATE_TIME  # message.timestamp.type
    # KIP-937: a CreateTime record further before / after the broker's now than these is
    # refused at produce time (INVALID_TIMESTAMP; broker/replica/timestamp_validation.py)
    message_timestamp_before_max_ms: int = LONG_MAX  # message.timestamp.before.max.ms
    message_timestamp_after_max_ms: int = DEFAULT_TIMESTAMP_AFTER_MAX_MS  # ...after.max.ms
    cleanup_policy: str = "delete"  # cleanup.policy: "delete", "compact" or both
    index_interval_bytes: int = 4096  # index.interval.bytes
    # When the log is flushed (Kafka's recovery point moves to the log end): once this many
    # messages are unflushed (flush.messages), or by the log flusher once the last flush is
    # this old (flush.ms). Never by default: every append is written to the OS at once,
    # which survives a kill -9 of the process; only a power loss or kernel crash loses
    # what was not flushed — the replicas are the durability (a simulated crash drops it).
    flush_messages: int = LONG_MAX  # flush.messages
    flush_ms: int = LONG_MAX  # flush.ms
    # the log cleaner's (broker defaults: log.cleaner.delete.retention.ms,
    # log.cleaner.min.cleanable.ratio, log.cleaner.min.compaction.lag.ms)
    delete_retention_ms: int = 86400000  # delete.retention.ms (tombstones, once cleaned)
    min_cleanable_dirty_ratio: float = 0.5  # min.cleanable.dirty.ratio
    min_compaction_lag_ms: int = 0  # min.compaction.lag.ms

    @property
    def fsync_on_append(self) -> bool:
        """flush.messages=1: a disk log fsyncs the segment after every append."""
        return self.flush_messages == 1

    def __post_init__(self) -> None:
        _check(
            self.segment_bytes >= _MIN_SEGMENT_BYTES and self.segment_bytes <= _INT32_MAX,
            "segment.bytes",
            self.segment_bytes,
        )
        _check(self.retention_ms >= -1, "retention.ms", self.retention_ms)
        _check(self.retention_bytes >= -1, "retention.bytes", self.retention_bytes)
        _check(self.max_message_bytes >= 0, "max.message.bytes", self.max_message_bytes)
        _check(self.index_interval_bytes >= 0, "index.interval.bytes", self.index_interval_bytes)
        _check(self.delete_retention_ms >= 0, "delete.retention.ms", self.delete_retention_ms)
        _check(
            0.0 <= self.min_cleanable_dirty_ratio <= 1.0,
            "min.cleanable.dirty.ratio",
            self.min_cleanable_dirty_ratio,
        )
        _check(self.min_compaction_lag_ms >= 0, "min.compaction.lag.ms", self.min_compaction_lag_ms)
        _check(
            0 <= self.message_timestamp_before_max_ms <= LONG_MAX,
            "message.timestamp.before.max.ms",
            self.message_timestamp_before_max_ms,
        )
        _check(
            0 <= self.message_timestamp_after_max_ms <= LONG_MAX,
            "message.timestamp.after.max.ms",
            self.message_timestamp_after_max_ms,
        )
        _check(
            self.message_timestamp_type in (CREATE_TIME, LOG_APPEND_TIME),
            "message.timestamp.type",
            self.message_timestamp_type,
        )
        _check(
            all(p in ("delete", "compact") for p in self.cleanup_policies),
            "cleanup.policy",
            self.cleanup_policy,
        )

    @property
    def uses_log_append_time(self) -> bool:
        return self.message_timestamp_type == LOG_APPEND_TIME

    @property
    def cleanup_policies(self) -> list[str]:
        """cleanup.policy as Kafka's LIST: empty when the value is "" (no policy)."""
        return [p for p in self.cleanup_policy.split(",") if p]

    @property
    def deletes(self) -> bool:
        """Whether retention.ms / retention.bytes apply (cleanup.policy has delete)."""
        return "delete" in self.cleanup_policies

    @property
    def compacts(self) -> bool:
        """Whether the log cleaner compacts this log (cleanup.policy has compact)."""
        return "compact" in self.cleanup_policies

    @classmethod
    def from_topic_configs(
        cls, configs: Mapping[str, str], base: LogConfig | None = None
    ) -> LogConfig:
        """Build from Kafka topic configs (string values, as in CreateTopics).

        Keys this class does not know are ignored: they are other layers' settings.
        Raises ValueError naming the key and value of any bad setting.
        """
        changes: dict[str, Any] = {}
        for key, raw in configs.items():
            spec = _KEYS.get(key)
            if spec is None:
                continue
            field_name, parse = spec
            try:
                value = parse(raw)
            except ValueError:
                raise ValueError(f"invalid value {raw!r} for topic config {key}") from None
            changes[field_name] = value
        return replace(base or cls(), **changes)

    def to_topic_configs(self) -> dict[str, str]:
        """The Kafka names and string values (for DescribeConfigs)."""
        out: dict[str, str] = {}
        for key, (field_name, _) in _KEYS.items():
            out[key] = str(getattr(self, field_name))
        return out


def _check(ok: bool, key: str, value: object) -> None:
    if not ok:
        raise ValueError(f"invalid value {value!r} for topic config {key}")


def _parse_policy(raw: str) -> str:
    """cleanup.policy, a LIST that may be empty (Kafka's ``ValidList.in(compact,
    delete)`` checks only the items there are): no policy keeps the log whole."""
    policies = [p.strip() for p in raw.split(",") if p.strip()]
    if any(p not in ("delete", "compact") for p in policies):
        raise ValueError(raw)
    return ",".join(policies)


def _parse_timestamp_type(raw: str) -> str:
    if raw not in (CREATE_TIME, LOG_APPEND_TIME):
        raise ValueError(raw)
    return raw


_KEYS: dict[str, tuple[str, Any]] = {
    "segment.bytes": ("segment_bytes", int),
    "retention.ms": ("retention_ms", int),
    "retention.bytes": ("retention_bytes", int),
    "max.message.bytes": ("max_message_bytes", int),
    "message.timestamp.type": ("message_timestamp_type", _parse_timestamp_type),
    "message.timestamp.before.max.ms": ("message_timestamp_before_max_ms", int),
    "message.timestamp.after.max.ms": ("message_timestamp_after_max_ms", int),
    "cleanup.policy": ("cleanup_policy", _parse_policy),
    "index.interval.bytes": ("index_interval_bytes", int),
    "flush.messages": ("flush_messages", int),
    "flush.ms": ("flush_ms", int),
    "delete.retention.ms": ("delete_retention_ms", int),
    "min.cleanable.dirty.ratio": ("min_cleanable_dirty_ratio", float),
    "min.compaction.lag.ms": ("min_compaction_lag_ms", int),
}

assert {f.name for f in fields(LogConfig)} == {name for name, _ in _KEYS.values()}
