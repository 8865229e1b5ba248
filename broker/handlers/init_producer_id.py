"""InitProducerId (key 22): a producer id for an idempotent or transactional producer.

Without a transactional id, as Kafka: a new producer id, unique in the cluster and
increasing (reserved in blocks that survive a restart when there is a data directory,
see ``ProducerIdAllocator``), with epoch 0. The ``producer_id``/``producer_epoch`` a
v3+ client sends to bump its epoch are ignored, as Kafka ignores them without a
transactional id: the client simply gets a fresh id.

With a transactional id the transaction coordinator answers
(``TransactionCoordinator.handle_init_producer_id``): the id's producer id with the next
epoch, fencing the previous instance; an open transaction of that instance is aborted
first and the request answered CONCURRENT_TRANSACTIONS (the client retries). The
request waits in the Produce purgatory while the new epoch is written to
``__transaction_state``. A timeout above ``transaction.max.timeout.ms`` is
INVALID_TRANSACTION_TIMEOUT; a producer id and epoch of which only one is -1 is
INVALID_REQUEST; v0-3 clients get INVALID_PRODUCER_EPOCH where newer ones get
PRODUCER_FENCED, as Kafka answers them.

With an authorizer: a transactional id needs WRITE on it (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an idempotent producer IDEMPOTENT_WRITE on the
cluster or WRITE on some topic (else CLUSTER_AUTHORIZATION_FAILED).

Differences from Kafka: throttle time 0; two-phase commit (KIP-939, v6's
``enable_2pc``) is not served: answered TRANSACTIONAL_ID_AUTHORIZATION_FAILED, KIP-939's
answer when the broker's ``transaction.two.phase.commit.enable`` is false.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from broker.handlers.group_common import answer_when_called
from broker.handlers.txn_common import fenced_error_for_version
from broker.security.authorizer.authorization import (
    AclOperation,
    ResourceType,
    authorize,
    authorize_by_resource_type,
    authorize_cluster,
)
from broker.server.context import RequestContext
from broker.txn.transaction_coordinator import InitProducerIdResult
from protocol.builders import response_builder

API_KEY = 22
MIN_VERSION = 0
MAX_VERSION = 6

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
# The version that introduced PRODUCER_FENCED (KIP-588); older clients know only
# INVALID_PRODUCER_EPOCH.
PRODUCER_FENCED_VERSION = 4


def _response(ctx: RequestContext, result: InitProducerIdResult) -> Any:
    error = result.error
    error = fenced_error_for_version(error, ctx.api_version, PRODUCER_FENCED_VERSION)
    b = response_builder(API_KEY, ctx.api_version)
    return b.InitProducerIdResponse(
        throttle_time=0,
        error_code=error,
        producer_id=result.producer_id,
        producer_epoch=result.producer_epoch,
    )


def handle(ctx: RequestContext, request: Any) -> Any:
    transactional_id = request.transactional_id
    if ctx.services.security.authorizer is not None:
        refused = _authorization_error(ctx, transactional_id)
        if refused is not None:
            return error_response(ctx, request, refused)
    if transactional_id is None:
        return _response(
            ctx, InitProducerIdResult(ctx.services.metadata.next_producer_id(), 0, ErrorCode.none)
        )
    producer_id = int(getattr(request, "producer_id", NO_PRODUCER_ID))
    producer_epoch = int(getattr(request, "producer_epoch", NO_PRODUCER_EPOCH))
    if (producer_id == NO_PRODUCER_ID) != (producer_epoch == NO_PRODUCER_EPOCH):
        return error_response(ctx, request, ErrorCode.invalid_request)
    if getattr(request, "enable2_pc", False):
        return error_response(ctx, request, ErrorCode.transactional_id_authorization_failed)
    expected = None if producer_id == NO_PRODUCER_ID else (producer_id, producer_epoch)
    timeout_ms = int(request.transaction_timeout.total_seconds() * 1000)

    def start(callback: Callable[[InitProducerIdResult], None]) -> None:
        ctx.services.coordinators.txn.handle_init_producer_id(
            transactional_id, timeout_ms, expected, callback, parked_request=ctx
        )

    return answer_when_called(start, lambda result: _response(ctx, result))


def _authorization_error(ctx: RequestContext, transactional_id: str | None) -> ErrorCode | None:
    """WRITE on the transactional id; an idempotent producer needs IDEMPOTENT_WRITE on the
    cluster or WRITE on some topic (``KafkaApis.handleInitProducerIdRequest``)."""
    if transactional_id is not None:
        if authorize(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
            return None
        return ErrorCode.transactional_id_authorization_failed
    if authorize_cluster(ctx, AclOperation.IDEMPOTENT_WRITE) or authorize_by_resource_type(
        ctx, AclOperation.WRITE, ResourceType.TOPIC
    ):
        return None
    return ErrorCode.cluster_authorization_failed


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    """``error``, and no producer id (-1, epoch -1)."""
    b = response_builder(API_KEY, ctx.api_version)
    return b.InitProducerIdResponse(
        throttle_time=0, error_code=error, producer_id=-1, producer_epoch=-1
    )
