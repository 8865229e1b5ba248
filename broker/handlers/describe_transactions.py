"""DescribeTransactions (key 65): the state of transactional ids this broker coordinates.

As Kafka: per id, its state name, producer id and epoch, timeout, start time and the
partitions of its open transaction; TRANSACTIONAL_ID_NOT_FOUND for an id unknown here
(or being expired), NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS when its
``__transaction_state`` partition is not led here or still loading. The start time is
kept on the broker's monotonic clock and answered as wall-clock time.

Differences from Kafka: no ACLs (no TRANSACTIONAL_ID_AUTHORIZATION_FAILED); with no
transaction open the start time is 0 where Kafka sends -1, which kio (the project's own
clients decode with it) refuses as a timestamp.

With an authorizer, a transactional id the principal may not DESCRIBE is
TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.security.authorizer.authorization import AclOperation, ResourceType, authorize
from broker.server.context import RequestContext
from broker.txn.txn_admin import TransactionDescription
from protocol.builders import Builder, response_builder

API_KEY = 65
MIN_VERSION = 0
MAX_VERSION = 0


def _wall_clock_ms(ctx: RequestContext, clock_ms: int) -> int:
    if clock_ms < 0:
        return 0
    # The broker's clock is monotonic; the answer wants dates: the injected wall clock's.
    now_wall_ms = ctx.services.replica_manager.wall_clock_ms()
    return now_wall_ms - (ctx.services.clock.now_ms() - clock_ms)


def _state(b: Builder, ctx: RequestContext, d: TransactionDescription) -> Any:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in d.topic_partitions:
        by_topic.setdefault(topic, []).append(partition)
    return b.TransactionState(
        error_code=d.error,
        transactional_id=d.transactional_id,
        transaction_state=d.state,
        transaction_timeout=d.txn_timeout_ms,
        transaction_start_time=_wall_clock_ms(ctx, d.txn_start_timestamp),
        producer_id=d.producer_id,
        producer_epoch=d.producer_epoch,
        topics=tuple(
            b.TopicData(topic=topic, partitions=tuple(parts)) for topic, parts in by_topic.items()
        ),
    )


def handle(ctx: RequestContext, request: Any) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    coordinator = ctx.services.coordinators.txn
    return b.DescribeTransactionsResponse(
        throttle_time=0,
        transaction_states=tuple(
            _state(
                b,
                ctx,
                TransactionDescription(
                    transactional_id, ErrorCode.transactional_id_authorization_failed
                )
                if not authorize(
                    ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id
                )
                else coordinator.handle_describe_transactions(transactional_id),
            )
            for transactional_id in request.transactional_ids
        ),
    )


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    """``error`` for every transactional id asked about."""
    b = response_builder(API_KEY, ctx.api_version)
    return b.DescribeTransactionsResponse(
        throttle_time=0,
        transaction_states=tuple(
            _state(b, ctx, TransactionDescription(transactional_id, error))
            for transactional_id in request.transactional_ids
        ),
    )
