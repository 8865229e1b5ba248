"""ShareFetch (key 78): acquire records for a share group member, with acknowledgements.

The request's session epoch goes through the ``SharePartitionManager``'s share session
(0 opens one over the partitions named, -1 closes it, any other must be the session's
next: SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH and
SHARE_SESSION_LIMIT_REACHED answer at the top level and change nothing). The
acknowledgements piggy-backed on the request are applied first, each partition's all
or nothing (its ``acknowledge_error_code``); then the fetch acquires records on every
partition of the session — the batches holding them, and their AcquiredRecords (first,
last offset, delivery count). When nothing can be acquired it waits in the ShareFetch
purgatory (``DelayedShareFetch``) up to ``max_wait_ms``. A final fetch (-1) only
acknowledges, closes the session and releases what the member still holds; a v2
renew-only fetch (``is_renew_ack``) only acknowledges.

The response (v1+) carries ``acquisition_lock_timeout``: the lock duration the records
were acquired under (the group's ``share.record.lock.duration.ms``).

Version notes: v2 (KIP-1206, KIP-1222) adds ``ShareAcquireMode`` — 0 batch_optimized
(the default, and v1's behaviour: the batch that reaches MaxRecords is acquired whole),
1 record_limit (exactly MaxRecords) — and the RENEW acknowledge type, which the group
must enable (``share.renew.acknowledge.enable``; INVALID_RECORD_STATE otherwise).

The answer waits until the share state the acknowledgements changed is written to the
share coordinator (as Kafka's).

Differences from Kafka: those of ``SharePartitionManager``; every partition the request
names is answered, and of the session's other partitions those with records or an error
(Kafka leaves out unchanged ones the same way); NodeEndpoints are not filled in.

With an authorizer, READ on the group (else GROUP_AUTHORIZATION_FAILED at the top); the
topics' READ is not checked (Kafka's is).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from broker.handlers.base import AUTHORIZATION_MESSAGES
from broker.handlers.feature_gates import share_groups_enabled
from broker.handlers.group_common import group_denied
from broker.handlers.share_common import (
    Acknowledgements,
    AckResult,
    RequestedPartitions,
    acknowledge_all,
    check_ids,
    current_leader,
    lock_timeout_ms,
    read_partitions,
)
from broker.server.context import RequestContext
from broker.share.delayed_share_fetch import ShareFetchParams, ShareFetchPartition
from broker.share.share_partition_manager import ShareFetchResults, SharePartitionResult
from broker.share.share_session import FINAL_EPOCH
from protocol.builders import response_builder

API_KEY = 78
MIN_VERSION = 1
MAX_VERSION = 2

_MAX_RECORDS = 2**31 - 1
_RECORD_LIMIT = 1  # ShareAcquireMode: 0 batch_optimized, 1 record_limit


def handle(ctx: RequestContext, request: Any) -> Any:
    services = ctx.services
    if not share_groups_enabled(ctx):
        return error_response(ctx, request, ErrorCode.unsupported_version)
    if group_denied(ctx, str(request.group_id)):
        denied = ErrorCode.group_authorization_failed
        return _top_level(ctx, denied, AUTHORIZATION_MESSAGES[denied])
    bad = check_ids(request)
    if bad is not None:
        return _top_level(ctx, ErrorCode.invalid_request, bad)
    manager = services.share_partition_manager
    group_id, member_id = str(request.group_id), str(request.member_id)
    epoch = int(request.share_session_epoch)
    requested = read_partitions(ctx, request)
    forgotten = [(t.topic_id, int(p)) for t in request.forgotten_topics_data for p in t.partitions]
    error, to_fetch = manager.new_context(
        (group_id, member_id),
        epoch,
        requested.partitions,
        forgotten,
        has_acknowledgements=bool(requested.acks),
        connection_id=ctx.connection_id,
    )
    if error is not ErrorCode.none:
        return _top_level(ctx, error, None)
    acks = acknowledge_all(ctx, group_id, member_id, requested)
    if epoch == FINAL_EPOCH:
        manager.close_session((group_id, member_id))
        to_fetch = []
    if getattr(request, "is_renew_ack", False):
        to_fetch = []
    max_records = int(request.max_records)
    params = ShareFetchParams(
        group_id=group_id,
        member_id=member_id,
        max_wait_ms=int(request.max_wait.total_seconds() * 1000) if to_fetch else 0,
        min_bytes=int(request.min_bytes),
        max_bytes=int(request.max_bytes),
        max_records=max_records if max_records > 0 else _MAX_RECORDS,
        partitions=to_fetch,
        record_limit=int(getattr(request, "share_acquire_mode", 0)) == _RECORD_LIMIT,
    )
    answer = _ShareFetchAnswer(ctx, group_id, requested, acks)
    manager.fetch_messages(params, answer, ctx)
    if answer.answered:
        return answer.response
    future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    answer.future = future
    return future


class _ShareFetchAnswer:
    """The ``respond`` the manager calls once: builds the response; completes the
    handler's future when the fetch was parked."""

    __slots__ = (
        "acks",
        "answered",
        "ctx",
        "future",
        "group_id",
        "requested",
        "response",
        "results",
    )

    def __init__(
        self,
        ctx: RequestContext,
        group_id: str,
        requested: RequestedPartitions,
        acks: Acknowledgements,
    ) -> None:
        self.ctx = ctx
        self.group_id = group_id
        self.requested = requested
        self.acks = acks
        self.future: asyncio.Future[Any] | None = None
        self.response: Any = None
        self.results: ShareFetchResults | None = None
        self.answered = False

    def __call__(self, results: ShareFetchResults) -> None:
        if self.answered or self.results is not None:
            return
        self.results = results
        self.acks.when_durable(self._answer)

    def _answer(self) -> None:
        """Once the fetch has its records and the acknowledgements are written."""
        assert self.results is not None
        self.answered = True
        response = _response(
            self.ctx, self.group_id, self.requested, self.acks.results, self.results
        )
        if self.future is None:
            self.response = response
        elif not self.future.done():
            self.future.set_result(response)


