"""ElectLeaders (key 43): preferred (0) or unclean (1) leader elections, per partition.

As KRaft's controller (``electLeader``, ``broker/cluster/replication_control.py``): PREFERRED
makes each partition's first replica its leader -- ELECTION_NOT_NEEDED where it already
leads, PREFERRED_LEADER_NOT_AVAILABLE where it is not alive or not in the ISR; UNCLEAN
gives a leaderless partition a leader, from the ISR if any member is alive, else any
alive replica (whose ISR becomes itself) -- ELECTION_NOT_NEEDED where there is a leader,
ELIGIBLE_LEADERS_NOT_AVAILABLE where no replica is alive. An unknown topic or partition
is UNKNOWN_TOPIC_OR_PARTITION. ``topic_partitions`` null means every partition of every
topic, and then partitions that need no election are left out of the answer (Kafka
does the same). v0 has no election type: it is PREFERRED. A new leader bumps the leader
epoch; every broker follows it through the metadata, as after a failover.

Differences from Kafka: any broker answers (KRaft brokers forward to the controller);
``timeout`` is not waited on (the election is done when the answer leaves);
throttle time 0.

With an authorizer, ALTER on the cluster (else CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.cluster.replication_control import PREFERRED, elect_leader
from broker.handlers.base import error_message
from broker.security.authorizer.authorization import AclOperation, cluster_denied
from broker.server.context import RequestContext
from protocol.builders import Builder, response_builder

API_KEY = 43
MIN_VERSION = 0
MAX_VERSION = 2


def handle(ctx: RequestContext, request: Any) -> Any:
    if cluster_denied(ctx, AclOperation.ALTER):
        return error_response(ctx, request, ErrorCode.cluster_authorization_failed)
    b = response_builder(API_KEY, ctx.api_version)
    cluster = ctx.services.metadata
    election_type = int(getattr(request, "election_type", PREFERRED))
    everything = request.topic_partitions is None
    if everything:
        wanted = [(name, list(range(len(t.partitions)))) for name, t in cluster.topics.items()]
    else:
        wanted = [(t.topic, [int(p) for p in t.partitions]) for t in request.topic_partitions]
    changed: set[str] = set()
    results = []
    for topic, partitions in wanted:
        partition_results = []
        for partition in partitions:
            error, message = elect_leader(cluster, topic, partition, election_type)
            if error is ErrorCode.none:
                changed.add(topic)
            if everything and error is ErrorCode.election_not_needed:
                continue
            partition_results.append(_result(b, partition, error, message))
        results.append(
            b.ReplicaElectionResult(topic=topic, partition_result=tuple(partition_results))
        )
    for topic in sorted(changed):
        cluster.partition_changed(topic)
    return b.ElectLeadersResponse(
        throttle_time=0, error_code=ErrorCode.none, replica_election_results=tuple(results)
    )


def _result(b: Builder, partition: int, error: ErrorCode, message: str | None) -> Any:
    return b.PartitionResult(partition_id=partition, error_code=error, error_message=message)


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    """``error`` at the top (v1+) and for every partition named; nothing is elected."""
    b = response_builder(API_KEY, ctx.api_version)
    message = error_message(error)
    results = tuple(
        b.ReplicaElectionResult(
            topic=t.topic,
            partition_result=tuple(_result(b, int(p), error, message) for p in t.partitions),
        )
        for t in request.topic_partitions or ()
    )
    return b.ElectLeadersResponse(
        throttle_time=0, error_code=error, replica_election_results=results
    )
