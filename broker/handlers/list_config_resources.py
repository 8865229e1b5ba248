"""ListConfigResources (key 74, KIP-1142): the config resources of the types asked.

Versions 0-1.

Behavior:
- Needs DESCRIBE_CONFIGS on the CLUSTER, else CLUSTER_AUTHORIZATION_FAILED and no
  resources (``KafkaApis.handleListConfigResources``).
- v1 lists, for each type asked (none asked: every type Kafka supports), in Kafka's
  order: GROUP (32) every group with config overrides (Kafka's
  ``GroupConfigManager.groupIds``), CLIENT_METRICS (16), BROKER_LOGGER (8) and BROKER (4)
  every live broker by id, TOPIC (2) every topic, internal ones included. A type outside
  those five is UNSUPPORTED_VERSION with no resources.
- CLIENT_METRICS lists the client telemetry subscriptions (KIP-714), by name.

Version notes:
- v0 (Kafka 3.7's ListClientMetricsResources, renamed) lists client-metrics resources
  only.
- v1 adds ``resource_types``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from kio.schema.errors import ErrorCode

from broker.security.authorizer.acl import CLUSTER_NAME
from broker.security.authorizer.authorization import AclOperation, ResourceType, authorize
from broker.server.context import RequestContext
from protocol.builders import response_builder

API_KEY = 74
MIN_VERSION = 0
MAX_VERSION = 1

# Kafka's ConfigResource.Type codes.
TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8
CLIENT_METRICS = 16
GROUP = 32
#: What Kafka lists, in the order its answer lists them.
SUPPORTED_TYPES = (GROUP, CLIENT_METRICS, BROKER_LOGGER, BROKER, TOPIC)


def handle(ctx: RequestContext, request: Any) -> Any:
    if ctx.services.security.authorizer is not None and not authorize(
        ctx, AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME
    ):
        return error_response(ctx, request, ErrorCode.cluster_authorization_failed)
    if ctx.api_version == 0:
        return _response(ctx, ErrorCode.none, [(CLIENT_METRICS, _client_metrics(ctx))])
    asked = {int(kind) for kind in request.resource_types} or set(SUPPORTED_TYPES)
    if not asked.issubset(SUPPORTED_TYPES):
        return _response(ctx, ErrorCode.unsupported_version, [])
    listers: dict[int, Callable[[RequestContext], Iterable[str]]] = {
        GROUP: _groups,
        CLIENT_METRICS: _client_metrics,
        BROKER_LOGGER: _brokers,
        BROKER: _brokers,
        TOPIC: _topics,
    }
    return _response(
        ctx,
        ErrorCode.none,
        [(kind, listers[kind](ctx)) for kind in SUPPORTED_TYPES if kind in asked],
    )


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    """``error`` and no resources."""
    del request
    b = response_builder(API_KEY, ctx.api_version)
    return b.ListConfigResourcesResponse(throttle_time=0, error_code=error, config_resources=())


def _response(ctx: RequestContext, error: ErrorCode, found: list[tuple[int, Iterable[str]]]) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    return b.ListConfigResourcesResponse(
        throttle_time=0,
        error_code=error,
        config_resources=tuple(
            b.ConfigResource(resource_name=name, resource_type=kind)
            for kind, names in found
            for name in names
        ),
    )


def _groups(ctx: RequestContext) -> list[str]:
    return ctx.services.coordinators.consumer_group.group_configs.store.group_ids()


def _client_metrics(ctx: RequestContext) -> list[str]:
    return ctx.services.client_metrics.names()


def _brokers(ctx: RequestContext) -> list[str]:
    return [str(broker.broker_id) for broker in ctx.services.metadata.alive_brokers()]


def _topics(ctx: RequestContext) -> list[str]:
    return list(ctx.services.metadata.topics)
