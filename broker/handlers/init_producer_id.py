"""InitProducerId (key 22): a producer id for an idempotent producer.

Without a transactional id, as Kafka: a new producer id, unique in the cluster and
increasing (reserved in blocks that survive a restart when there is a data directory,
see ``ProducerIdAllocator``), with epoch 0. The ``producer_id``/``producer_epoch`` a
v3+ client sends to bump its epoch are ignored, as Kafka ignores them without a
transactional id: the client simply gets a fresh id.

With a transactional id the answer is TRANSACTIONAL_ID_AUTHORIZATION_FAILED. This
broker has no transaction coordinator; COORDINATOR_NOT_AVAILABLE or NOT_COORDINATOR
would make every client retry for ever, while this code is fatal in the Java client,
librdkafka and aiokafka, which raise it naming the transactional id — the user learns
at once that this broker will not serve that transactional id.

Differences from Kafka: no transactions (above); no ACLs; throttle time 0.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.context import RequestContext
from protocol.builders import response_builder

API_KEY = 22
MIN_VERSION = 0
MAX_VERSION = 6


def handle(ctx: RequestContext, request: Any) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    if request.transactional_id is not None:
        return b.InitProducerIdResponse(
            throttle_time=0,
            error_code=ErrorCode.transactional_id_authorization_failed,
            producer_id=-1,
            producer_epoch=-1,
        )
    return b.InitProducerIdResponse(
        throttle_time=0,
        error_code=ErrorCode.none,
        producer_id=ctx.services.metadata.next_producer_id(),
        producer_epoch=0,
    )


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    """``error``, and no producer id (-1, epoch -1)."""
    b = response_builder(API_KEY, ctx.api_version)
    return b.InitProducerIdResponse(
        throttle_time=0, error_code=error, producer_id=-1, producer_epoch=-1
    )
