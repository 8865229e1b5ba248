"""ListPartitionReassignments (key 46): the partition reassignments in progress.

As KRaft's controller: ``topics`` null lists every reassigning partition; otherwise
only the named partitions that are reassigning (unknown topics and partitions are left
out, without an error). Each shows its replicas (the target followed by the replicas
being removed), the replicas being added and those being removed
(``broker/cluster/replication_control.py``).

Differences from Kafka: any broker answers (KRaft brokers forward to the controller);
throttle time 0.

With an authorizer, DESCRIBE on the cluster (else CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.cluster.replication_control import ongoing_reassignments
from broker.handlers.base import error_message
from broker.security.authorizer.authorization import AclOperation, cluster_denied
from broker.server.context import RequestContext
from protocol.builders import response_builder

API_KEY = 46
MIN_VERSION = 0
MAX_VERSION = 0


def handle(ctx: RequestContext, request: Any) -> Any:
    if cluster_denied(ctx, AclOperation.DESCRIBE):
        return error_response(ctx, request, ErrorCode.cluster_authorization_failed)
    b = response_builder(API_KEY, ctx.api_version)
    wanted: dict[str, list[int]] | None = None
    if request.topics is not None:
        wanted = {}
        for topic in request.topics:
            wanted.setdefault(topic.name, []).extend(int(p) for p in topic.partition_indexes)
    by_topic: dict[str, list[Any]] = {}
    for ongoing in ongoing_reassignments(ctx.services.metadata, wanted):
        by_topic.setdefault(ongoing.topic, []).append(
            b.OngoingPartitionReassignment(
                partition_index=ongoing.partition,
                replicas=ongoing.replicas,
                adding_replicas=ongoing.adding_replicas,
                removing_replicas=ongoing.removing_replicas,
            )
        )
    topics = tuple(
        b.OngoingTopicReassignment(name=name, partitions=tuple(partitions))
        for name, partitions in by_topic.items()
    )
    return b.ListPartitionReassignmentsResponse(
        throttle_time=0, error_code=ErrorCode.none, error_message=None, topics=topics
    )


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    """``error`` at the top, nothing listed."""
    b = response_builder(API_KEY, ctx.api_version)
    return b.ListPartitionReassignmentsResponse(
        throttle_time=0, error_code=error, error_message=error_message(error), topics=()
    )
