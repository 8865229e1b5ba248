"""Topic configs as the admin APIs see them: names, types, defaults, sources, checks.

CreateTopics, DescribeConfigs, AlterConfigs and IncrementalAlterConfigs all need the
same table: which topic config names Kafka knows (anything else is INVALID_CONFIG,
as Kafka answers), what type each has (DescribeConfigs v3+ reports it, and a value of
the wrong type must be refused before it is stored), what a topic inherits from the
broker when it has no override, and where a value comes from (Kafka's ConfigSource).

A topic stores only its overrides (``TopicInfo.configs``); the effective value of a
config is the override, else the broker's value for the topic-level default
(``BrokerConfig.default_topic_configs()``), else Kafka's own default. The log honours
the configs ``LogConfig`` knows, the replica manager ``min.insync.replicas``; every
other known name is accepted, stored and described but does not change behaviour.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum

from kio.schema.errors import ErrorCode

from broker.cluster_metadata import (
    ClusterMetadata,
    MetadataError,
    TopicInfo,
    validate_topic_name,
)
from broker.config import BrokerConfig
from broker.log import LogConfig

LONG_MAX = "9223372036854775807"
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")


class ConfigSource(IntEnum):
    """Kafka's DescribeConfigs ConfigSource (v1+)."""

    UNKNOWN = 0
    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


