"""Topic configs as the admin APIs see them: names, types, defaults, sources, checks.

CreateTopics, DescribeConfigs, AlterConfigs and IncrementalAlterConfigs all need the
same table: which topic config names Kafka knows (anything else is INVALID_CONFIG,
as Kafka answers), what type each has (DescribeConfigs v3+ reports it, and a value of
the wrong type must be refused before it is stored), what a topic inherits from the
broker when it has no override, and where a value comes from (Kafka's ConfigSource).

A topic stores only its overrides (``TopicInfo.configs``); the effective value of a
config is the override, else what the broker gives a topic without one: its broker
synonym's value (Kafka's ServerTopicConfigSynonyms, through the broker's dynamic,
static and default layers -- ``broker/config/dynamic_config.py``), else Kafka's own default.
DescribeConfigs lists Kafka's synonyms: the topic override (TOPIC_CONFIG), then the
broker synonym's layers exactly as Kafka's ``configSynonyms`` gives them -- a config
whose broker synonym is set nowhere (``retention.ms`` while ``log.retention.ms`` is
unset) has none and is DEFAULT_CONFIG. The log honours the configs ``LogConfig``
knows, the replica manager ``min.insync.replicas``; every other known name is
accepted, stored and described but does not change behaviour.

The request checks Kafka's ConfigAdminManager makes before any resource type's own
(``check_config_changes``, ``duplicate_resources``) live here too, with the per-resource
answer both AlterConfigs APIs give (``alter_config_resources``, ``config_resource_errors``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import (
    ClusterMetadata,
    MetadataError,
    TopicInfo,
    validate_topic_name,
)
from broker.config.broker_config_defs import ConfigSource, ConfigType
from broker.config.dynamic_config import BrokerConfigLayers, Synonym
from broker.log import LogConfig
from broker.quota.replication_quota_manager import (
    FOLLOWER_THROTTLED_REPLICAS,
    LEADER_THROTTLED_REPLICAS,
    throttled_replicas_error,
)
from broker.remote.remote_log_config import remote_storage_error

__all__ = (
    "BROKER_RESOURCE",
    "DELETE_OPERATION",
    "TOPIC_CONFIG_DEFS",
    "TOPIC_RESOURCE",
    "ConfigEntry",
    "ConfigSource",
    "ConfigType",
    "check_alterable_topic",
    "check_config_changes",
    "duplicate_resources",
    "topic_config_entries",
    "topic_defaults",
    "validate_topic_configs",
)

LONG_MAX = "9223372036854775807"
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")


@dataclass(frozen=True, slots=True)
class TopicConfigDef:
    name: str
    type: ConfigType
    default: str | None


_T = ConfigType

# Kafka's topic-level configs with Kafka's defaults. Those with a broker synonym
# (broker_config_defs.TOPIC_CONFIG_SYNONYMS) take their default from the broker.
TOPIC_CONFIG_DEFS: dict[str, TopicConfigDef] = {
    d.name: d
    for d in (
        TopicConfigDef("cleanup.policy", _T.LIST, "delete"),
        TopicConfigDef("compression.type", _T.STRING, "producer"),
        TopicConfigDef("compression.gzip.level", _T.INT, "-1"),
        TopicConfigDef("compression.lz4.level", _T.INT, "9"),
        TopicConfigDef("compression.zstd.level", _T.INT, "3"),
        TopicConfigDef("delete.retention.ms", _T.LONG, "86400000"),
        TopicConfigDef("errors.deadletterqueue.group.enable", _T.BOOLEAN, "false"),  # 4.4
        TopicConfigDef("file.delete.delay.ms", _T.LONG, "60000"),
        TopicConfigDef("flush.messages", _T.LONG, LONG_MAX),
        TopicConfigDef("flush.ms", _T.LONG, LONG_MAX),
        TopicConfigDef("follower.replication.throttled.replicas", _T.LIST, ""),
        TopicConfigDef("index.interval.bytes", _T.INT, "4096"),
        TopicConfigDef("leader.replication.throttled.replicas", _T.LIST, ""),
        TopicConfigDef("local.retention.bytes", _T.LONG, "-2"),
        TopicConfigDef("local.retention.ms", _T.LONG, "-2"),
        TopicConfigDef("max.compaction.lag.ms", _T.LONG, LONG_MAX),
        TopicConfigDef("max.message.bytes", _T.INT, "1048588"),
        TopicConfigDef("message.downconversion.enable", _T.BOOLEAN, "true"),
        TopicConfigDef("message.timestamp.after.max.ms", _T.LONG, "3600000"),  # Kafka 4
        TopicConfigDef("message.timestamp.before.max.ms", _T.LONG, LONG_MAX),
        TopicConfigDef("message.timestamp.difference.max.ms", _T.LONG, LONG_MAX),
        TopicConfigDef("message.timestamp.type", _T.STRING, "CreateTime"),
        TopicConfigDef("min.cleanable.dirty.ratio", _T.DOUBLE, "0.5"),
        TopicConfigDef("min.compaction.lag.ms", _T.LONG, "0"),
        TopicConfigDef("min.insync.replicas", _T.INT, "1"),
        TopicConfigDef("preallocate", _T.BOOLEAN, "false"),
        TopicConfigDef("remote.log.copy.disable", _T.BOOLEAN, "false"),
        TopicConfigDef("remote.log.delete.on.disable", _T.BOOLEAN, "false"),
        TopicConfigDef("remote.storage.enable", _T.BOOLEAN, "false"),
        TopicConfigDef("retention.bytes", _T.LONG, "-1"),
        TopicConfigDef("retention.ms", _T.LONG, "604800000"),
        TopicConfigDef("segment.bytes", _T.INT, "1073741824"),
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
    configs: Iterable[tuple[str, str | None]],
    base: Mapping[str, str] | None = None,
    *,
    remote_storage_system_enabled: bool = False,
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
    for name in (LEADER_THROTTLED_REPLICAS, FOLLOWER_THROTTLED_REPLICAS):
        replicas = result.get(name)
        message = None if replicas is None else throttled_replicas_error(name, replicas)
        if message is not None:
            raise _invalid(f"Invalid value {replicas} for configuration {name}: {message}")
    min_isr = result.get("min.insync.replicas")
    if min_isr is not None and int(min_isr) < 1:
        raise _invalid(f"Invalid value {min_isr} for configuration min.insync.replicas")
    try:
        LogConfig.from_topic_configs({**(base or {}), **result})
    except ValueError as exc:
        raise _invalid(str(exc)) from None
    # tiered storage (KIP-405): Kafka's checks of the configs the topic ends up with
    remote_error = remote_storage_error({**(base or {}), **result}, remote_storage_system_enabled)
    if remote_error is not None:
        raise _invalid(remote_error)
    return result


def topic_defaults(layers: BrokerConfigLayers) -> dict[str, str]:
    """What a topic without overrides has: the broker's values, else Kafka's defaults."""
    values = {name: d.default for name, d in TOPIC_CONFIG_DEFS.items() if d.default is not None}
    for name in TOPIC_CONFIG_DEFS:
        inherited = layers.topic_default(name)
        if inherited is not None:
            values[name] = inherited
    return values


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One config as DescribeConfigs (and CreateTopics v5+) report it."""

    name: str
    value: str | None
    source: ConfigSource
    type: ConfigType
    read_only: bool = False
    is_sensitive: bool = False
    # (name, value, source), in Kafka's order of precedence.
    synonyms: tuple[Synonym, ...] = ()

    @property
    def is_default(self) -> bool:
        return self.source is ConfigSource.DEFAULT_CONFIG


