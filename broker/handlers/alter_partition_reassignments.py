"""AlterPartitionReassignments (key 45): move partitions to other replicas, or cancel.

Per partition, as KRaft's ReplicationControlManager answers: an unknown topic or
partition is UNKNOWN_TOPIC_OR_PARTITION; an empty replica list, a broker that is not
registered or a broker named twice is INVALID_REPLICA_ASSIGNMENT; a reassignment to the
current replicas changes nothing and answers NONE; null replicas cancel the ongoing
reassignment (NO_REASSIGNMENT_IN_PROGRESS when there is none; INVALID_REPLICA_ASSIGNMENT
when reverting would need an unclean election the topic does not allow). v1's
``allow_replication_factor_change=false`` refuses a target of another size with
INVALID_REPLICATION_FACTOR. The reassignment itself runs in the controller's model
(``broker/cluster/replication_control.py``): new replicas catch up as followers and the
reassignment completes, moving the ISR and leadership, when all target replicas are in
the ISR -- which the response does not wait for, as in Kafka.

Differences from Kafka: any broker answers (KRaft brokers forward to the controller);
no replication throttles; ``timeout`` is not waited on; throttle time 0.

With an authorizer, ALTER on the cluster (else CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import MetadataError
from broker.cluster.replication_control import alter_partition_reassignment
from broker.handlers.base import error_message
from broker.handlers.broker_configs import layers_for
from broker.security.authorizer.authorization import AclOperation, cluster_denied
from broker.server.context import RequestContext
from protocol.builders import Builder, response_builder

API_KEY = 45
MIN_VERSION = 0
MAX_VERSION = 1


def handle(ctx: RequestContext, request: Any) -> Any:
    if cluster_denied(ctx, AclOperation.ALTER):
        return error_response(ctx, request, ErrorCode.cluster_authorization_failed)
    b = response_builder(API_KEY, ctx.api_version)
    allow_rf_change = bool(getattr(request, "allow_replication_factor_change", True))
    responses = []
    for topic in request.topics:
        partitions = []
        for partition in topic.partitions:
            error, message = ErrorCode.none, None
            target = None if partition.replicas is None else [int(r) for r in partition.replicas]
            try:
                alter_partition_reassignment(
                    ctx.services.metadata,
                    topic.name,
                    int(partition.partition_index),
                    target,
                    allow_replication_factor_change=allow_rf_change,
                    unclean_allowed=_unclean_allowed(ctx, topic.name),
                )
            except MetadataError as exc:
                error, message = exc.error, exc.message
            partitions.append(_partition(b, int(partition.partition_index), error, message))
        responses.append(b.ReassignableTopicResponse(name=topic.name, partitions=tuple(partitions)))
    return _response(b, allow_rf_change, ErrorCode.none, None, tuple(responses))


def _unclean_allowed(ctx: RequestContext, topic: str) -> bool:
    info = ctx.services.metadata.topics.get(topic)
    value = info.configs.get("unclean.leader.election.enable") if info is not None else None
    if value is None:
        value = layers_for(ctx.services).topic_default("unclean.leader.election.enable")
    return (value or "false").strip().lower() == "true"


def _partition(b: Builder, index: int, error: ErrorCode, message: str | None) -> Any:
    return b.ReassignablePartitionResponse(
        partition_index=index, error_code=error, error_message=message
    )


def _response(
    b: Builder, allow_rf_change: bool, error: ErrorCode, message: str | None, topics: Any
) -> Any:
    return b.AlterPartitionReassignmentsResponse(
        throttle_time=0,
        allow_replication_factor_change=allow_rf_change,
        error_code=error,
        error_message=message,
        responses=topics,
    )


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    """``error`` at the top and for every partition named; nothing is reassigned."""
    b = response_builder(API_KEY, ctx.api_version)
    message = error_message(error)
    topics = tuple(
        b.ReassignableTopicResponse(
            name=topic.name,
            partitions=tuple(
                _partition(b, int(p.partition_index), error, message) for p in topic.partitions
            ),
        )
        for topic in request.topics
    )
    allow = bool(getattr(request, "allow_replication_factor_change", True))
    return _response(b, allow, error, message, topics)