class ConfigType(IntEnum):
    """Kafka's DescribeConfigs ConfigType (v3+)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


@dataclass(frozen=True, slots=True)
class TopicConfigDef:
    name: str
    type: ConfigType
    default: str | None
    # The broker config whose value a topic inherits (Kafka's synonym), if any.
    broker_synonym: str | None = None


_T = ConfigType

# Kafka's topic-level configs with Kafka's defaults. Those with a broker synonym take
# their default from BrokerConfig.default_topic_configs() when it has them.
TOPIC_CONFIG_DEFS: dict[str, TopicConfigDef] = {
    d.name: d
    for d in (
        TopicConfigDef("cleanup.policy", _T.LIST, "delete", "log.cleanup.policy"),
        TopicConfigDef("compression.type", _T.STRING, "producer", "compression.type"),
        TopicConfigDef("compression.gzip.level", _T.INT, "-1"),
        TopicConfigDef("compression.lz4.level", _T.INT, "9"),
        TopicConfigDef("compression.zstd.level", _T.INT, "3"),
        TopicConfigDef("delete.retention.ms", _T.LONG, "86400000"),
        TopicConfigDef("file.delete.delay.ms", _T.LONG, "60000"),
        TopicConfigDef("flush.messages", _T.LONG, LONG_MAX, "log.flush.interval.messages"),
        TopicConfigDef("flush.ms", _T.LONG, LONG_MAX),
        TopicConfigDef("follower.replication.throttled.replicas", _T.LIST, ""),
        TopicConfigDef("index.interval.bytes", _T.INT, "4096"),
        TopicConfigDef("leader.replication.throttled.replicas", _T.LIST, ""),
        TopicConfigDef("local.retention.bytes", _T.LONG, "-2"),
        TopicConfigDef("local.retention.ms", _T.LONG, "-2"),
        TopicConfigDef("max.compaction.lag.ms", _T.LONG, LONG_MAX),
        TopicConfigDef("max.message.bytes", _T.INT, "1048588", "message.max.bytes"),
        TopicConfigDef("message.downconversion.enable", _T.BOOLEAN, "true"),
        TopicConfigDef("message.timestamp.after.max.ms", _T.LONG, LONG_MAX),
        TopicConfigDef("message.timestamp.before.max.ms", _T.LONG, LONG_MAX),
        TopicConfigDef("message.timestamp.difference.max.ms", _T.LONG, LONG_MAX),
        TopicConfigDef(
            "message.timestamp.type", _T.STRING, "CreateTime", "log.message.timestamp.type"
        ),
        TopicConfigDef("min.cleanable.dirty.ratio", _T.DOUBLE, "0.5"),
        TopicConfigDef("min.compaction.lag.ms", _T.LONG, "0"),
        TopicConfigDef("min.insync.replicas", _T.INT, "1", "min.insync.replicas"),
        TopicConfigDef("preallocate", _T.BOOLEAN, "false"),
        TopicConfigDef("remote.storage.enable", _T.BOOLEAN, "false"),
        TopicConfigDef("retention.bytes", _T.LONG, "-1", "log.retention.bytes"),
        TopicConfigDef("retention.ms", _T.LONG, "604800000", "log.retention.ms"),
        TopicConfigDef("segment.bytes", _T.INT, "1073741824", "log.segment.bytes"),
        TopicConfigDef("segment.index.bytes", _T.INT, "10485760"),
        TopicConfigDef("segment.jitter.ms", _T.LONG, "0"),
        TopicConfigDef("segment.ms", _T.LONG, "604800000"),
        TopicConfigDef("unclean.leader.election.enable", _T.BOOLEAN, "false"),
    )
}

_INT_RANGE = {
    _T.INT: (-(2**31), 2**31 - 1),
    _T.SHORT: (-(2**15), 2**15 - 1),
    _T.LONG: (-(2**63), 2**63 - 1),
}


def _invalid(message: str) -> MetadataError:
    return MetadataError(ErrorCode.invalid_config, message)


def _check_type(definition: TopicConfigDef, value: str) -> None:
    kind = definition.type
    bad = _invalid(f"Invalid value {value} for configuration {definition.name}")
    if kind in _INT_RANGE:
        try:
            number = int(value.strip())
        except ValueError:
            raise bad from None
        low, high = _INT_RANGE[kind]
        if not low <= number <= high:
            raise bad
    elif kind is _T.BOOLEAN:
        if value.strip().lower() not in ("true", "false"):
            raise bad
    elif kind is _T.DOUBLE:
        try:
            float(value.strip())
        except ValueError:
            raise bad from None


def validate_topic_configs(
    configs: Iterable[tuple[str, str | None]], base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Check ``(name, value)`` pairs as Kafka does; return them as a dict.

    ``base`` is the topic's effective configs the new ones land on (for checks that
    look at the result, such as the log's own bounds). Raises ``MetadataError`` with
    INVALID_CONFIG naming the first offending name or value; INVALID_REQUEST for a name
    given twice (Kafka's answer to a duplicate config in one request).
    """
    result: dict[str, str] = {}
    for name, value in configs:
        if name in result:
            raise MetadataError(
                ErrorCode.invalid_request, f"Duplicate config {name} in the request"
            )
        definition = TOPIC_CONFIG_DEFS.get(name)
        if definition is None:
            raise _invalid(f"Unknown topic config name: {name}")
        if value is None:
            raise _invalid(f"Null value not supported for topic config: {name}")
        _check_type(definition, value)
        result[name] = value
    compression = result.get("compression.type")
    if compression is not None and compression not in COMPRESSION_TYPES:
        raise _invalid(f"Invalid value {compression} for configuration compression.type")
    min_isr = result.get("min.insync.replicas")
    if min_isr is not None and int(min_isr) < 1:
        raise _invalid(f"Invalid value {min_isr} for configuration min.insync.replicas")
    try:
        LogConfig.from_topic_configs({**(base or {}), **result})
    except ValueError as exc:
        raise _invalid(str(exc)) from None
    return result


def broker_topic_defaults(config: BrokerConfig) -> dict[str, str]:
    """What a topic without overrides has: the broker's values, else Kafka's defaults."""
    values = {name: d.default for name, d in TOPIC_CONFIG_DEFS.items() if d.default is not None}
    values.update(config.default_topic_configs())
    values["flush.messages"] = str(config.log_flush_interval_messages)
    return values


