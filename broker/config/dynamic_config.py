"""Dynamic broker configs: Kafka's DynamicBrokerConfig (KIP-226), over the shared metadata.

A Kafka broker's config has four layers, in order of precedence: the dynamic configs of
this broker (AlterConfigs on BROKER "<id>": DYNAMIC_BROKER_CONFIG), the cluster-wide
dynamic defaults (BROKER "": DYNAMIC_DEFAULT_BROKER_CONFIG), what the operator started
it with (STATIC_BROKER_CONFIG) and Kafka's defaults (DEFAULT_CONFIG). The dynamic layers
live in ``ClusterMetadata.broker_configs`` (persisted with it, as Kafka keeps them in
the metadata log); ``BrokerConfigLayers`` stacks the four for one broker and answers a
config's value and its synonyms exactly as Kafka's ``ConfigHelper.configSynonyms`` does
(every synonym name in each layer, layer by layer, then everything before the config's
own name dropped -- so ``log.retention.ms`` has no synonyms until it is set somewhere,
whatever ``log.retention.hours`` says).

``validate_dynamic_configs`` is Kafka's ``DynamicBrokerConfig.validateConfigs``: a
read-only config cannot be set dynamically, the listener-only SSL configs need a
listener prefix, values must parse as their type (and, for the configs minikafka
models, pass ``BrokerConfig``'s bounds), and per-broker configs cannot be set at the
cluster-wide level. Every failure is INVALID_REQUEST, as Kafka's broker answers
(KAFKA-13609). A name Kafka does not know is accepted and stored, as Kafka does.

What takes effect: the topic-level defaults a topic without an override inherits
(``broker_topic_defaults``: the log's ``retention.ms``/``.bytes``, ``segment.bytes``,
``cleanup.policy``, ``max.message.bytes``, ``message.timestamp.type``,
``message.timestamp.{before,after}.max.ms``, ``index.interval.bytes``,
``flush.messages``, the cleaner's ``delete.retention.ms``,
``min.cleanable.dirty.ratio``, ``min.compaction.lag.ms``, and ``min.insync.replicas``),
read by the replica manager on every metadata change, and so at once; and the
replication quotas' ``leader.replication.throttled.rate`` /
``follower.replication.throttled.rate`` (``quota/replication_quota_manager.py``, which
reads them when the metadata moves; at least 0). The other
dynamic configs (thread pools, quotas, SSL, ``listeners``, the cleaner's threads and
buffers, ...) are stored and described but change nothing in minikafka.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from kio.schema.errors import ErrorCode
from pydantic import ValidationError

from broker.cluster.cluster_metadata import BrokerEndpoint, ClusterMetadata, MetadataError
from broker.config.broker_config import BrokerConfig
from broker.config.broker_config_defs import (
    KAFKA_BROKER_CONFIGS,
    LISTENER_ONLY_SECURITY_CONFIGS,
    TOPIC_CONFIG_SYNONYMS,
    ConfigSource,
    ConfigType,
    UpdateMode,
    broker_config_synonyms,
    convert_synonym,
)

DEFAULT_RESOURCE = ""

Synonym = tuple[str, str | None, ConfigSource]

#: Kafka's ValidString lists of the unmodelled string configs minikafka checks.
_VALID_STRINGS = {
    "compression.type": ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
}

#: Kafka's ``Range.atLeast`` of the unmodelled numeric configs minikafka checks.
_AT_LEAST = {
    "leader.replication.throttled.rate": 0,
    "follower.replication.throttled.rate": 0,
}

_INT_BOUNDS = {
    ConfigType.SHORT: (-(2**15), 2**15 - 1),
    ConfigType.INT: (-(2**31), 2**31 - 1),
    ConfigType.LONG: (-(2**63), 2**63 - 1),
}


def model_names() -> dict[str, str]:
    """Kafka name -> ``BrokerConfig`` field name, for every config minikafka models (the
    ``ssl.*``/``sasl.*``/``listener.name.*`` configs are not one field each)."""
    return {
        info.alias or name: name
        for name, info in BrokerConfig.model_fields.items()
        if name != "security_configs"
    }


def value_text(value: object) -> str | None:
    """A modelled value as Kafka prints it (booleans lower-case, None for null)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def config_type(name: str) -> ConfigType:
    """Kafka's type of a broker config; a modelled config Kafka 4.0 no longer lists
    takes its model's type; a name nobody knows is UNKNOWN (and so sensitive)."""
    definition = KAFKA_BROKER_CONFIGS.get(name)
    if definition is not None:
        return definition.type
    field = model_names().get(name)
    if field is None:
        return ConfigType.UNKNOWN
    annotation = BrokerConfig.model_fields[field].annotation
    if annotation is bool:
        return ConfigType.BOOLEAN
    if annotation is int:
        return ConfigType.INT
    if annotation is float:
        return ConfigType.DOUBLE
    return ConfigType.STRING


def is_dynamic(name: str) -> bool:
    definition = KAFKA_BROKER_CONFIGS.get(name)
    return definition is not None and definition.dynamic


