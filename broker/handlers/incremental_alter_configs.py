"""IncrementalAlterConfigs (key 44): set, delete, append to or subtract from configs.

As Kafka (KIP-339): each named config is changed by its operation -- SET (0) overrides
it, DELETE (1) removes the override (back to the default), APPEND (2) and SUBTRACT (3)
add or remove items of a LIST config, starting from its current value (a SUBTRACT may
leave the empty list, which Kafka's list validators accept: "" for ``cleanup.policy``
is no cleanup policy, see ``broker/log/log_config.py``). Kafka's request
checks come first: a resource or a config named twice, a null value for anything but
DELETE, an unknown operation: INVALID_REQUEST.

TOPIC resources: APPEND/SUBTRACT on a non-list config is INVALID_CONFIG ("Can't APPEND
to key ... because its type is not LIST.", as KRaft's controller); names and resulting
values are checked as in CreateTopics (INVALID_CONFIG); an unknown topic is
UNKNOWN_TOPIC_OR_PARTITION. BROKER resources (dynamic broker configs, KIP-226): "" is
the cluster-wide default, "<id>" must be this broker; the changes land on the stored
dynamic set and the result is validated as Kafka's broker does
(``handlers/broker_configs.py``: read-only config, bad value or per-broker config at the
cluster level is INVALID_REQUEST; APPEND/SUBTRACT on a non-list is INVALID_CONFIG).
``validate_only`` checks and changes nothing.

GROUP resources (type 32, KIP-848's per-group configs): ``handlers/group_configs.py``.
CLIENT_METRICS resources (type 16, KIP-714's telemetry subscriptions):
``handlers/client_metrics_configs.py``.

Differences from Kafka: BROKER_LOGGER resources are INVALID_REQUEST; APPEND/SUBTRACT
on a broker config Kafka does not know is INVALID_CONFIG (Kafka's broker fails it with
UNKNOWN_SERVER_ERROR). No alter-config policy, no ACLs, throttle time 0. A new value
reaches existing partitions at once.

With an authorizer, ALTER_CONFIGS on the resource (``config_authorization.py``).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import MetadataError, TopicInfo
from broker.handlers.base import error_message
from broker.handlers.broker_configs import (
    APPEND,
    DELETE,
    SET,
    SUBTRACT,
    alter_broker_configs,
    incremental_broker_configs,
    layers_for,
)
from broker.handlers.client_metrics_configs import (
    CLIENT_METRICS_RESOURCE,
    alter_client_metrics_configs,
)
from broker.handlers.config_authorization import check_config_access
from broker.handlers.group_configs import GROUP_RESOURCE, alter_group_configs
from broker.handlers.topic_configs import (
    BROKER_RESOURCE,
    TOPIC_CONFIG_DEFS,
    ConfigType,
    alter_config_resources,
    check_alterable_topic,
    check_config_changes,
    config_resource_errors,
    topic_defaults,
    validate_topic_configs,
)
from broker.security.authorizer.authorization import AclOperation
from broker.server.context import RequestContext
from protocol.builders import response_builder

API_KEY = 44
MIN_VERSION = 0
MAX_VERSION = 1

_OPERATION_NAMES = {APPEND: "APPEND", SUBTRACT: "SUBTRACT"}


def handle(ctx: RequestContext, request: Any) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    validate_only = bool(request.validate_only)

    def alter(kind: int, name: str, resource: Any) -> None:
        check_config_access(ctx, kind, name, AclOperation.ALTER_CONFIGS)
        changes = [(c.name, c.value, int(c.config_operation)) for c in resource.configs]
        check_config_changes(changes)
        if kind == BROKER_RESOURCE:
            configs = incremental_broker_configs(ctx, name, changes)
            alter_broker_configs(ctx, name, configs, validate_only)
        elif kind == GROUP_RESOURCE:
            alter_group_configs(ctx, name, changes, validate_only)
        elif kind == CLIENT_METRICS_RESOURCE:
            alter_client_metrics_configs(ctx, name, changes, validate_only)
        else:
            info = check_alterable_topic(ctx.services.metadata, kind, name)
            overrides = _apply(ctx, info, changes)
            if not validate_only:
                ctx.services.metadata.replace_configs(name, overrides)

    responses = alter_config_resources(b, request.resources, alter)
    return b.IncrementalAlterConfigsResponse(throttle_time=0, responses=responses)


def _apply(
    ctx: RequestContext, info: TopicInfo, changes: list[tuple[str, str | None, int]]
) -> dict[str, str]:
    """The topic's overrides after ``changes``, validated."""
    for name, _value, operation in changes:
        if operation not in (SET, DELETE, APPEND, SUBTRACT):
            raise MetadataError(
                ErrorCode.invalid_request, f"Unknown operations type {operation} for {name}"
            )
    overrides = dict(info.configs)
    defaults: dict[str, str] | None = None
    for name, value, operation in changes:
        definition = TOPIC_CONFIG_DEFS.get(name)
        if definition is None:
            raise MetadataError(ErrorCode.invalid_config, f"Unknown topic config name: {name}")
        if operation == SET:
            assert value is not None  # refused by check_config_changes
            overrides[name] = value
        elif operation == DELETE:
            overrides.pop(name, None)
        else:
            if definition.type is not ConfigType.LIST:
                raise MetadataError(
                    ErrorCode.invalid_config,
                    f"Can't {_OPERATION_NAMES[operation]} to key {name} because its type "
                    "is not LIST.",
                )
            if defaults is None:
                defaults = topic_defaults(layers_for(ctx.services))
            current = overrides.get(name, defaults.get(name, ""))
            items = [item.strip() for item in current.split(",") if item.strip()]
            given = [item.strip() for item in (value or "").split(",") if item.strip()]
            if operation == APPEND:
                items.extend(item for item in given if item not in items)
            else:
                items = [item for item in items if item not in given]
            overrides[name] = ",".join(items)
    return validate_topic_configs(
        overrides.items(),
        remote_storage_system_enabled=ctx.services.config.remote_log_storage_system_enable,
    )


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    """``error`` for every resource of the request; nothing is changed."""
    b = response_builder(API_KEY, ctx.api_version)
    return b.IncrementalAlterConfigsResponse(
        throttle_time=0,
        responses=config_resource_errors(b, request.resources, error, error_message(error)),
    )