def _response(
    ctx: RequestContext,
    group_id: str,
    requested: RequestedPartitions,
    acks: dict[ShareFetchPartition, AckResult],
    results: ShareFetchResults,
) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    answered: dict[ShareFetchPartition, SharePartitionResult] = {}
    named = _named(requested)
    for fp, result in results.items():
        if result.acquired or result.error is not ErrorCode.none or fp.tp in named:
            answered[fp] = result
    for fp in acks:
        answered.setdefault(fp, SharePartitionResult())
    by_topic: dict[uuid.UUID, list[Any]] = {}
    for fp, result in answered.items():
        ack_error, ack_message = acks.get(fp, (ErrorCode.none, None))
        by_topic.setdefault(fp.topic_id, []).append(
            b.PartitionData(
                partition_index=fp.partition,
                error_code=result.error,
                error_message=result.error_message,
                acknowledge_error_code=ack_error,
                acknowledge_error_message=ack_message,
                current_leader=current_leader(ctx, b, fp.topic, fp.partition),
                records=result.records,
                acquired_records=tuple(
                    b.AcquiredRecords(
                        first_offset=a.first_offset,
                        last_offset=a.last_offset,
                        delivery_count=a.delivery_count,
                    )
                    for a in result.acquired
                ),
            )
        )
    for topic_id, partition in requested.unknown:
        by_topic.setdefault(topic_id, []).append(
            _partition_error(ctx, b, None, partition, ErrorCode.unknown_topic_id)
        )
    return b.ShareFetchResponse(
        throttle_time=0,
        error_code=ErrorCode.none,
        error_message=None,
        acquisition_lock_timeout=lock_timeout_ms(ctx, group_id),
        responses=tuple(
            b.ShareFetchableTopicResponse(topic_id=topic_id, partitions=tuple(parts))
            for topic_id, parts in by_topic.items()
        ),
        node_endpoints=(),
    )


def _named(requested: RequestedPartitions) -> set[tuple[str, int]]:
    return {(topic, partition) for (_id, partition), topic in requested.partitions.items()}


def _partition_error(
    ctx: RequestContext, b: Any, topic: str | None, partition: int, error: ErrorCode
) -> Any:
    return b.PartitionData(
        partition_index=partition,
        error_code=error,
        error_message=None,
        acknowledge_error_code=ErrorCode.none,
        acknowledge_error_message=None,
        current_leader=current_leader(ctx, b, topic, partition),
        records=b"",
        acquired_records=(),
    )


def _top_level(ctx: RequestContext, error: ErrorCode, message: str | None) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    return b.ShareFetchResponse(
        throttle_time=0,
        error_code=error,
        error_message=message,
        acquisition_lock_timeout=lock_timeout_ms(ctx),
        responses=(),
        node_endpoints=(),
    )


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    """``error`` for every partition the request names; the top level stays NONE."""
    b = response_builder(API_KEY, ctx.api_version)
    return b.ShareFetchResponse(
        throttle_time=0,
        error_code=ErrorCode.none,
        error_message=None,
        acquisition_lock_timeout=0,
        responses=tuple(
            b.ShareFetchableTopicResponse(
                topic_id=topic.topic_id,
                partitions=tuple(
                    _partition_error(ctx, b, None, int(p.partition_index), error)
                    for p in topic.partitions
                ),
            )
            for topic in request.topics
        ),
        node_endpoints=(),
    )
