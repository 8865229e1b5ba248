"""Per-group configs (KIP-848, KIP-932, KIP-1240): Kafka's ``GroupConfig``, ``GroupConfigManager``.

A GROUP config resource (resource type 32 in DescribeConfigs and IncrementalAlterConfigs)
overrides, for one group id, the broker's group settings. The names, types, lower bounds
and checks are Kafka 4's ``GroupConfig``:

* ``consumer.session.timeout.ms`` and ``consumer.heartbeat.interval.ms``: INT, at least
  1, within the broker's ``group.consumer.min/max.session.timeout.ms`` and
  ``group.consumer.min/max.heartbeat.interval.ms``;
* ``share.session.timeout.ms``, ``share.heartbeat.interval.ms`` (INT, at least 1),
  ``share.record.lock.duration.ms`` (INT, at least 1000), and KIP-1240's
  ``share.delivery.count.limit`` (INT, at least 2) and
  ``share.partition.max.record.locks`` (INT, at least 100), each within the broker's
  configured ``group.share.min/max.*`` bounds (``ShareGroupConfig``: a broker started
  with ``group.share.min.record.lock.duration.ms=1000`` accepts a group's 5000);
* ``share.auto.offset.reset`` (STRING, default ``latest``): where a share partition of
  the group with no durable state starts — ``latest``, ``earliest`` or
  ``by_duration:<ISO-8601 duration>`` (Kafka's ``ShareGroupAutoOffsetResetStrategy``;
  read by the ``SharePartitionManager`` when it initialises a share partition);
* ``share.isolation.level`` (STRING, ``read_uncommitted`` or ``read_committed``): a
  read_committed group's share partitions end at the last stable offset and archive
  aborted records;
* ``share.renew.acknowledge.enable`` (BOOLEAN, KIP-1222): whether the group's members
  may RENEW their acquisition locks; false by default, as Kafka 4.3 (trunk turned it on);
* ``errors.deadletterqueue.topic.name`` (STRING, not starting with ``__``) and
  ``errors.deadletterqueue.copy.record.enable`` (BOOLEAN), KIP-1191's dead-letter queue;

and each session timeout must be greater than its heartbeat interval. As Kafka 4.2, the
whole resulting set of a group's INT overrides is validated, the unset ones at
``GroupConfig``'s defaults (45000, 5000, 45000, 5000, 30000, 5, 2000); every failure is
INVALID_CONFIG with Kafka's message ("Unknown group config name: x", "Invalid value x for
configuration y: ...", "consumer.session.timeout.ms must be greater than or equal to
group.consumer.min.session.timeout.ms", ...).

DescribeConfigs lists them all, each with its group's override (source GROUP_CONFIG, the
one synonym) or the broker's value of its ``group.*`` key (source DEFAULT_CONFIG, no
synonym), as Kafka's ``ConfigHelper.createGroupConfigEntry``.

The overrides are cluster state (Kafka keeps them in the metadata log): one
``GroupConfigStore`` per cluster, shared by its brokers, durable in ``group-configs.json``
in the data directory (``atomic_file``). Each broker's ``GroupConfigManager`` reads it
with that broker's bounds and defaults; the consumer group coordinator asks it for a
group's session timeout and heartbeat interval, the share partition manager for the
share.* settings of a group's share partitions.

Where this differs from Kafka: nothing is removed when a group is deleted (neither does
Kafka 4.0).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from broker.cluster.atomic_file import read_json, write_json_atomic
from broker.cluster.cluster_metadata import MetadataError
from broker.group.share.share_group_config import ShareGroupConfig

if TYPE_CHECKING:
    from broker.group.consumer.consumer_group_config import ConsumerGroupConfig
    from broker.group.streams.streams_group_config import StreamsGroupConfig

CONSUMER_SESSION_TIMEOUT_MS = "consumer.session.timeout.ms"
CONSUMER_HEARTBEAT_INTERVAL_MS = "consumer.heartbeat.interval.ms"
SHARE_SESSION_TIMEOUT_MS = "share.session.timeout.ms"
SHARE_HEARTBEAT_INTERVAL_MS = "share.heartbeat.interval.ms"
SHARE_RECORD_LOCK_DURATION_MS = "share.record.lock.duration.ms"
SHARE_DELIVERY_COUNT_LIMIT = "share.delivery.count.limit"
SHARE_PARTITION_MAX_RECORD_LOCKS = "share.partition.max.record.locks"
SHARE_AUTO_OFFSET_RESET = "share.auto.offset.reset"
SHARE_ISOLATION_LEVEL = "share.isolation.level"
SHARE_RENEW_ACKNOWLEDGE_ENABLE = "share.renew.acknowledge.enable"
ERRORS_DEADLETTERQUEUE_TOPIC_NAME = "errors.deadletterqueue.topic.name"
ERRORS_DEADLETTERQUEUE_COPY_RECORD_ENABLE = "errors.deadletterqueue.copy.record.enable"
STREAMS_SESSION_TIMEOUT_MS = "streams.session.timeout.ms"
STREAMS_HEARTBEAT_INTERVAL_MS = "streams.heartbeat.interval.ms"
STREAMS_NUM_STANDBY_REPLICAS = "streams.num.standby.replicas"
# The string-valued group configs and their defaults (the others are INTs or BOOLEANs).
STRING_GROUP_CONFIGS: Mapping[str, str] = {
    SHARE_AUTO_OFFSET_RESET: "latest",
    SHARE_ISOLATION_LEVEL: "read_uncommitted",
    ERRORS_DEADLETTERQUEUE_TOPIC_NAME: "",
}
# The boolean group configs and their defaults.
BOOLEAN_GROUP_CONFIGS: Mapping[str, str] = {
    SHARE_RENEW_ACKNOWLEDGE_ENABLE: "false",
    ERRORS_DEADLETTERQUEUE_COPY_RECORD_ENABLE: "false",
}
_ISOLATION_LEVELS = ("read_committed", "read_uncommitted")
_DURATION = re.compile(
    r"P(?:(\d+)D)?(?:T(?=\d)(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?", re.IGNORECASE
)

FILE_NAME = "group-configs.json"
_NONE: Mapping[str, str] = {}


@dataclass(frozen=True, slots=True)
class GroupConfigDef:
    """One group config: ``GroupConfig``'s default and ``atLeast``, and the broker keys
    of its default and bounds."""

    default: int
    at_least: int
    broker_key: str
    min_key: str
    max_key: str


GROUP_CONFIG_DEFS: Mapping[str, GroupConfigDef] = {
    CONSUMER_HEARTBEAT_INTERVAL_MS: GroupConfigDef(
        5000,
        1,
        "group.consumer.heartbeat.interval.ms",
        "group.consumer.min.heartbeat.interval.ms",
        "group.consumer.max.heartbeat.interval.ms",
    ),
    CONSUMER_SESSION_TIMEOUT_MS: GroupConfigDef(
        45000,
        1,
        "group.consumer.session.timeout.ms",
        "group.consumer.min.session.timeout.ms",
        "group.consumer.max.session.timeout.ms",
    ),
    SHARE_HEARTBEAT_INTERVAL_MS: GroupConfigDef(
        5000,
        1,
        "group.share.heartbeat.interval.ms",
        "group.share.min.heartbeat.interval.ms",
        "group.share.max.heartbeat.interval.ms",
    ),
    SHARE_RECORD_LOCK_DURATION_MS: GroupConfigDef(
        30000,
        1000,
        "group.share.record.lock.duration.ms",
        "group.share.min.record.lock.duration.ms",
        "group.share.max.record.lock.duration.ms",
    ),
    SHARE_SESSION_TIMEOUT_MS: GroupConfigDef(
        45000,
        1,
        "group.share.session.timeout.ms",
        "group.share.min.session.timeout.ms",
        "group.share.max.session.timeout.ms",
    ),
    SHARE_DELIVERY_COUNT_LIMIT: GroupConfigDef(
        5,
        2,
        "group.share.delivery.count.limit",
        "group.share.min.delivery.count.limit",
        "group.share.max.delivery.count.limit",
    ),
    SHARE_PARTITION_MAX_RECORD_LOCKS: GroupConfigDef(
        2000,
        100,
        "group.share.partition.max.record.locks",
        "group.share.min.partition.max.record.locks",
        "group.share.max.partition.max.record.locks",
    ),
    # KIP-1071's streams groups: Kafka's GroupConfig (a standby count has no broker
    # minimum; "group.streams.min.standby.replicas" is a key of ours, always 0)
    STREAMS_HEARTBEAT_INTERVAL_MS: GroupConfigDef(
        5000,
        1,
        "group.streams.heartbeat.interval.ms",
        "group.streams.min.heartbeat.interval.ms",
        "group.streams.max.heartbeat.interval.ms",
    ),
    STREAMS_NUM_STANDBY_REPLICAS: GroupConfigDef(
        0,
        0,
        "group.streams.num.standby.replicas",
        "group.streams.min.standby.replicas",
        "group.streams.max.standby.replicas",
    ),
    STREAMS_SESSION_TIMEOUT_MS: GroupConfigDef(
        45000,
        1,
        "group.streams.session.timeout.ms",
        "group.streams.min.session.timeout.ms",
        "group.streams.max.session.timeout.ms",
    ),
}


def _streams_broker_values(config: StreamsGroupConfig | None) -> dict[str, int]:
    """The broker's ``group.streams.*`` values and bounds (Kafka's defaults without a
    config), under their Kafka keys."""
    values = {
        "group.streams.session.timeout.ms": 45000,
        "group.streams.min.session.timeout.ms": 45000,
        "group.streams.max.session.timeout.ms": 60000,
        "group.streams.heartbeat.interval.ms": 5000,
        "group.streams.min.heartbeat.interval.ms": 5000,
        "group.streams.max.heartbeat.interval.ms": 15000,
        "group.streams.num.standby.replicas": 0,
        "group.streams.min.standby.replicas": 0,
        "group.streams.max.standby.replicas": 2,
    }
    if config is not None:
        for key in values:
            attribute = key.replace(".", "_")
            if hasattr(config, attribute):
                values[key] = int(getattr(config, attribute))
    return values


def _invalid(message: str) -> MetadataError:
    return MetadataError(ErrorCode.invalid_config, message)


class GroupConfigStore:
    """Every group's overrides, cluster-wide; durable in ``group-configs.json``."""

    def __init__(self, data_dir: Path | None = None) -> None:
        self._path = data_dir / FILE_NAME if data_dir is not None else None
        self._configs: dict[str, dict[str, str]] = {}
        document = read_json(self._path) if self._path is not None else None
        if document is not None:
            self._configs = {
                str(group): {str(k): str(v) for k, v in overrides.items()}
                for group, overrides in document.get("groups", {}).items()
            }

    def get(self, group_id: str) -> dict[str, str]:
        return dict(self._configs.get(group_id, {}))

    def group_ids(self) -> list[str]:
        """The groups that have overrides (Kafka's ``GroupConfigManager.groupIds``)."""
        return sorted(self._configs)

    def overrides(self, group_id: str) -> Mapping[str, str]:
        """The group's overrides, read-only and not copied (read on every share fetch)."""
        return self._configs.get(group_id, _NONE)

    def put(self, group_id: str, overrides: Mapping[str, str]) -> None:
        """Replace the group's overrides (none: forget the group) and save."""
        if overrides:
            self._configs[group_id] = dict(overrides)
        else:
            self._configs.pop(group_id, None)
        if self._path is not None:
            write_json_atomic(self._path, {"version": 1, "groups": self._configs}, indent=1)


