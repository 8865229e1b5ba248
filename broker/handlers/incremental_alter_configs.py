"""IncrementalAlterConfigs (key 44): set, delete, append to or subtract from topic configs.

As Kafka (KIP-339): each named config is changed by its operation — SET (0) overrides
it, DELETE (1) removes the override (back to the broker default), APPEND (2) and
SUBTRACT (3) add or remove items of a LIST config (``cleanup.policy``, the throttled
replica lists), starting from its current effective value; APPEND/SUBTRACT on a
non-list config, an unknown operation or a config named twice is INVALID_REQUEST; names
and resulting values are checked as in CreateTopics (INVALID_CONFIG); an unknown topic
is UNKNOWN_TOPIC_OR_PARTITION; ``validate_only`` checks and changes nothing.

Differences from Kafka: BROKER resources are refused with INVALID_REQUEST (there are no
dynamic broker configs), other resource types too. No alter-config policy, no ACLs,
throttle time 0. A new value reaches existing partitions at once: the replica
manager re-applies topic configs on every metadata change.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.cluster_metadata import MetadataError, TopicInfo
from broker.context import RequestContext
from broker.handlers.base import error_message
from broker.handlers.topic_configs import (
    TOPIC_CONFIG_DEFS,
    ConfigType,
    broker_topic_defaults,
    check_alterable_topic,
    duplicate_resources,
    validate_topic_configs,
)
from protocol.builders import response_builder

API_KEY = 44
MIN_VERSION = 0
MAX_VERSION = 1

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def handle(ctx: RequestContext, request: Any) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    cluster = ctx.services.metadata
    duplicates = duplicate_resources(
        (int(r.resource_type), r.resource_name) for r in request.resources
    )
    responses = []
    for resource in request.resources:
        kind, name = int(resource.resource_type), resource.resource_name
        error, message = ErrorCode.none, None
        try:
            if (kind, name) in duplicates:
                raise MetadataError(ErrorCode.invalid_request, f"Duplicate resource {name}")
            info = check_alterable_topic(cluster, kind, name)
            configs = _apply(ctx, info, resource.configs)
            if not request.validate_only:
                cluster.replace_configs(name, configs)
        except MetadataError as exc:
            error, message = exc.error, exc.message
        responses.append(
            b.AlterConfigsResourceResponse(
                error_code=error, error_message=message, resource_type=kind, resource_name=name
            )
        )
    return b.IncrementalAlterConfigsResponse(throttle_time=0, responses=tuple(responses))


def _apply(ctx: RequestContext, info: TopicInfo, changes: Any) -> dict[str, str]:
    """The topic's overrides after ``changes``, validated."""
    names = [c.name for c in changes]
    if len(set(names)) != len(names):
        raise MetadataError(ErrorCode.invalid_request, "A config is named twice in the request")
    overrides = dict(info.configs)
    defaults = broker_topic_defaults(ctx.services.config)
    for change in changes:
        name, operation, value = change.name, int(change.config_operation), change.value
        definition = TOPIC_CONFIG_DEFS.get(name)
        if definition is None:
            raise MetadataError(ErrorCode.invalid_config, f"Unknown topic config name: {name}")
        if operation == SET:
            if value is None:
                raise MetadataError(
                    ErrorCode.invalid_config, f"Null value not supported for topic config: {name}"
                )
            overrides[name] = value
        elif operation == DELETE:
            overrides.pop(name, None)
        elif operation in (APPEND, SUBTRACT):
            if definition.type is not ConfigType.LIST:
                raise MetadataError(
                    ErrorCode.invalid_request,
                    f"Config value append/subtract is not allowed for config key: {name}",
                )
            current = overrides.get(name, defaults.get(name, ""))
            items = [item.strip() for item in current.split(",") if item.strip()]
            given = [item.strip() for item in (value or "").split(",") if item.strip()]
            if operation == APPEND:
                items.extend(item for item in given if item not in items)
            else:
                items = [item for item in items if item not in given]
            overrides[name] = ",".join(items)
        else:
            raise MetadataError(ErrorCode.invalid_request, f"Unknown config operation {operation}")
    return validate_topic_configs(overrides.items())


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    """``error`` for every resource of the request; nothing is changed."""
    b = response_builder(API_KEY, ctx.api_version)
    return b.IncrementalAlterConfigsResponse(
        throttle_time=0,
        responses=tuple(
            b.AlterConfigsResourceResponse(
                error_code=error,
                error_message=error_message(error),
                resource_type=int(resource.resource_type),
                resource_name=resource.resource_name,
            )
            for resource in request.resources
        ),
    )
