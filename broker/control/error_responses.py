"""An API's answer carrying one error code, built from the request without handling it.

Fault injection answers a request with an error *instead of* running its handler, so
a failed produce appends nothing and a failed commit stores nothing. Each builder here
writes the newest shape of the response once and lets ``response_builder`` fit it to
the version asked (fields a version lacks are dropped).

The error goes where the API carries it: per partition for Produce, Fetch,
ListOffsets and OffsetCommit, per topic for Metadata, per coordinator key for
FindCoordinator v4+, at the top level (and per partition) for OffsetFetch, and at the
top level for the group APIs. Every partition of a failed request gets the error: the
handler is not run for any of them, so none has a real answer to give.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from protocol.builders import Builder, response_builder

if TYPE_CHECKING:
    from broker.context import RequestContext

__all__ = [
    "ERROR_RESPONSE_API_KEYS",
    "TOPIC_API_KEYS",
    "build_error_response",
    "request_topic_partitions",
]

_NO_UUID = uuid.UUID(int=0)

ErrorBuilder = Callable[["RequestContext", Builder, Any, ErrorCode], Any]


def _topic_name(ctx: RequestContext, topic: Any) -> str | None:
    """The topic's name whether the request names it or gives only its id (newer
    versions of Produce, Fetch, OffsetCommit, OffsetFetch)."""
    name = getattr(topic, "name", None) or getattr(topic, "topic", None)
    if name:
        return str(name)
    topic_id = getattr(topic, "topic_id", None)
    if topic_id is not None and topic_id != _NO_UUID:
        info = ctx.services.metadata.topic_by_id(topic_id)
        if info is not None:
            return info.name
    return None


def _topic_id(topic: Any) -> uuid.UUID:
    topic_id = getattr(topic, "topic_id", None)
    return topic_id if isinstance(topic_id, uuid.UUID) else _NO_UUID


def _message(error: ErrorCode) -> str:
    return f"injected fault: {error.name.upper()}"


# -- per-API builders ---------------------------------------------------------------------


def _produce(ctx: RequestContext, b: Builder, request: Any, error: ErrorCode) -> Any:
    if int(request.acks) == 0:
        # Kafka's answer to a failed acks=0 produce: no response, close the connection.
        ctx.close_connection("injected fault on a produce with acks=0")
    return b.ProduceResponse(
        responses=tuple(
            b.TopicProduceResponse(
                name=_topic_name(ctx, topic) or "",
                topic_id=_topic_id(topic),
                partition_responses=tuple(
                    b.PartitionProduceResponse(
                        index=int(data.index),
                        error_code=error,
                        base_offset=-1,
                        log_append_time=None,
                        log_start_offset=-1,
                        record_errors=(),
                        error_message=_message(error),
                    )
                    for data in topic.partition_data
                ),
            )
            for topic in request.topic_data
        ),
        throttle_time=0,
    )


def _fetch(ctx: RequestContext, b: Builder, request: Any, error: ErrorCode) -> Any:
    return b.FetchResponse(
        throttle_time=0,
        error_code=ErrorCode.none,
        session_id=0,
        responses=tuple(
            b.FetchableTopicResponse(
                topic=_topic_name(ctx, topic) or "",
                topic_id=_topic_id(topic),
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


def _list_offsets(ctx: RequestContext, b: Builder, request: Any, error: ErrorCode) -> Any:
    return b.ListOffsetsResponse(
        throttle_time=0,
        topics=tuple(
            b.ListOffsetsTopicResponse(
                name=topic.name,
                partitions=tuple(
                    b.ListOffsetsPartitionResponse(
                        partition_index=int(p.partition_index),
                        error_code=error,
                        timestamp=-1,
                        offset=-1,
                        leader_epoch=-1,
                        old_style_offsets=(),
                    )
                    for p in topic.partitions
                ),
            )
            for topic in request.topics
        ),
    )


def _metadata(ctx: RequestContext, b: Builder, request: Any, error: ErrorCode) -> Any:
    cluster = ctx.services.metadata
    requested = request.topics
    if requested is None or (ctx.api_version == 0 and not requested):
        names = sorted(cluster.topics)  # "all topics": each one carries the error
    else:
        names = [_topic_name(ctx, topic) or "" for topic in requested]
    return b.MetadataResponse(
        throttle_time=0,
        brokers=tuple(
            b.MetadataResponseBroker(node_id=e.broker_id, host=e.host, port=e.port, rack=None)
            for e in cluster.alive_brokers()
        ),
        cluster_id=cluster.cluster_id,
        controller_id=cluster.controller_id,
        topics=tuple(
            b.MetadataResponseTopic(
                error_code=error,
                name=name,
                topic_id=_NO_UUID,
                is_internal=False,
                partitions=(),
                topic_authorized_operations=-2147483648,
            )
            for name in names
        ),
        cluster_authorized_operations=-2147483648,
        error_code=ErrorCode.none,
    )


def _offset_commit(ctx: RequestContext, b: Builder, request: Any, error: ErrorCode) -> Any:
    return b.OffsetCommitResponse(
        throttle_time=0,
        topics=tuple(
            b.OffsetCommitResponseTopic(
                name=_topic_name(ctx, topic) or "",
                topic_id=_topic_id(topic),
                partitions=tuple(
                    b.OffsetCommitResponsePartition(
                        partition_index=int(p.partition_index), error_code=error
                    )
                    for p in topic.partitions
                ),
            )
            for topic in request.topics
        ),
    )


def _offset_fetch_topics(
    ctx: RequestContext, b: Builder, topics: Any, error: ErrorCode, topic_class: str
) -> tuple[Any, ...]:
    partition_class = "OffsetFetchResponsePartition" + ("s" if topic_class.endswith("s") else "")
    make_topic = getattr(b, topic_class)
    make_partition = getattr(b, partition_class)
    return tuple(
        make_topic(
            name=_topic_name(ctx, topic) or "",
            topic_id=_topic_id(topic),
            partitions=tuple(
                make_partition(
                    partition_index=int(index),
                    committed_offset=-1,
                    committed_leader_epoch=-1,
                    metadata="",
                    error_code=error,
                )
                for index in topic.partition_indexes
            ),
        )
        for topic in topics or ()
    )


def _offset_fetch(ctx: RequestContext, b: Builder, request: Any, error: ErrorCode) -> Any:
    groups = getattr(request, "groups", None)
    if groups is None:  # v0..v7: one group, topics at the top level
        return b.OffsetFetchResponse(
            throttle_time=0,
            topics=_offset_fetch_topics(ctx, b, request.topics, error, "OffsetFetchResponseTopic"),
            error_code=error,
        )
    return b.OffsetFetchResponse(
        throttle_time=0,
        groups=tuple(
            b.OffsetFetchResponseGroup(
                group_id=group.group_id,
                topics=_offset_fetch_topics(
                    ctx, b, group.topics, error, "OffsetFetchResponseTopics"
                ),
                error_code=error,
            )
            for group in groups
        ),
    )


def _find_coordinator(ctx: RequestContext, b: Builder, request: Any, error: ErrorCode) -> Any:
    keys = getattr(request, "coordinator_keys", None)
    if keys is None:  # v0..v3: one key, answered at the top level
        return b.FindCoordinatorResponse(
            throttle_time=0,
            error_code=error,
            error_message=_message(error),
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
                error_message=_message(error),
            )
            for key in keys
        ),
    )


def _join_group(ctx: RequestContext, b: Builder, request: Any, error: ErrorCode) -> Any:
    return b.JoinGroupResponse(
        throttle_time=0,
        error_code=error,
        generation_id=-1,
        protocol_type=None,
        protocol_name="",
        leader="",
        skip_assignment=False,
        member_id=str(request.member_id or ""),
        members=(),
    )


def _sync_group(ctx: RequestContext, b: Builder, request: Any, error: ErrorCode) -> Any:
    return b.SyncGroupResponse(
        throttle_time=0, error_code=error, protocol_type=None, protocol_name=None, assignment=b""
    )


def _heartbeat(ctx: RequestContext, b: Builder, request: Any, error: ErrorCode) -> Any:
    return b.HeartbeatResponse(throttle_time=0, error_code=error)


def _leave_group(ctx: RequestContext, b: Builder, request: Any, error: ErrorCode) -> Any:
    return b.LeaveGroupResponse(throttle_time=0, error_code=error, members=())


_BUILDERS: dict[int, ErrorBuilder] = {
    0: _produce,
    1: _fetch,
    2: _list_offsets,
    3: _metadata,
    8: _offset_commit,
    9: _offset_fetch,
    10: _find_coordinator,
    11: _join_group,
    12: _heartbeat,
    13: _leave_group,
    14: _sync_group,
}

ERROR_RESPONSE_API_KEYS: frozenset[int] = frozenset(_BUILDERS)
"""APIs whose requests can be failed by fault injection."""

TOPIC_API_KEYS: frozenset[int] = frozenset({0, 1, 2, 3, 8, 9})
"""APIs whose requests name topics, so a fault can be limited to one topic(-partition)."""


def build_error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    """The response to ``request`` (of ``ctx``'s API and version) that reports ``error``."""
    api_key = ctx.header.api_key
    builder = _BUILDERS.get(api_key)
    if builder is None:
        raise ValueError(f"no error response for API key {api_key}")
    return builder(ctx, response_builder(api_key, ctx.api_version), request, error)


def request_topic_partitions(
    ctx: RequestContext, request: Any
) -> list[tuple[str | None, int | None]]:
    """The (topic, partition) pairs a request names; partition None for Metadata, and
    topic None for an id this broker does not know. Empty for APIs without topics."""
    api_key = ctx.header.api_key
    pairs: list[tuple[str | None, int | None]] = []
    if api_key == 0:
        for topic in request.topic_data:
            name = _topic_name(ctx, topic)
            pairs.extend((name, int(p.index)) for p in topic.partition_data)
    elif api_key == 1:
        for topic in request.topics:
            name = _topic_name(ctx, topic)
            pairs.extend((name, int(p.partition)) for p in topic.partitions)
    elif api_key in (2, 8):
        for topic in request.topics:
            name = _topic_name(ctx, topic)
            pairs.extend((name, int(p.partition_index)) for p in topic.partitions)
    elif api_key == 3:
        if request.topics is None or (ctx.api_version == 0 and not request.topics):
            pairs.extend((name, None) for name in ctx.services.metadata.topics)
        else:
            pairs.extend((_topic_name(ctx, topic), None) for topic in request.topics)
    elif api_key == 9:
        groups = getattr(request, "groups", None)
        topic_lists = [request.topics] if groups is None else [g.topics for g in groups]
        for topics in topic_lists:
            for topic in topics or ():
                name = _topic_name(ctx, topic)
                pairs.extend((name, int(i)) for i in topic.partition_indexes)
    return pairs
