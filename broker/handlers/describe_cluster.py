"""DescribeCluster (key 60): the cluster id, the controller and the brokers.

As Kafka: ``endpoint_type`` 1 (brokers) is answered; 2 (controllers) sent to a
broker's listener is MISMATCHED_ENDPOINT_TYPE and any other value
UNSUPPORTED_ENDPOINT_TYPE. v2 ``include_fenced_brokers`` adds the brokers that are
down, marked ``is_fenced``.

Differences from Kafka: the controller is the one the shared cluster metadata names
(the same id Metadata returns); there are no racks and no ACLs, so cluster authorized
operations are never computed; throttle time 0.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.handlers.base import error_message
from broker.server.context import RequestContext
from protocol.builders import response_builder

API_KEY = 60
MIN_VERSION = 0
MAX_VERSION = 2

BROKER_ENDPOINT = 1
CONTROLLER_ENDPOINT = 2
_UNKNOWN_OPERATIONS = -2147483648


def handle(ctx: RequestContext, request: Any) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    cluster = ctx.services.metadata
    endpoint_type = int(getattr(request, "endpoint_type", BROKER_ENDPOINT))
    error, message = ErrorCode.none, None
    brokers: tuple[Any, ...] = ()
    if endpoint_type == CONTROLLER_ENDPOINT:
        error = ErrorCode.mismatched_endpoint_type
        message = "The request was sent to an endpoint of type BROKER, not CONTROLLER"
    elif endpoint_type != BROKER_ENDPOINT:
        error = ErrorCode.unsupported_endpoint_type
        message = f"Unknown endpoint type {endpoint_type}"
    else:
        fenced = bool(getattr(request, "include_fenced_brokers", False))
        brokers = tuple(
            b.DescribeClusterBroker(
                broker_id=e.broker_id,
                host=e.address(ctx.connection.listener_name)[0],
                port=e.address(ctx.connection.listener_name)[1],
                rack=None,
                is_fenced=not e.alive,
            )
            for e in sorted(cluster.brokers.values(), key=lambda e: e.broker_id)
            if e.alive or fenced
        )
    return b.DescribeClusterResponse(
        throttle_time=0,
        error_code=error,
        error_message=message,
        endpoint_type=endpoint_type,
        cluster_id=cluster.cluster_id,
        controller_id=cluster.controller_id,
        brokers=brokers,
        cluster_authorized_operations=_UNKNOWN_OPERATIONS,
    )


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    """``error`` at the top level, and Kafka's defaults for the rest: no cluster id, no
    controller, no brokers."""
    b = response_builder(API_KEY, ctx.api_version)
    return b.DescribeClusterResponse(
        throttle_time=0,
        error_code=error,
        error_message=error_message(error),
        endpoint_type=BROKER_ENDPOINT,
        cluster_id="",
        controller_id=-1,
        brokers=(),
        cluster_authorized_operations=_UNKNOWN_OPERATIONS,
    )
