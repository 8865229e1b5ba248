"""AlterConfigs (key 33): replace a topic's overrides, or a broker's dynamic configs.

As Kafka's (deprecated) AlterConfigs, the configs given become the resource's whole
set: any config not named goes back to its default. Kafka's request checks come first
(a resource named twice, a config named twice, a null value: INVALID_REQUEST). TOPIC
resources: names and values are checked as in CreateTopics (INVALID_CONFIG), an
unknown topic is UNKNOWN_TOPIC_OR_PARTITION. BROKER resources (dynamic broker configs,
KIP-226): "" is the cluster-wide default, "<id>" must be this broker
(``handlers/broker_configs.py``); a read-only config, a value of the wrong type or a
per-broker config at the cluster level is INVALID_REQUEST, as Kafka's broker answers.
``validate_only`` checks and changes nothing.

CLIENT_METRICS resources (KIP-714's telemetry subscriptions): the configs given become
the subscription's whole set, checked as IncrementalAlterConfigs checks them
(``handlers/client_metrics_configs.py``); none given removes it.

Differences from Kafka: other resource types (GROUP, BROKER_LOGGER) are INVALID_REQUEST;
no alter-config policy, throttle time 0. A new value reaches existing partitions at
once: the replica manager re-applies topic configs (and broker defaults) on every
metadata change.

With an authorizer, ALTER_CONFIGS on the resource (``config_authorization.py``).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.handlers.base import error_message
from broker.handlers.broker_configs import SET, alter_broker_configs
from broker.handlers.client_metrics_configs import CLIENT_METRICS_RESOURCE
from broker.handlers.config_authorization import check_config_access
from broker.handlers.topic_configs import (
    BROKER_RESOURCE,
    alter_config_resources,
    check_alterable_topic,
    check_config_changes,
    config_resource_errors,
    validate_topic_configs,
)
from broker.security.authorizer.authorization import AclOperation
from broker.server.context import RequestContext
from protocol.builders import response_builder

API_KEY = 33
MIN_VERSION = 0
MAX_VERSION = 2


def handle(ctx: RequestContext, request: Any) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    validate_only = bool(request.validate_only)
    responses = alter_config_resources(
        b,
        request.resources,
        lambda kind, name, resource: _alter(ctx, kind, name, resource.configs, validate_only),
    )
    return b.AlterConfigsResponse(throttle_time=0, responses=responses)


def _alter(ctx: RequestContext, kind: int, name: str, configs: Any, validate_only: bool) -> None:
    check_config_access(ctx, kind, name, AclOperation.ALTER_CONFIGS)
    check_config_changes((c.name, c.value, SET) for c in configs)
    if kind == BROKER_RESOURCE:
        alter_broker_configs(ctx, name, {c.name: c.value for c in configs}, validate_only)
        return
    if kind == CLIENT_METRICS_RESOURCE:  # KIP-714 subscriptions: the whole set, validated
        configs_given = {c.name: c.value or "" for c in configs}
        ctx.services.client_metrics.replace(name, configs_given, validate_only)
        return
    cluster = ctx.services.metadata
    check_alterable_topic(cluster, kind, name)
    validated = validate_topic_configs(
        ((c.name, c.value) for c in configs),
        remote_storage_system_enabled=ctx.services.config.remote_log_storage_system_enable,
    )
    if not validate_only:
        cluster.replace_configs(name, validated)


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    """``error`` for every resource of the request; nothing is changed."""
    b = response_builder(API_KEY, ctx.api_version)
    return b.AlterConfigsResponse(
        throttle_time=0,
        responses=config_resource_errors(b, request.resources, error, error_message(error)),
    )
