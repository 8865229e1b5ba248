"""Metadata (key 3): brokers, topics (with topic ids), partition leaders, replicas, ISR.

Differences from Kafka: a topic auto-created by this request is returned at once with
its leaders (Kafka answers LEADER_NOT_AVAILABLE until the controller has elected them;
here election is immediate). Authorized operations are never computed.

With an authorizer (``KafkaApis.handleTopicMetadataRequest``): an all-topics request lists
only the topics the principal may DESCRIBE; a topic named but not describable is
TOPIC_AUTHORIZATION_FAILED (asked by id: UNKNOWN_TOPIC_ID, which tells nothing); an
unknown topic is auto-created only with CREATE on the cluster or the topic, else
TOPIC_AUTHORIZATION_FAILED. Cached answers are then keyed also by the principal, its host
and the ACLs' version (a cached denial is not logged again).
The brokers are those of the listener the request came in on, as in Kafka.
"""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import BrokerEndpoint, MetadataError, TopicInfo
from broker.handlers.base import TopicPartitionPairs
from broker.handlers.topic_names import topic_name
from broker.security.authorizer.acl import CLUSTER_NAME
from broker.security.authorizer.authorization import AclOperation, ResourceType, authorize
from broker.server.context import RequestContext
from protocol.builders import Builder, response_builder
from protocol.codec import encode_response_body

API_KEY = 3
MIN_VERSION = 0
MAX_VERSION = 13

_NO_UUID = uuid.UUID(int=0)


def handle(ctx: RequestContext, request: Any) -> Any:
    """The answer from the broker's response cache when the same question was asked
    since the cluster last changed, else built, encoded and cached."""
    services = ctx.services
    key = _cache_key(ctx, request)
    if key is not None:
        cached = services.response_cache.get(key)
        if cached is not None:
            return cached
    version = services.metadata.version
    answer = _answer(ctx, request)
    if key is None:
        return answer
    encoded = encode_response_body(API_KEY, ctx.api_version, answer)
    services.response_cache.put(key, encoded, version)
    return encoded


def _cache_key(ctx: RequestContext, request: Any) -> tuple[object, ...] | None:
    """What the answer depends on besides the cluster: the version, the topics asked
    for by name (None: all) and whether unknown ones may be created. Requests naming
    topics by id are not cached (rare: only admin clients of Kafka 3.x+ do)."""
    requested = request.topics
    if requested is None:
        names: tuple[str, ...] | None = None
    else:
        names = tuple(topic.name for topic in requested)
        if None in names:
            return None
    return (
        API_KEY,
        ctx.api_version,
        names,
        bool(getattr(request, "allow_auto_topic_creation", True)),
        ctx.connection.listener_name,
        *_authorization_key(ctx),
    )


def _authorization_key(ctx: RequestContext) -> tuple[object, ...]:
    """With an authorizer the answer also depends on who asks, from where, and the ACLs
    (their version moves on every change)."""
    services = ctx.services
    if services.security.authorizer is None:
        return ()
    connection = ctx.connection
    return (str(connection.principal), connection.client_host, services.security.acls.version)


def _answer(ctx: RequestContext, request: Any) -> Any:
    services = ctx.services
    cluster = services.metadata
    b = response_builder(API_KEY, ctx.api_version)
    requested = request.topics
    if requested is None or (ctx.api_version == 0 and not requested):
        topics = [
            _topic(b, cluster_topic)
            for cluster_topic in cluster.topics.values()
            if services.security.authorizer is None or _may_describe(ctx, cluster_topic.name, False)
        ]
    else:
        auto_create = bool(getattr(request, "allow_auto_topic_creation", True))
        topics = []
        for wanted in requested:
            topics.append(_requested_topic(ctx, b, wanted, auto_create))
    brokers = tuple(_broker(b, e, ctx.connection.listener_name) for e in cluster.alive_brokers())
    return b.MetadataResponse(
        throttle_time=0,
        brokers=brokers,
        cluster_id=cluster.cluster_id,
        controller_id=cluster.controller_id,
        topics=tuple(topics),
        cluster_authorized_operations=-2147483648,
        error_code=ErrorCode.none,
    )


