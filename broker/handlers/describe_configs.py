"""DescribeConfigs (key 32): a topic's or a broker's configs, with where each comes from.

TOPIC resources (type 2) list every topic config Kafka knows, with the topic's value:
its override (source TOPIC_CONFIG), else what its broker synonym has on this broker
(DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG or
DEFAULT_CONFIG; ``handlers/topic_configs.py``). BROKER resources (type 4) list every
broker config a Kafka 4.0 broker lists, with value, source, type, read-only flag and
synonyms (``handlers/broker_configs.py``); the name must be this broker's id (another
id is INVALID_REQUEST, as Kafka: the client must ask that broker) or empty, which lists
the cluster-wide dynamic defaults. ``configuration_keys`` null or empty means every
config; otherwise only the keys named (unknown keys are left out, as Kafka does).
``include_synonyms`` adds Kafka's synonyms, in Kafka's order.

Differences from Kafka: configs minikafka does not model keep Kafka's default (a
properties file's unmodelled keys are not shown); ``include_documentation`` returns no
documentation; BROKER_LOGGER resources are INVALID_REQUEST. GROUP resources (type 32,
KIP-848): ``handlers/group_configs.py``; CLIENT_METRICS resources (type 16, KIP-714):
``handlers/client_metrics_configs.py``.
Throttle time 0.

With an authorizer, DESCRIBE_CONFIGS on the resource (``config_authorization.py``).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import MetadataError, validate_topic_name
from broker.handlers.base import error_message
from broker.handlers.broker_configs import broker_config_entries, layers_for
from broker.handlers.client_metrics_configs import (
    CLIENT_METRICS_RESOURCE,
    client_metrics_config_entries,
)
from broker.handlers.config_authorization import check_config_access
from broker.handlers.group_configs import GROUP_RESOURCE, group_config_entries
from broker.handlers.topic_configs import ConfigEntry, topic_config_entries
from broker.security.authorizer.authorization import AclOperation
from broker.server.context import RequestContext
from protocol.builders import Builder, response_builder

API_KEY = 32
MIN_VERSION = 1
MAX_VERSION = 4

TOPIC = 2
BROKER = 4


def handle(ctx: RequestContext, request: Any) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    synonyms = bool(request.include_synonyms)
    results = []
    for resource in request.resources:
        kind = int(resource.resource_type)
        name = resource.resource_name
        keys = set(resource.configuration_keys) if resource.configuration_keys else None
        error, message = ErrorCode.none, None
        configs: tuple[Any, ...] = ()
        try:
            check_config_access(ctx, kind, name, AclOperation.DESCRIBE_CONFIGS)
            entries = _entries(ctx, kind, name)
            configs = tuple(
                _entry(b, e, synonyms) for e in entries if keys is None or e.name in keys
            )
        except MetadataError as exc:
            error, message = exc.error, exc.message
        results.append(
            b.DescribeConfigsResult(
                error_code=error,
                error_message=message,
                resource_type=kind,
                resource_name=name,
                configs=configs,
            )
        )
    return b.DescribeConfigsResponse(throttle_time=0, results=tuple(results))


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    """``error`` for every resource of the request, with no configs."""
    b = response_builder(API_KEY, ctx.api_version)
    return b.DescribeConfigsResponse(
        throttle_time=0,
        results=tuple(
            b.DescribeConfigsResult(
                error_code=error,
                error_message=error_message(error),
                resource_type=int(resource.resource_type),
                resource_name=resource.resource_name,
                configs=(),
            )
            for resource in request.resources
        ),
    )


def _entries(ctx: RequestContext, kind: int, name: str) -> list[ConfigEntry]:
    services = ctx.services
    if kind == TOPIC:
        validate_topic_name(name)
        info = services.metadata.topics.get(name)
        if info is None:
            raise MetadataError(
                ErrorCode.unknown_topic_or_partition, f"Topic {name} does not exist"
            )
        return topic_config_entries(layers_for(services), info.configs)
    if kind == BROKER:
        if name == "":
            return broker_config_entries(layers_for(services), name)
        try:
            broker_id = int(name)
        except ValueError:
            raise MetadataError(
                ErrorCode.invalid_request, f"Broker id must be an integer, but it is: {name}"
            ) from None
        if broker_id != services.broker_id:
            raise MetadataError(
                ErrorCode.invalid_request,
                f"Unexpected broker id, expected {services.broker_id} or empty string, "
                f"but received {name}",
            )
        return broker_config_entries(layers_for(services), name)
    if kind == GROUP_RESOURCE:
        return group_config_entries(ctx, name)
    if kind == CLIENT_METRICS_RESOURCE:
        return client_metrics_config_entries(ctx, name)
    raise MetadataError(ErrorCode.invalid_request, f"Unsupported resource type {kind}")


def _entry(b: Builder, entry: ConfigEntry, with_synonyms: bool) -> Any:
    synonyms = (
        tuple(
            b.DescribeConfigsSynonym(name=name, value=value, source=int(source))
            for name, value, source in entry.synonyms
        )
        if with_synonyms
        else ()
    )
    return b.DescribeConfigsResourceResult(
        name=entry.name,
        value=entry.value,
        read_only=entry.read_only,
        config_source=int(entry.source),
        is_default=entry.is_default,
        is_sensitive=entry.is_sensitive,
        synonyms=synonyms,
        config_type=int(entry.type),
        documentation=None,
    )
