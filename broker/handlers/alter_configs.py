"""AlterConfigs (key 33): replace a topic's config overrides with the given set.

As Kafka's (deprecated) AlterConfigs: the configs given become the topic's whole set of
overrides — any override not named goes back to the broker default. Names and values
are checked as in CreateTopics (INVALID_CONFIG); an unknown topic is
UNKNOWN_TOPIC_OR_PARTITION; a resource named twice is INVALID_REQUEST;
``validate_only`` checks and changes nothing.

Differences from Kafka: BROKER resources are refused with INVALID_REQUEST (there are no
dynamic broker configs), other resource types too. No alter-config policy, no ACLs,
throttle time 0. A new value reaches existing partitions at once: the replica
manager re-applies topic configs on every metadata change.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.cluster_metadata import MetadataError
from broker.context import RequestContext
from broker.handlers.base import error_message
from broker.handlers.topic_configs import (
    check_alterable_topic,
    duplicate_resources,
    validate_topic_configs,
)
from protocol.builders import response_builder

API_KEY = 33
MIN_VERSION = 0
MAX_VERSION = 2


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
            check_alterable_topic(cluster, kind, name)
            configs = validate_topic_configs((c.name, c.value) for c in resource.configs)
            if not request.validate_only:
                cluster.replace_configs(name, configs)
        except MetadataError as exc:
            error, message = exc.error, exc.message
        responses.append(
            b.AlterConfigsResourceResponse(
                error_code=error, error_message=message, resource_type=kind, resource_name=name
            )
        )
    return b.AlterConfigsResponse(throttle_time=0, responses=tuple(responses))


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    """``error`` for every resource of the request; nothing is changed."""
    b = response_builder(API_KEY, ctx.api_version)
    return b.AlterConfigsResponse(
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