def _broker(b: Any, endpoint: BrokerEndpoint, listener_name: str) -> Any:
    """A broker as seen from the listener the client came in on (Kafka's rule)."""
    host, port = endpoint.address(listener_name)
    return b.MetadataResponseBroker(node_id=endpoint.broker_id, host=host, port=port, rack=None)


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    """The brokers, and ``error`` for every topic asked for — every topic of the cluster
    when the request asks for all (Kafka's error response lists no topic then)."""
    b = response_builder(API_KEY, ctx.api_version)
    cluster = ctx.services.metadata
    return b.MetadataResponse(
        throttle_time=0,
        brokers=tuple(_broker(b, e, ctx.connection.listener_name) for e in cluster.alive_brokers()),
        cluster_id=cluster.cluster_id,
        controller_id=cluster.controller_id,
        topics=tuple(
            _error_topic(b, name or "", None, error)
            for name, _partition in topic_partitions(ctx, request)
        ),
        cluster_authorized_operations=-2147483648,
        error_code=ErrorCode.none,
    )


def topic_partitions(ctx: RequestContext, request: Any) -> TopicPartitionPairs:
    """Whole topics (partition None): those named, or all of the cluster's."""
    requested = request.topics
    if requested is None or (ctx.api_version == 0 and not requested):
        return [(name, None) for name in sorted(ctx.services.metadata.topics)]
    return [(topic_name(ctx, topic), None) for topic in requested]


def _requested_topic(ctx: RequestContext, b: Builder, wanted: Any, auto_create: bool) -> Any:
    cluster = ctx.services.metadata
    topic_id = getattr(wanted, "topic_id", None)
    name = wanted.name
    # A topic asked for by id has no name to echo; the response's name is nullable only
    # from v12, so v10-v11 carry "" (as Kafka's error responses do).
    no_name = None if ctx.api_version >= 12 else ""
    if name is None and topic_id not in (None, _NO_UUID):
        info = cluster.topic_by_id(topic_id)
        if info is None or not _may_describe(ctx, info.name, True):
            return _error_topic(b, no_name, topic_id, ErrorCode.unknown_topic_id)
        return _topic(b, info)
    if name is None:
        return _error_topic(b, no_name, None, ErrorCode.invalid_request)
    if not _may_describe(ctx, name, True):
        return _error_topic(b, name, None, ErrorCode.topic_authorization_failed)
    info = cluster.topics.get(name)
    if info is None and auto_create and ctx.services.config.auto_create_topics_enable:
        if not _may_create(ctx, name):
            return _error_topic(b, name, None, ErrorCode.topic_authorization_failed)
        try:
            info = ctx.services.auto_create_topic(name)
        except MetadataError as exc:
            return _error_topic(b, name, None, exc.error)
    if info is None:
        return _error_topic(b, name, None, ErrorCode.unknown_topic_or_partition)
    return _topic(b, info)


def _may_describe(ctx: RequestContext, name: str, log_if_denied: bool) -> bool:
    """DESCRIBE on the topic; a denial is logged only for a topic asked for by name."""
    return authorize(
        ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name, log_if_denied=log_if_denied
    )


def _may_create(ctx: RequestContext, name: str) -> bool:
    """Auto-creation needs CREATE on the cluster or on the topic (``KafkaApis``)."""
    return authorize(
        ctx, AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME, log_if_denied=False
    ) or authorize(ctx, AclOperation.CREATE, ResourceType.TOPIC, name)


def _error_topic(b: Builder, name: str | None, topic_id: Any, error: ErrorCode) -> Any:
    return b.MetadataResponseTopic(
        error_code=error,
        name=name,
        topic_id=topic_id or _NO_UUID,
        is_internal=False,
        partitions=(),
        topic_authorized_operations=-2147483648,
    )


def _topic(b: Builder, info: TopicInfo) -> Any:
    partitions = []
    for p in info.partitions:
        leader_alive = p.leader >= 0
        partitions.append(
            b.MetadataResponsePartition(
                error_code=ErrorCode.none if leader_alive else ErrorCode.leader_not_available,
                partition_index=p.partition,
                leader_id=p.leader,
                leader_epoch=p.leader_epoch,
                replica_nodes=tuple(p.replicas),
                isr_nodes=tuple(p.isr),
                offline_replicas=(),
            )
        )
    return b.MetadataResponseTopic(
        error_code=ErrorCode.none,
        name=info.name,
        topic_id=info.topic_id,
        is_internal=info.is_internal,
        partitions=tuple(partitions),
        topic_authorized_operations=-2147483648,
    )
