"""BROKER resources in the config APIs: describe a broker's configs, alter dynamic ones.

DescribeConfigs on BROKER "<id>" (this broker) lists every config a Kafka 4.0 broker
lists (``broker_config_defs``), each with its value, its source, Kafka's type, whether
it is read-only (not dynamically updatable) and its synonyms, as Kafka's
``ConfigHelper.createBrokerConfigEntry``: a PASSWORD's (or an unknown name's) value is
never shown. BROKER "" lists only the cluster-wide dynamic defaults, with only their
DYNAMIC_DEFAULT_BROKER_CONFIG synonyms.

AlterConfigs and IncrementalAlterConfigs on BROKER resources follow Kafka's
ConfigAdminManager: a non-empty name must be this broker's id (INVALID_REQUEST
otherwise: a client sends a broker's resource to that broker), the resulting dynamic
set is validated (``dynamic_config.validate_dynamic_configs``) and, unless
``validate_only``, stored in the cluster metadata. AlterConfigs replaces the whole
dynamic set of the resource; IncrementalAlterConfigs applies SET / DELETE / APPEND /
SUBTRACT to it (APPEND and SUBTRACT only on LIST configs, starting from Kafka's default).
With eligible leader replicas on (KIP-966), ``min.insync.replicas`` may not be set or
removed per broker, nor removed cluster-wide (INVALID_CONFIG, Kafka's messages).
"""

from __future__ import annotations

from collections.abc import Iterable

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import MetadataError
from broker.config.broker_config_defs import KAFKA_BROKER_CONFIGS, ConfigSource, ConfigType
from broker.config.dynamic_config import (
    DEFAULT_RESOURCE,
    BrokerConfigLayers,
    broker_layers,
    config_type,
    is_dynamic,
    validate_dynamic_configs,
)
from broker.handlers.topic_configs import ConfigEntry
from broker.server.context import RequestContext
from broker.server.services import BrokerServices

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_MIN_ISR = "min.insync.replicas"
_OPERATIONS = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}


def layers_for(services: BrokerServices) -> BrokerConfigLayers:
    """This broker's config layers (static ones include its endpoint and log dir)."""
    return broker_layers(
        services.config,
        services.metadata,
        services.broker_id,
        services.replica_manager.log_manager.data_dir,
    )


def broker_config_entries(layers: BrokerConfigLayers, resource_name: str) -> list[ConfigEntry]:
    """The configs DescribeConfigs lists for BROKER ``resource_name`` (already checked
    to be this broker's id or "")."""
    per_broker = resource_name != DEFAULT_RESOURCE
    if per_broker:
        values = {name: layers.value(name) for name in layers.names()}
    else:
        values = dict(layers.dynamic_default)
    entries = []
    for name in sorted(values):
        kind = config_type(name)
        sensitive = kind in (ConfigType.PASSWORD, ConfigType.UNKNOWN)
        synonyms = [
            (synonym, None if sensitive else value, source)
            for synonym, value, source in layers.synonyms(name)
            if per_broker or source is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        ]
        entries.append(
            ConfigEntry(
                name,
                None if sensitive else values[name],
                synonyms[0][2] if synonyms else ConfigSource.DEFAULT_CONFIG,
                kind,
                read_only=not is_dynamic(name),
                is_sensitive=sensitive,
                synonyms=tuple(synonyms),
            )
        )
    return entries


def check_broker_resource(ctx: RequestContext, name: str) -> None:
    """Kafka's ``validateResourceNameIsCurrentNodeId`` for a non-empty BROKER name."""
    if name == DEFAULT_RESOURCE:
        return
    try:
        broker_id = int(name)
    except ValueError:
        raise MetadataError(
            ErrorCode.invalid_request, f"Node id must be an integer, but it is: {name}"
        ) from None
    if broker_id != ctx.services.broker_id:
        raise MetadataError(
            ErrorCode.invalid_request,
            f"Unexpected broker id, expected {ctx.services.broker_id}, but received {name}",
        )


def alter_broker_configs(
    ctx: RequestContext, name: str, configs: dict[str, str], validate_only: bool
) -> None:
    """Make ``configs`` the whole dynamic set of BROKER ``name``, if Kafka would."""
    check_broker_resource(ctx, name)
    _check_elr_min_isr(ctx, name, configs)
    validate_dynamic_configs(name, configs, ctx.services.config)
    if not validate_only:
        ctx.services.metadata.set_broker_configs(name, configs)


def _check_elr_min_isr(ctx: RequestContext, name: str, configs: dict[str, str]) -> None:
    """KIP-966 (Kafka's ConfigurationControlManager): with eligible leader replicas on,
    ``min.insync.replicas`` is a cluster-level config only, and it stays set."""
    if not ctx.services.replica_manager.controller.elr_enabled:
        return
    current = ctx.services.metadata.broker_configs.get(name, {})
    if name != DEFAULT_RESOURCE:
        if _MIN_ISR in configs or _MIN_ISR in current:
            raise MetadataError(
                ErrorCode.invalid_config,
                "Broker-level min.insync.replicas cannot be altered while ELR is enabled.",
            )
    elif _MIN_ISR in current and _MIN_ISR not in configs:
        raise MetadataError(
            ErrorCode.invalid_config,
            "Cluster-level min.insync.replicas cannot be removed while ELR is enabled.",
        )


def incremental_broker_configs(
    ctx: RequestContext, name: str, changes: Iterable[tuple[str, str | None, int]]
) -> dict[str, str]:
    """BROKER ``name``'s dynamic set after ``(config, value, operation)`` changes
    (Kafka's ``prepareIncrementalConfigs``); not validated yet."""
    check_broker_resource(ctx, name)
    changes = list(changes)
    for config, _value, operation in changes:
        if operation not in _OPERATIONS:
            raise MetadataError(
                ErrorCode.invalid_request, f"Unknown operations type {operation} for {config}"
            )
    result = dict(ctx.services.metadata.broker_configs.get(name, {}))
    for config, value, operation in changes:
        if operation == SET:
            assert value is not None  # null values were refused before
            result[config] = value
        elif operation == DELETE:
            result.pop(config, None)
        else:
            result[config] = _list_change(config, result.get(config), value or "", operation)
    return result


def _list_change(config: str, current: str | None, value: str, operation: int) -> str:
    verb = "append" if operation == APPEND else "subtract"
    if config_type(config) is ConfigType.UNKNOWN:
        raise MetadataError(ErrorCode.invalid_config, f"Unknown config name: {config}")
    if config_type(config) is not ConfigType.LIST:
        raise MetadataError(
            ErrorCode.invalid_config,
            f"Config value {verb} is not allowed for config key: {config}",
        )
    definition = KAFKA_BROKER_CONFIGS.get(config)
    base = current if current is not None else (definition.default if definition else None)
    given = value.split(",")
    if operation == APPEND:
        items = [item for item in (base or "").split(",") if item]
        items.extend(item for item in given if item not in items)
    else:
        items = (base or "").split(",")
        for item in given:
            if item in items:
                items.remove(item)
    return ",".join(items)