def topic_config_entries(
    layers: BrokerConfigLayers, overrides: Mapping[str, str]
) -> list[ConfigEntry]:
    """Every known topic config of a topic with ``overrides``, in name order (Kafka's
    ``createTopicConfigEntry``)."""
    defaults = topic_defaults(layers)
    entries = []
    for name in sorted(TOPIC_CONFIG_DEFS):
        synonyms = layers.topic_synonyms(name)
        if name in overrides:
            synonyms.insert(0, (name, overrides[name], ConfigSource.TOPIC_CONFIG))
        value = overrides.get(name, defaults.get(name))
        source = synonyms[0][2] if synonyms else ConfigSource.DEFAULT_CONFIG
        entries.append(
            ConfigEntry(name, value, source, TOPIC_CONFIG_DEFS[name].type, synonyms=tuple(synonyms))
        )
    return entries


TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
#: IncrementalAlterConfigs' DELETE operation (the one that may carry a null value).
DELETE_OPERATION = 1


def check_alterable_topic(cluster: ClusterMetadata, resource_type: int, name: str) -> TopicInfo:
    """The topic an AlterConfigs/IncrementalAlterConfigs resource names, or the error.

    Callers handle BROKER resources before; any other type is INVALID_REQUEST.
    """
    if resource_type != TOPIC_RESOURCE:
        raise MetadataError(ErrorCode.invalid_request, f"Unknown resource type {resource_type}")
    validate_topic_name(name)
    info = cluster.topics.get(name)
    if info is None:
        raise MetadataError(ErrorCode.unknown_topic_or_partition, f"Topic {name} does not exist")
    return info