@lru_cache(maxsize=1)
def _kafka_defaults() -> dict[str, str]:
    return {n: d.default for n, d in KAFKA_BROKER_CONFIGS.items() if d.default is not None}


def default_values() -> dict[str, str]:
    """DEFAULT_CONFIG: Kafka's defaults, and the model's for the configs only minikafka
    still has (a null default is no value, as in Kafka)."""
    values = dict(_kafka_defaults())
    for name, field in model_names().items():
        if name not in values:
            text = value_text(BrokerConfig.model_fields[field].default)
            if text is not None:
                values[name] = text
    return values


def static_values(
    config: BrokerConfig,
    endpoint: BrokerEndpoint | None = None,
    log_dir: Path | None = None,
) -> dict[str, str]:
    """STATIC_BROKER_CONFIG: what this broker was started with.

    The configs the operator set (properties file or overrides); besides them, what
    every KRaft broker is started with (``node.id``, ``process.roles``), and what
    minikafka chose for this broker when the operator did not say: the endpoint it
    listens on (``listeners``, ``advertised.listeners``) and its log directory.
    """
    fields = BrokerConfig.model_fields
    values: dict[str, str] = {}
    for field in config.model_fields_set:
        if field == "security_configs":  # ssl.*, sasl.*, listener.name.*: each its own
            values.update(config.security_configs)
            continue
        if field in fields:
            text = value_text(getattr(config, field))
            if text is not None:
                values[fields[field].alias or field] = text
    values.setdefault("broker.id", str(config.broker_id))
    values["node.id"] = str(config.broker_id)
    values["process.roles"] = "broker,controller"
    if endpoint is not None:
        listener = f"PLAINTEXT://{endpoint.host}:{endpoint.port}"
        values.setdefault("listeners", listener)
        values.setdefault("advertised.listeners", listener)
    if log_dir is not None:
        values.setdefault("log.dirs", str(log_dir))
    return values


