"""FindCoordinator (key 10): the leader of the group's ``__consumer_offsets`` partition
(key type 0), of the transactional id's ``__transaction_state`` partition (key type 1),
or of the share partition's ``__share_group_state`` partition (key type 2, SHARE: the key
is ``"groupId:topicId:partition"``, Kafka's check of its form included).

Both topics are created on first use, as Kafka does. An unknown key type is
INVALID_REQUEST (Kafka: an exception naming it). With an authorizer, a group needs
DESCRIBE (else GROUP_AUTHORIZATION_FAILED), a transactional id DESCRIBE (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED). Differences from Kafka: the topics' replication
factor is capped by the live brokers.
"""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import BrokerEndpoint
from broker.handlers.base import error_message
from broker.security.authorizer.authorization import AclOperation, ResourceType, authorize
from broker.server.context import RequestContext
from protocol.builders import response_builder

API_KEY = 10
MIN_VERSION = 0
MAX_VERSION = 6

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
SHARE_KEY_TYPE = 2
#: Kafka's ``Errors`` messages for the authorization failures.
GROUP_DENIED = "Group authorization failed."
TXN_ID_DENIED = "Transactional Id authorization failed."


def _lookup(ctx: RequestContext, key: str, key_type: int) -> tuple[ErrorCode, str | None, Any]:
    if key_type == TRANSACTION_KEY_TYPE:
        if not key:
            return ErrorCode.invalid_request, "empty transactional id", None
        if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key):
            return ErrorCode.transactional_id_authorization_failed, TXN_ID_DENIED, None
        error, endpoint = ctx.services.coordinators.txn.coordinator_endpoint(key)
        return error, None, endpoint
    if key_type == SHARE_KEY_TYPE:
        if not _valid_share_key(key):
            return ErrorCode.invalid_request, f"Invalid share coordinator key: {key}", None
        error, endpoint = ctx.services.coordinators.share.coordinator_endpoint(key)
        return error, None, endpoint
    if key_type != GROUP_KEY_TYPE:
        return ErrorCode.invalid_request, f"unknown coordinator key type {key_type}", None
    if not key:
        return ErrorCode.invalid_request, "empty group id", None
    if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, key):
        return ErrorCode.group_authorization_failed, GROUP_DENIED, None
    error, endpoint = ctx.services.coordinators.group_metadata_manager.coordinator_endpoint(key)
    return error, None, endpoint


def _valid_share_key(key: str) -> bool:
    """Kafka's SharePartitionKey.validate: a group, a topic id and a partition."""
    parts = key.rsplit(":", 2)
    if len(parts) != 3 or not parts[0]:
        return False
    try:
        uuid.UUID(parts[1])
        return int(parts[2]) >= 0
    except ValueError:
        return False


def handle(ctx: RequestContext, request: Any) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    key_type = int(getattr(request, "key_type", GROUP_KEY_TYPE))
    if ctx.api_version >= 4:
        coordinators = []
        for key in request.coordinator_keys:
            error, message, endpoint = _lookup(ctx, key, key_type)
            coordinators.append(
                b.Coordinator(
                    key=key,
                    node_id=endpoint.broker_id if endpoint else -1,
                    host=_address(ctx, endpoint)[0],
                    port=_address(ctx, endpoint)[1],
                    error_code=error,
                    error_message=message,
                )
            )
        return b.FindCoordinatorResponse(throttle_time=0, coordinators=tuple(coordinators))
    error, message, endpoint = _lookup(ctx, request.key, key_type)
    return b.FindCoordinatorResponse(
        throttle_time=0,
        error_code=error,
        error_message=message,
        node_id=endpoint.broker_id if endpoint else -1,
        host=_address(ctx, endpoint)[0],
        port=_address(ctx, endpoint)[1],
    )


def _address(ctx: RequestContext, endpoint: BrokerEndpoint | None) -> tuple[str, int]:
    """The coordinator on the listener the request came in on, as in Kafka."""
    if endpoint is None:
        return "", -1
    return endpoint.address(ctx.connection.listener_name)


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    """``error`` at the top level (v0-3) or for every coordinator key (v4+)."""
    b = response_builder(API_KEY, ctx.api_version)
    keys = getattr(request, "coordinator_keys", None)
    if keys is None:
        return b.FindCoordinatorResponse(
            throttle_time=0,
            error_code=error,
            error_message=error_message(error),
            node_id=-1,
            host="",
            port=-1,
        )
    return b.FindCoordinatorResponse(
        throttle_time=0,
        coordinators=tuple(
            b.Coordinator(
                key=key,
                node_id=-1,
                host="",
                port=-1,
                error_code=error,
                error_message=error_message(error),
            )
            for key in keys
        ),
    )