def check_config_changes(changes: Iterable[tuple[str, str | None, int]]) -> None:
    """Kafka's ConfigAdminManager checks, for any resource type: ``(name, value,
    operation)`` with a name given twice, or a null value for anything but a DELETE
    (legacy AlterConfigs passes SET), is INVALID_REQUEST."""
    names: set[str] = set()
    nulls: list[str] = []
    for name, value, operation in changes:
        if name in names:
            raise MetadataError(ErrorCode.invalid_request, "Error due to duplicate config keys")
        names.add(name)
        if value is None and operation != DELETE_OPERATION:
            nulls.append(name)
    if nulls:
        raise MetadataError(
            ErrorCode.invalid_request, "Null value not supported for : " + ", ".join(nulls)
        )


def duplicate_resources(resources: Iterable[tuple[int, str]]) -> set[tuple[int, str]]:
    """Resources named more than once in a request (each is answered INVALID_REQUEST,
    "Each resource must appear at most once.")."""
    seen: set[tuple[int, str]] = set()
    duplicates: set[tuple[int, str]] = set()
    for key in resources:
        (duplicates if key in seen else seen).add(key)
    return duplicates


def alter_config_resources(
    b: Any, resources: Iterable[Any], alter: Callable[[int, str, Any], None]
) -> tuple[Any, ...]:
    """(Incremental)AlterConfigs: ``alter(resource_type, name, resource)`` for each
    resource of the request, a resource named twice refused first; the
    ``AlterConfigsResourceResponse`` of each, with the ``MetadataError`` it raised."""
    resources = list(resources)
    duplicates = duplicate_resources((int(r.resource_type), r.resource_name) for r in resources)
    responses = []
    for resource in resources:
        kind, name = int(resource.resource_type), resource.resource_name
        error, message = ErrorCode.none, None
        try:
            if (kind, name) in duplicates:
                raise MetadataError(
                    ErrorCode.invalid_request, "Each resource must appear at most once."
                )
            alter(kind, name, resource)
        except MetadataError as exc:
            error, message = exc.error, exc.message
        responses.append(
            b.AlterConfigsResourceResponse(
                error_code=error, error_message=message, resource_type=kind, resource_name=name
            )
        )
    return tuple(responses)


def config_resource_errors(
    b: Any, resources: Iterable[Any], error: ErrorCode, message: str | None
) -> tuple[Any, ...]:
    """``error`` (with ``message``) as the ``AlterConfigsResourceResponse`` of every
    resource: a whole (Incremental)AlterConfigs request refused."""
    return tuple(
        b.AlterConfigsResourceResponse(
            error_code=error,
            error_message=message,
            resource_type=int(resource.resource_type),
            resource_name=resource.resource_name,
        )
        for resource in resources
    )