class GroupConfigManager:
    """One broker's view of the group configs: its bounds and defaults over the store."""

    def __init__(
        self,
        store: GroupConfigStore,
        config: ConsumerGroupConfig,
        share_config: ShareGroupConfig | None = None,
        streams_config: StreamsGroupConfig | None = None,
    ) -> None:
        self.store = store
        # the broker's group.share.* values and bounds, as configured (Kafka's
        # ShareGroupConfig and GroupCoordinatorConfig): the bounds a GROUP config is
        # checked against and the values of the groups without an override
        share = share_config if share_config is not None else ShareGroupConfig()
        self._broker: dict[str, int] = {
            f.name.replace("_", "."): getattr(share, f.name)
            for f in fields(share)
            if f.name.startswith("group_share_") and isinstance(getattr(share, f.name), int)
        }
        for field in (
            "session_timeout_ms",
            "min_session_timeout_ms",
            "max_session_timeout_ms",
            "heartbeat_interval_ms",
            "min_heartbeat_interval_ms",
            "max_heartbeat_interval_ms",
        ):
            key = "group.consumer." + field.replace("_", ".")
            self._broker[key] = int(getattr(config, "group_consumer_" + field))
        self._broker.update(_streams_broker_values(streams_config))

    # ---------------------------------------------------------------- values
    def value(self, group_id: str, name: str) -> int:
        """The group's value of ``name``: its override, else the broker's."""
        override = self.store.overrides(group_id).get(name)
        if override is not None:
            return int(override)
        return self._broker[GROUP_CONFIG_DEFS[name].broker_key]

    def overrides(self, group_id: str) -> Mapping[str, str]:
        """The group's overrides (a new mapping each time they change)."""
        return self.store.overrides(group_id)

    def string_value(self, group_id: str, name: str) -> str:
        """The group's value of a STRING or BOOLEAN config: its override, else the default."""
        override = self.store.overrides(group_id).get(name)
        if override is not None:
            return override
        return STRING_GROUP_CONFIGS.get(name) or BOOLEAN_GROUP_CONFIGS.get(name, "")

    def share_auto_offset_reset(self, group_id: str) -> str:
        return self.string_value(group_id, SHARE_AUTO_OFFSET_RESET)

    def share_read_committed(self, group_id: str) -> bool:
        return self.string_value(group_id, SHARE_ISOLATION_LEVEL) == "read_committed"

    def share_renew_acknowledge_enable(self, group_id: str) -> bool:
        return self.string_value(group_id, SHARE_RENEW_ACKNOWLEDGE_ENABLE) == "true"

    def deadletterqueue_topic(self, group_id: str) -> tuple[str, bool]:
        """KIP-1191: the group's DLQ topic ("": none) and whether records are copied."""
        copy = self.string_value(group_id, ERRORS_DEADLETTERQUEUE_COPY_RECORD_ENABLE) == "true"
        return self.string_value(group_id, ERRORS_DEADLETTERQUEUE_TOPIC_NAME), copy

    def consumer_session_timeout_ms(self, group_id: str) -> int:
        return self.value(group_id, CONSUMER_SESSION_TIMEOUT_MS)

    def consumer_heartbeat_interval_ms(self, group_id: str) -> int:
        return self.value(group_id, CONSUMER_HEARTBEAT_INTERVAL_MS)

    def streams_session_timeout_ms(self, group_id: str) -> int:
        return self.value(group_id, STREAMS_SESSION_TIMEOUT_MS)

    def streams_heartbeat_interval_ms(self, group_id: str) -> int:
        return self.value(group_id, STREAMS_HEARTBEAT_INTERVAL_MS)

    def streams_num_standby_replicas(self, group_id: str) -> int:
        return self.value(group_id, STREAMS_NUM_STANDBY_REPLICAS)

    def describe(self, group_id: str) -> list[tuple[str, str, bool]]:
        """Every group config: (name, value, overridden), sorted by name."""
        overrides = self.store.overrides(group_id)
        return [
            (
                name,
                str(self.value(group_id, name))
                if name in GROUP_CONFIG_DEFS
                else self.string_value(group_id, name),
                name in overrides,
            )
            for name in sorted([*GROUP_CONFIG_DEFS, *STRING_GROUP_CONFIGS, *BOOLEAN_GROUP_CONFIGS])
        ]

    # ---------------------------------------------------------------- changes
    def validate(self, overrides: Mapping[str, str]) -> dict[str, str]:
        """Kafka's ``GroupConfig.validate``: names, parsing, ``atLeast``, then the
        broker's bounds over the whole set (unset ones at ``GroupConfig``'s defaults)."""
        for name in overrides:
            if (
                name not in GROUP_CONFIG_DEFS
                and name not in STRING_GROUP_CONFIGS
                and name not in BOOLEAN_GROUP_CONFIGS
            ):
                raise _invalid(f"Unknown group config name: {name}")
        strings = {
            n: _check_string(n, v)
            for n, v in overrides.items()
            if n in STRING_GROUP_CONFIGS or n in BOOLEAN_GROUP_CONFIGS
        }
        values = {name: d.default for name, d in GROUP_CONFIG_DEFS.items()}
        for name, text in overrides.items():
            if name not in strings:
                values[name] = _parse_int(name, text, GROUP_CONFIG_DEFS[name].at_least)
        for name, definition in GROUP_CONFIG_DEFS.items():
            if values[name] < self._broker[definition.min_key]:
                raise _invalid(f"{name} must be greater than or equal to {definition.min_key}")
            if values[name] > self._broker[definition.max_key]:
                raise _invalid(f"{name} must be less than or equal to {definition.max_key}")
        for session, interval in (
            (CONSUMER_SESSION_TIMEOUT_MS, CONSUMER_HEARTBEAT_INTERVAL_MS),
            (SHARE_SESSION_TIMEOUT_MS, SHARE_HEARTBEAT_INTERVAL_MS),
            (STREAMS_SESSION_TIMEOUT_MS, STREAMS_HEARTBEAT_INTERVAL_MS),
        ):
            if values[session] <= values[interval]:
                raise _invalid(f"{session} must be greater than {interval}")
        return {name: strings[name] if name in strings else str(values[name]) for name in overrides}

    def alter(
        self, group_id: str, changes: Iterable[tuple[str, str | None, int]], validate_only: bool
    ) -> None:
        """IncrementalAlterConfigs on GROUP ``group_id``: SET (0), DELETE (1); APPEND (2)
        and SUBTRACT (3) are INVALID_CONFIG (no group config is a LIST)."""
        if not group_id:
            raise MetadataError(ErrorCode.invalid_request, "Group name must not be empty")
        overrides = self.store.get(group_id)
        for name, value, operation in changes:
            if operation == 0:
                assert value is not None  # refused before (check_config_changes)
                overrides[name] = value
            elif operation == 1:
                overrides.pop(name, None)
            elif operation in (2, 3):
                verb = "APPEND" if operation == 2 else "SUBTRACT"
                raise _invalid(f"Can't {verb} to key {name} because its type is not LIST.")
            else:
                raise MetadataError(
                    ErrorCode.invalid_request, f"Unknown operations type {operation} for {name}"
                )
        validated = self.validate(overrides)
        if not validate_only:
            self.store.put(group_id, validated)


