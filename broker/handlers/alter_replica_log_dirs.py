"""AlterReplicaLogDirs (key 34): move replicas between this broker's log directories.

As Kafka (KafkaApis.handleAlterReplicaLogDirsRequest, ReplicaManager.alterReplicaLogDirs):
each partition named under a directory path is moved to that log directory of this
broker (a partition named under two paths goes to the last); a path that is not one of
the broker's log dirs (``log.dirs``, as DescribeLogDirs names them) is
LOG_DIR_NOT_FOUND; a partition this broker does not host is REPLICA_NOT_AVAILABLE (and
is created in that directory if it comes later); a topic name too long for the future
directory's name is INVALID_TOPIC_EXCEPTION. v0 is gone from Kafka 4 (KIP-896).

Differences from Kafka: the move is done before the answer (``LogManager.move``: the
log's files are copied into a future directory, which is swapped in), where Kafka
answers at once and a ReplicaAlterLogDirsThread fills the future replica by fetching, so
DescribeLogDirs never shows a future replica (``is_future_key``). A broker without a
data directory has one pseudo log dir, ``memory://broker-<id>``. Throttle 0.

With an authorizer, ALTER on the cluster (else CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.replica.partition import TopicPartition
from broker.security.authorizer.authorization import AclOperation, cluster_denied
from broker.server.context import RequestContext
from protocol.builders import response_builder

API_KEY = 34
MIN_VERSION = 1
MAX_VERSION = 2


def handle(ctx: RequestContext, request: Any) -> Any:
    if cluster_denied(ctx, AclOperation.ALTER):
        return error_response(ctx, request, ErrorCode.cluster_authorization_failed)
    destinations: dict[TopicPartition, str] = {}
    for directory in request.dirs:
        for topic in directory.topics:
            for index in topic.partitions:
                destinations[(topic.name, int(index))] = directory.path
    manager = ctx.services.replica_manager
    errors = {tp: manager.alter_replica_log_dir(tp, path) for tp, path in destinations.items()}
    return _response(ctx, errors)


def _response(ctx: RequestContext, errors: dict[TopicPartition, ErrorCode]) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    by_topic: dict[str, list[Any]] = {}
    for (name, index), error in errors.items():
        by_topic.setdefault(name, []).append(
            b.AlterReplicaLogDirPartitionResult(partition_index=index, error_code=error)
        )
    return b.AlterReplicaLogDirsResponse(
        throttle_time=0,
        results=tuple(
            b.AlterReplicaLogDirTopicResult(topic_name=name, partitions=tuple(parts))
            for name, parts in by_topic.items()
        ),
    )


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    """``error`` for every partition of the request; nothing moves."""
    return _response(
        ctx,
        {
            (topic.name, int(index)): error
            for directory in request.dirs
            for topic in directory.topics
            for index in topic.partitions
        },
    )