@dataclass(frozen=True, slots=True)
class BrokerConfigLayers:
    """One broker's config, layer by layer (highest precedence first)."""

    dynamic_broker: Mapping[str, str]
    dynamic_default: Mapping[str, str]
    static: Mapping[str, str]
    default: Mapping[str, str]

    def _layers(self) -> tuple[tuple[Mapping[str, str], ConfigSource], ...]:
        return (
            (self.dynamic_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
            (self.dynamic_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
            (self.static, ConfigSource.STATIC_BROKER_CONFIG),
            (self.default, ConfigSource.DEFAULT_CONFIG),
        )

    def value(self, name: str) -> str | None:
        for layer, _source in self._layers():
            if name in layer:
                return layer[name]
        return None

    def names(self) -> set[str]:
        """Every config this broker has a line for: Kafka's, the modelled ones, and any
        other name set dynamically or statically."""
        names = set(KAFKA_BROKER_CONFIGS) | set(model_names())
        for layer, _source in self._layers():
            names.update(layer)
        return names

    def synonyms(self, name: str, synonyms: Iterable[str] | None = None) -> list[Synonym]:
        """Kafka's ``configSynonyms``: each layer in turn lists the synonyms it sets,
        then everything before ``name``'s own first entry is dropped."""
        names = tuple(synonyms) if synonyms is not None else broker_config_synonyms(name)
        found: list[Synonym] = []
        for layer, source in self._layers():
            found.extend((n, layer[n], source) for n in names if n in layer)
        for index, (synonym, _value, _source) in enumerate(found):
            if synonym == name:
                return found[index:]
        return []

    def topic_default(self, topic_config: str) -> str | None:
        """What a topic without an override has for ``topic_config``: its first broker
        synonym with a value, in the topic's unit (Kafka's ``extractLogConfigMap``)."""
        for broker_name, factor in TOPIC_CONFIG_SYNONYMS.get(topic_config, ()):
            value = self.value(broker_name)
            if value is not None:
                return convert_synonym(value, factor)
        return None

    def topic_synonyms(self, topic_config: str) -> list[Synonym]:
        """The broker synonyms DescribeConfigs lists under a topic config (Kafka:
        ``configSynonyms`` of its first broker synonym)."""
        chain = TOPIC_CONFIG_SYNONYMS.get(topic_config)
        if not chain:
            return []
        first = chain[0][0]
        return self.synonyms(first, broker_config_synonyms(first))


def dynamic_layers(cluster: ClusterMetadata, broker_id: int) -> tuple[dict[str, str], ...]:
    """(this broker's dynamic configs, the cluster-wide dynamic defaults)."""
    return (
        cluster.broker_configs.get(str(broker_id), {}),
        cluster.broker_configs.get(DEFAULT_RESOURCE, {}),
    )


def broker_layers(
    config: BrokerConfig,
    cluster: ClusterMetadata,
    broker_id: int,
    log_dir: Path | None = None,
) -> BrokerConfigLayers:
    per_broker, cluster_default = dynamic_layers(cluster, broker_id)
    return BrokerConfigLayers(
        per_broker,
        cluster_default,
        static_values(config, cluster.brokers.get(broker_id), log_dir),
        default_values(),
    )


def broker_topic_defaults(
    config: BrokerConfig, cluster: ClusterMetadata, broker_id: int
) -> dict[str, str]:
    """The topic configs a topic without overrides has on this broker, by topic config
    name (only those with a broker synonym). Cached: the replica manager asks on every
    metadata change and every acks=all produce (``min.insync.replicas``)."""
    per_broker, cluster_default = dynamic_layers(cluster, broker_id)
    return dict(
        _topic_defaults(config, frozenset(per_broker.items()), frozenset(cluster_default.items()))
    )


@lru_cache(maxsize=64)
def _topic_defaults(
    config: BrokerConfig,
    per_broker: frozenset[tuple[str, str]],
    cluster_default: frozenset[tuple[str, str]],
) -> dict[str, str]:
    layers = BrokerConfigLayers(
        dict(per_broker), dict(cluster_default), static_values(config), default_values()
    )
    defaults: dict[str, str] = {}
    for name in TOPIC_CONFIG_SYNONYMS:
        value = layers.topic_default(name)
        if value is not None:
            defaults[name] = value
    return defaults


# -- validation (Kafka's DynamicBrokerConfig.validateConfigs) --------------------------------


def _scala_set(names: Iterable[str]) -> str:
    return "Set(" + ", ".join(sorted(names)) + ")"


def _invalid(message: str) -> MetadataError:
    return MetadataError(ErrorCode.invalid_request, message)


def _check_type(name: str, value: str) -> None:
    """Kafka's ``ConfigDef.parseType`` for one value of a known config."""
    kind = config_type(name)
    text = value.strip()
    if kind in _INT_BOUNDS:
        low, high = _INT_BOUNDS[kind]
        try:
            number = int(text)
        except ValueError:
            number = None
        if number is None or not low <= number <= high:
            raise _invalid(
                f"Invalid value {value} for configuration {name}: Not a number of type {kind.name}"
            )
        least = _AT_LEAST.get(name)
        if least is not None and number < least:
            raise _invalid(
                f"Invalid value {value} for configuration {name}: Value must be at least {least}"
            )
    elif kind is ConfigType.BOOLEAN:
        if text.lower() not in ("true", "false"):
            raise _invalid(
                f"Invalid value {value} for configuration {name}: Expected value to be "
                "either true or false"
            )
    elif kind is ConfigType.DOUBLE:
        try:
            float(text)
        except ValueError:
            raise _invalid(
                f"Invalid value {value} for configuration {name}: Not a number of type DOUBLE"
            ) from None
    allowed = _VALID_STRINGS.get(name)
    if allowed is not None and text not in allowed:
        raise _invalid(
            f"Invalid value {value} for configuration {name}: String must be one of: "
            + ", ".join(allowed)
        )


def validate_dynamic_configs(
    resource_name: str, configs: Mapping[str, str], static: BrokerConfig
) -> None:
    """Refuse (INVALID_REQUEST) what Kafka refuses as a BROKER resource's new configs.

    ``configs`` is the resource's whole dynamic set after the change.
    """
    modelled = model_names()
    read_only = sorted(
        name
        for name in configs
        if (name in KAFKA_BROKER_CONFIGS and not KAFKA_BROKER_CONFIGS[name].dynamic)
        or (name in modelled and name not in KAFKA_BROKER_CONFIGS)
    )
    if read_only:
        raise _invalid(f"Cannot update these configs dynamically: {_scala_set(read_only)}")
    unprefixed = [name for name in configs if name in LISTENER_ONLY_SECURITY_CONFIGS]
    if unprefixed:
        raise _invalid(
            "These security configs can be dynamically updated only per-listener using "
            f"the listener prefix: {_scala_set(unprefixed)}"
        )
    for name, value in configs.items():
        if name in KAFKA_BROKER_CONFIGS or name in modelled:
            _check_type(name, value)
    updates = {name: value for name, value in configs.items() if name in modelled}
    if updates:
        try:
            BrokerConfig.model_validate({**static.model_dump(by_alias=True), **updates})
        except ValidationError as exc:
            error = exc.errors()[0]
            key = ".".join(str(part) for part in error["loc"]) or next(iter(updates))
            message = str(error["msg"]).removeprefix("Value error, ")
            shown = updates.get(key, error.get("input"))
            raise _invalid(f"Invalid value {shown} for configuration {key}: {message}") from None
    if resource_name == DEFAULT_RESOURCE:
        per_broker = [
            name
            for name in configs
            if name in KAFKA_BROKER_CONFIGS
            and KAFKA_BROKER_CONFIGS[name].mode is UpdateMode.PER_BROKER
        ]
        if per_broker:
            raise _invalid(
                "Cannot update these configs at default cluster level, broker id must be "
                f"specified: {_scala_set(per_broker)}"
            )