def _parse_int(name: str, text: str, at_least: int) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise _invalid(
            f"Invalid value {text} for configuration {name}: Not a number of type INT"
        ) from None
    if not -(2**31) <= value < 2**31:
        raise _invalid(f"Invalid value {text} for configuration {name}: Not a number of type INT")
    if value < at_least:
        raise _invalid(
            f"Invalid value {value} for configuration {name}: Value must be at least {at_least}"
        )
    return value


def _check_string(name: str, text: str) -> str:
    """A STRING or BOOLEAN group config's value as stored, or Kafka's INVALID_CONFIG."""
    if name == SHARE_AUTO_OFFSET_RESET:
        _check_reset_strategy(name, text)
    elif name == SHARE_ISOLATION_LEVEL and text not in _ISOLATION_LEVELS:
        raise _invalid(
            f"Invalid value {text} for configuration {name}: String must be one of: "
            + ", ".join(_ISOLATION_LEVELS)
        )
    elif name == ERRORS_DEADLETTERQUEUE_TOPIC_NAME and text.startswith("__"):
        raise _invalid(f"{name}: DLQ topic name must not start with '__'")
    elif name in BOOLEAN_GROUP_CONFIGS:
        if text.strip().lower() not in ("true", "false"):
            raise _invalid(
                f"Invalid value {text} for configuration {name}: "
                "Expected value to be either true or false"
            )
        return text.strip().lower()
    return text


def _check_reset_strategy(name: str, text: str) -> None:
    """Kafka's ``ShareGroupAutoOffsetResetStrategy.Validator``."""
    if text in ("latest", "earliest") or duration_ms(text) is not None:
        return
    raise _invalid(
        f"Invalid value {text} for configuration {name}: the value must be either "
        "'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS.>'."
    )


def duration_ms(strategy: str) -> int | None:
    """The milliseconds of a ``by_duration:<ISO-8601 duration>`` strategy (Java's
    ``Duration.parse``, days to seconds), None for anything else."""
    if not strategy.startswith("by_duration:"):
        return None
    match = _DURATION.fullmatch(strategy.removeprefix("by_duration:"))
    if match is None or not any(match.groups()):
        return None
    days, hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    return int((((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1000)
