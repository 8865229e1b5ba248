"""Fetch (key 1): read records; wait in the Fetch purgatory for min_bytes or max_wait.

Consumers read below the high watermark; followers (replica id >= 0) read up to the
log end, and their fetch position tells the leader how far they have replicated. A
read_committed consumer (isolation level 1) reads below the last stable offset and gets
the aborted transactions that overlap what it reads (producer id, first offset), so it
can drop their records; every partition answer carries the LSO.

Incremental fetch sessions (KIP-227) are Kafka's, kept by the broker's ``FetchManager``
(``broker/replica/fetch_session.py``, which has the rules). A sessionless request — session id
0 and epoch -1, as every v4-v6 request and every client that does not use sessions —
takes the path it always took: every partition it names, answered, session id 0. Epoch
0 opens a session over the partitions named (the answer's session id; 0 if the cache
has no room); a later epoch is incremental: the fetch reads every partition of the
session (a parked one watches them all and counts ``min_bytes`` over them all) and
answers only those with records or a high watermark, LSO, log start offset or error
that changed since last sent. Session errors (FETCH_SESSION_ID_NOT_FOUND,
INVALID_FETCH_SESSION_EPOCH, FETCH_SESSION_TOPIC_ID_ERROR) answer no partitions.
A consumer with a ``consumer_byte_rate`` quota fetches at most what the quota allows over
its windows, as Kafka; its bytes and throttling are ``broker/quota/quota_managers.py``'s.

With an authorizer: a follower's fetch needs CLUSTER_ACTION on the cluster (else every
partition is TOPIC_AUTHORIZATION_FAILED); a consumer's partitions of topics it may not
READ are answered TOPIC_AUTHORIZATION_FAILED and not read.

v18 (KIP-1166) adds the high watermark a follower knows; only Kafka's KRaft leader
reads it (``KafkaRaftClient``: a fetch from a replica behind the leader's high watermark
is answered at once), a broker's ``ReplicaManager`` does not, so v18 is v17 here.

Differences from Kafka: those of ``broker/replica/fetch_session.py`` (one cache, not 8 shards;
an LSO change alone also includes a partition). The aborted transactions listed are
exactly those overlapping the returned batches (Kafka bounds the range by its offset
index, so it may list a few more). Rack-aware preferred read replicas are not chosen.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from broker.handlers.base import TopicPartitionPairs
from broker.handlers.topic_names import topic_id as request_topic_id
from broker.handlers.topic_names import topic_name
from broker.replica.delayed_fetch import FetchParams, FetchPartitionStatus, FetchResults
from broker.replica.fetch_metadata import FINAL_EPOCH, INVALID_SESSION_ID
from broker.replica.fetch_session import FetchContext
from broker.security.authorizer.authorization import (
    AclOperation,
    ResourceType,
    authorize_cluster,
    filter_by_authorized,
)
from broker.server.context import RequestContext
from protocol.builders import response_builder

API_KEY = 1
MIN_VERSION = 4
MAX_VERSION = 18

_NO_UUID = uuid.UUID(int=0)


def handle(ctx: RequestContext, request: Any) -> Any:
    replica_state = getattr(request, "replica_state", None)
    replica_id = (
        int(replica_state.replica_id)
        if replica_state is not None
        else int(getattr(request, "replica_id", -1))
    )
    max_bytes = int(getattr(request, "max_bytes", 0x7FFFFFFF))
    quotas = ctx.services.quota_managers
    if replica_id < 0 and quotas is not None and quotas.fetch.quotas_enabled:
        # Kafka's KafkaApis: a consumer fetches at most what its quota allows in the
        # quota's windows (getMaxValueInQuotaWindow).
        max_bytes = min(max_bytes, quotas.max_fetch_bytes(ctx))
    params = FetchParams(
        replica_id=replica_id,
        max_wait_ms=int(request.max_wait.total_seconds() * 1000),
        min_bytes=min(int(request.min_bytes), max_bytes),
        max_bytes=max_bytes,
        isolation_level=int(getattr(request, "isolation_level", 0)),
    )
    if (
        ctx.services.security.authorizer is not None
        and params.is_from_follower
        and not authorize_cluster(ctx, AclOperation.CLUSTER_ACTION)
    ):
        return error_response(ctx, request, ErrorCode.topic_authorization_failed)
    # Fetch sessions (KIP-227) exist from v7; v4-v6 requests are sessionless (0, -1).
    session_id = int(getattr(request, "session_id", INVALID_SESSION_ID))
    session_epoch = int(getattr(request, "session_epoch", FINAL_EPOCH))
    if session_id != INVALID_SESSION_ID or session_epoch != FINAL_EPOCH:
        return _handle_in_session(ctx, request, params, session_id, session_epoch)
    cluster = ctx.services.metadata
    statuses: list[FetchPartitionStatus] = []
    # Rarely needed, so made only when needed: a parked fetch holds what it answers with.
    unknown: list[_Unknown] | None = None
    topic_ids: dict[str, uuid.UUID] | None = None
    for topic in request.topics:
        name: str | None = getattr(topic, "topic", None)
        topic_id: uuid.UUID | None = getattr(topic, "topic_id", None)
        if name is None:
            # v13+ names topics by id; an unknown id, or the zero id (which kio reads as
            # None), is UNKNOWN_TOPIC_ID, as Kafka answers.
            info = cluster.topic_by_id(topic_id) if topic_id not in (None, _NO_UUID) else None
            if info is None:
                if unknown is None:
                    unknown = []
                for p in topic.partitions:
                    unknown.append(
                        (None, topic_id or _NO_UUID, int(p.partition), ErrorCode.unknown_topic_id)
                    )
                continue
            name = info.name
        if topic_id is not None and topic_id != _NO_UUID:
            if topic_ids is None:
                topic_ids = {}
            topic_ids[name] = topic_id
        for p in topic.partitions:
            statuses.append(
                FetchPartitionStatus(
                    tp=(name, int(p.partition)),
                    fetch_offset=int(p.fetch_offset),
                    partition_max_bytes=int(p.partition_max_bytes),
                    current_leader_epoch=int(getattr(p, "current_leader_epoch", -1)),
                    log_start_offset=int(getattr(p, "log_start_offset", -1)),
                )
            )

    if ctx.services.security.authorizer is not None and not params.is_from_follower:
        statuses, unknown = _without_denied(ctx, statuses, unknown)
    answer = _FetchAnswer(ctx, unknown, topic_ids)
    ctx.services.replica_manager.fetch_messages(params, statuses, answer, ctx)
    if answer.answered:
        return answer.response
    future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    answer.future = future
    return future


def _handle_in_session(
    ctx: RequestContext, request: Any, params: FetchParams, session_id: int, session_epoch: int
) -> Any:
    """A fetch that opens, uses or closes a session: its ``FetchContext`` says what to
    read (every partition of the session, for an incremental fetch) and what to answer."""
    context = ctx.services.fetch_manager.new_context(
        ctx.api_version, session_id, session_epoch, params.is_from_follower, request
    )
    if context.error is not ErrorCode.none:
        return _session_error(ctx, context.error, INVALID_SESSION_ID)
    statuses, unknown = context.statuses, context.unknown
    if ctx.services.security.authorizer is not None and not params.is_from_follower:
        statuses, unknown = _without_denied(ctx, statuses, unknown)
    answer = _FetchAnswer(ctx, unknown, context.topic_ids, context)
    ctx.services.replica_manager.fetch_messages(params, statuses, answer, ctx)
    if answer.answered:
        return answer.response
    future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    answer.future = future
    return future


def _without_denied(
    ctx: RequestContext, statuses: list[FetchPartitionStatus], unknown: list[_Unknown] | None
) -> tuple[list[FetchPartitionStatus], list[_Unknown] | None]:
    """The partitions of topics the consumer may not READ leave the fetch and are
    answered TOPIC_AUTHORIZATION_FAILED (``KafkaApis.handleFetchRequest``)."""
    names = {status.tp[0] for status in statuses}
    denied = names - filter_by_authorized(ctx, AclOperation.READ, ResourceType.TOPIC, names)
    if not denied:
        return statuses, unknown
    refused: list[_Unknown] = list(unknown or ())
    for status in statuses:
        if status.tp[0] in denied:
            refused.append((status.tp[0], None, status.tp[1], ErrorCode.topic_authorization_failed))
    return [status for status in statuses if status.tp[0] not in denied], refused


def _session_error(ctx: RequestContext, error: ErrorCode, session_id: int) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    return b.FetchResponse(
        throttle_time=0,
        error_code=error,
        session_id=session_id,
        responses=(),
        node_endpoints=(),
    )


_Unknown = tuple[str | None, uuid.UUID | None, int, ErrorCode]


class _FetchAnswer:
    """The ``respond`` a fetch gives the replica manager: builds the response from the
    results. Answered at once (inside ``fetch_messages``), the response is kept for the
    handler to return, and no future is made; parked, it completes the future the
    handler returned. One small object per parked fetch, where a closure would be a
    function and a cell per name it captures."""

    __slots__ = ("answered", "context", "ctx", "future", "response", "topic_ids", "unknown")

    def __init__(
        self,
        ctx: RequestContext,
        unknown: list[_Unknown] | None,
        topic_ids: dict[str, uuid.UUID] | None,
        context: FetchContext | None = None,
    ) -> None:
        self.ctx = ctx
        self.unknown = unknown
        self.topic_ids = topic_ids
        self.context = context  # a fetch session's (KIP-227); None when sessionless
        self.future: asyncio.Future[Any] | None = None
        self.response: Any = None
        self.answered = False

    def __call__(self, results: FetchResults) -> None:
        if self.answered:
            return
        self.answered = True
        response = _response(self.ctx, results, self.unknown, self.topic_ids, self.context)
        future = self.future
        if future is None:
            self.response = response
        elif not future.done():  # the connection may have gone: then it was cancelled
            future.set_result(response)


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    """``error`` for every partition of the request; the top-level error stays NONE."""
    b = response_builder(API_KEY, ctx.api_version)
    return b.FetchResponse(
        throttle_time=0,
        error_code=ErrorCode.none,
        session_id=0,
        responses=tuple(
            b.FetchableTopicResponse(
                topic=topic_name(ctx, topic) or "",
                topic_id=request_topic_id(topic),
                partitions=tuple(
                    b.PartitionData(
                        partition_index=int(p.partition),
                        error_code=error,
                        high_watermark=-1,
                        last_stable_offset=-1,
                        log_start_offset=-1,
                        aborted_transactions=None,
                        preferred_read_replica=-1,
                        records=None,
                    )
                    for p in topic.partitions
                ),
            )
            for topic in request.topics
        ),
        node_endpoints=(),
    )


def topic_partitions(ctx: RequestContext, request: Any) -> TopicPartitionPairs:
    pairs: TopicPartitionPairs = []
    for topic in request.topics:
        name = topic_name(ctx, topic)
        pairs.extend((name, int(p.partition)) for p in topic.partitions)
    return pairs


def _response(
    ctx: RequestContext,
    results: FetchResults,
    unknown: list[_Unknown] | None,
    topic_ids: dict[str, uuid.UUID] | None,
    context: FetchContext | None = None,
) -> Any:
    session_id = INVALID_SESSION_ID
    if context is not None:
        # A session's answer: an incremental one keeps only the partitions that changed.
        error, session_id, results = context.update_and_generate_response_data(results)
        if error is not ErrorCode.none:
            return _session_error(ctx, error, session_id)
    b = response_builder(API_KEY, ctx.api_version)
    cluster = ctx.services.metadata
    by_topic: dict[str, list[Any]] = {}
    for status, result in results:
        aborted = result.aborted_transactions
        by_topic.setdefault(status.tp[0], []).append(
            b.PartitionData(
                partition_index=status.tp[1],
                error_code=result.error,
                high_watermark=result.high_watermark,
                last_stable_offset=result.last_stable_offset,
                log_start_offset=result.log_start_offset,
                aborted_transactions=None
                if aborted is None
                else tuple(
                    b.AbortedTransaction(producer_id=t.producer_id, first_offset=t.first_offset)
                    for t in aborted
                ),
                preferred_read_replica=-1,
                records=result.records,
            )
        )
    responses = []
    for name, partitions in by_topic.items():
        topic_id = topic_ids.get(name) if topic_ids is not None else None
        if topic_id is None:
            info = cluster.topics.get(name)
            topic_id = info.topic_id if info is not None else _NO_UUID
        responses.append(
            b.FetchableTopicResponse(topic=name, topic_id=topic_id, partitions=tuple(partitions))
        )
    for refused_name, topic_id, partition, error in unknown or ():
        if topic_id is None and refused_name is not None:
            known = cluster.topics.get(refused_name)
            topic_id = known.topic_id if known is not None else _NO_UUID
        responses.append(
            b.FetchableTopicResponse(
                topic=refused_name or "",
                topic_id=topic_id,
                partitions=(
                    b.PartitionData(
                        partition_index=partition,
                        error_code=error,
                        high_watermark=-1,
                        last_stable_offset=-1,
                        log_start_offset=-1,
                        aborted_transactions=None,
                        preferred_read_replica=-1,
                        records=b"",
                    ),
                ),
            )
        )
    return b.FetchResponse(
        throttle_time=0,
        error_code=ErrorCode.none,
        session_id=session_id,
        responses=tuple(responses),
        node_endpoints=(),
    )
