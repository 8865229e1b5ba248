"""UnregisterBroker (key 64, v0, KIP-500): Admin.unregisterBroker, for a decommissioned broker.

Behavior:

- As Kafka's controller (``ReplicationControlManager.unregisterBroker``): an id with no
  registration is BROKER_ID_NOT_REGISTERED ("Broker ID N is not currently registered");
  otherwise the broker leaves every ISR and ELR, the partitions it led elect a new leader
  (or go offline), and its registration is removed: Metadata and DescribeCluster (even
  with ``include_fenced_brokers``) stop listing it (``Controller.unregister_broker``).
- Kafka does not refuse a live broker; it registers again at its next heartbeat. Here a
  live broker registers again at once: it stays listed, having lost its leaderships and
  ISR places, and catches up as a follower. A stopped broker that starts again
  registers again.
- With an authorizer, ALTER on the cluster (else CLUSTER_AUTHORIZATION_FAILED).

Version notes: v0 only (Kafka 4.2's newest).

Differences from Kafka: any broker answers (Kafka's brokers forward to the controller);
throttle time 0.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.handlers.base import error_message
from broker.security.authorizer.authorization import AclOperation, cluster_denied
from broker.server.context import RequestContext
from protocol.builders import response_builder

API_KEY = 64
MIN_VERSION = 0
MAX_VERSION = 0


def handle(ctx: RequestContext, request: Any) -> Any:
    if cluster_denied(ctx, AclOperation.ALTER):
        return error_response(ctx, request, ErrorCode.cluster_authorization_failed)
    controller = ctx.services.replica_manager.controller
    error, message = controller.unregister_broker(int(request.broker_id))
    b = response_builder(API_KEY, ctx.api_version)
    return b.UnregisterBrokerResponse(throttle_time=0, error_code=error, error_message=message)


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    return b.UnregisterBrokerResponse(
        throttle_time=0, error_code=error, error_message=error_message(error)
    )