def _broker_explicit(config: BrokerConfig) -> set[str]:
    """Kafka names of the broker configs the operator set (properties or overrides)."""
    fields = BrokerConfig.model_fields
    names = {fields[f].alias or f for f in config.model_fields_set if f in fields}
    if names & {"log.retention.hours", "log.retention.minutes"}:
        names.add("log.retention.ms")
    return names


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One config as DescribeConfigs (and CreateTopics v5+) report it."""

    name: str
    value: str | None
    source: ConfigSource
    type: ConfigType
    read_only: bool = False
    is_sensitive: bool = False
    # (name, value, source), the value's own entry first (Kafka's synonym order).
    synonyms: tuple[tuple[str, str | None, ConfigSource], ...] = ()

    @property
    def is_default(self) -> bool:
        return self.source is ConfigSource.DEFAULT_CONFIG


def topic_config_entries(config: BrokerConfig, overrides: Mapping[str, str]) -> list[ConfigEntry]:
    """Every known topic config of a topic with ``overrides``, in name order."""
    defaults = broker_topic_defaults(config)
    explicit = _broker_explicit(config)
    entries = []
    for name in sorted(TOPIC_CONFIG_DEFS):
        definition = TOPIC_CONFIG_DEFS[name]
        synonyms: list[tuple[str, str | None, ConfigSource]] = []
        if name in overrides:
            synonyms.append((name, overrides[name], ConfigSource.TOPIC_CONFIG))
        broker_name = definition.broker_synonym
        broker_source = ConfigSource.DEFAULT_CONFIG
        if broker_name is not None and broker_name in explicit:
            broker_source = ConfigSource.STATIC_BROKER_CONFIG
        synonyms.append((broker_name or name, defaults.get(name), broker_source))
        value, source = synonyms[0][1], synonyms[0][2]
        entries.append(ConfigEntry(name, value, source, definition.type, synonyms=tuple(synonyms)))
    return entries


def _broker_value_type(value: object) -> ConfigType:
    if isinstance(value, bool):
        return ConfigType.BOOLEAN
    if isinstance(value, int):
        return ConfigType.LONG if abs(value) > 2**31 - 1 else ConfigType.INT
    return ConfigType.STRING


def _broker_value_text(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def broker_config_entries(config: BrokerConfig) -> list[ConfigEntry]:
    """The broker's own configs by Kafka name, in name order.

    Every one is read-only: minikafka has no dynamic broker configs. A config the
    operator set is STATIC_BROKER_CONFIG, one left at Kafka's default DEFAULT_CONFIG.
    """
    explicit = _broker_explicit(config)
    entries = []
    for field_name, info in BrokerConfig.model_fields.items():
        name = info.alias or field_name
        value = getattr(config, field_name)
        source = (
            ConfigSource.STATIC_BROKER_CONFIG if name in explicit else ConfigSource.DEFAULT_CONFIG
        )
        text = _broker_value_text(value)
        entries.append(
            ConfigEntry(
                name,
                text,
                source,
                _broker_value_type(value),
                read_only=True,
                synonyms=((name, text, source),),
            )
        )
    return sorted(entries, key=lambda e: e.name)


TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4


def check_alterable_topic(cluster: ClusterMetadata, resource_type: int, name: str) -> TopicInfo:
    """The topic an AlterConfigs/IncrementalAlterConfigs resource names, or the error.

    Broker resources are refused: minikafka has no dynamic broker configs (Kafka
    refuses a config that is not dynamically updatable with INVALID_REQUEST too).
    """
    if resource_type == BROKER_RESOURCE:
        raise MetadataError(
            ErrorCode.invalid_request,
            "Cannot update broker configs dynamically: minikafka has no dynamic broker configs",
        )
    if resource_type != TOPIC_RESOURCE:
        raise MetadataError(ErrorCode.invalid_request, f"Unsupported resource type {resource_type}")
    validate_topic_name(name)
    info = cluster.topics.get(name)
    if info is None:
        raise MetadataError(ErrorCode.unknown_topic_or_partition, f"Topic {name} does not exist")
    return info


def duplicate_resources(resources: Iterable[tuple[int, str]]) -> set[tuple[int, str]]:
    """Resources named more than once in a request (each is answered INVALID_REQUEST)."""
    seen: set[tuple[int, str]] = set()
    duplicates: set[tuple[int, str]] = set()
    for key in resources:
        (duplicates if key in seen else seen).add(key)
    return duplicates
