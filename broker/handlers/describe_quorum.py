"""DescribeQuorum (key 55): the KRaft controller quorum of ``__cluster_metadata``.

As Kafka (KafkaRaftClient.handleDescribeQuorumRequest, RaftUtil): the request must
name exactly the topic ``__cluster_metadata`` with partition 0, else every partition
asked answers UNKNOWN_TOPIC_OR_PARTITION; the answer is the leader id and epoch, the
high watermark, each voter's and observer's log end offset with its last fetch and
last caught-up timestamps (the leader's own are "now"), and from v2 the voters' nodes
and their listeners. The quorum is the simulated one of ``broker/cluster/kraft_quorum.py``
(its docstring says how it follows the shared metadata and which voters there are).

Voter changes (AddRaftVoter, RemoveRaftVoter) show here at once: the voters, the
observers, the nodes.

Differences from Kafka: a broker answers itself where Kafka's broker forwards the
request to the active controller; v2's replica directory ids are derived from the cluster
and node ids (``KRaftQuorum.directory_id``) and each voter's one listener is named
CONTROLLER with the broker's address (or the address AddRaftVoter gave). No ACLs.
"""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from broker.cluster.kraft_quorum import METADATA_PARTITION, METADATA_TOPIC, ReplicaState
from broker.handlers.base import error_message
from broker.server.context import RequestContext
from protocol.builders import response_builder

API_KEY = 55
MIN_VERSION = 0
MAX_VERSION = 2

_NO_DIRECTORY = uuid.UUID(int=0)
CONTROLLER_LISTENER = "CONTROLLER"


def handle(ctx: RequestContext, request: Any) -> Any:
    topics = request.topics
    valid = (
        len(topics) == 1
        and topics[0].topic_name == METADATA_TOPIC
        and len(topics[0].partitions) == 1
        and int(topics[0].partitions[0].partition_index) == METADATA_PARTITION
    )
    if not valid:
        return _partition_errors(ctx, request, ErrorCode.unknown_topic_or_partition)
    quorum = ctx.services.replica_manager.controller.quorum.describe()
    b = response_builder(API_KEY, ctx.api_version)

    def states(replicas: list[ReplicaState]) -> tuple[Any, ...]:
        return tuple(
            b.ReplicaState(
                replica_id=r.replica_id,
                replica_directory_id=quorum.directory_ids.get(r.replica_id, _NO_DIRECTORY),
                log_end_offset=r.log_end_offset,
                last_fetch_timestamp=r.last_fetch_timestamp,
                last_caught_up_timestamp=r.last_caught_up_timestamp,
            )
            for r in replicas
        )

    partition = b.PartitionData(
        partition_index=METADATA_PARTITION,
        error_code=ErrorCode.none,
        error_message=None,
        leader_id=quorum.leader_id,
        leader_epoch=quorum.leader_epoch,
        high_watermark=quorum.high_watermark,
        current_voters=states(quorum.voters),
        observers=states(quorum.observers),
    )
    nodes = tuple(
        b.Node(
            node_id=node_id,
            listeners=(b.Listener(name=CONTROLLER_LISTENER, host=host, port=port),),
        )
        for node_id, (host, port) in sorted(quorum.nodes.items())
        if any(v.replica_id == node_id for v in quorum.voters)
    )
    return b.DescribeQuorumResponse(
        error_code=ErrorCode.none,
        error_message=None,
        topics=(b.TopicData(topic_name=METADATA_TOPIC, partitions=(partition,)),),
        nodes=nodes,
    )


def _partition_errors(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    """Kafka's getPartitionLevelErrorResponse: ``error`` on every partition asked."""
    b = response_builder(API_KEY, ctx.api_version)
    return b.DescribeQuorumResponse(
        error_code=ErrorCode.none,
        error_message=None,
        topics=tuple(
            b.TopicData(
                topic_name=topic.topic_name,
                partitions=tuple(
                    b.PartitionData(
                        partition_index=int(p.partition_index),
                        error_code=error,
                        error_message=error_message(error),
                        leader_id=-1,
                        leader_epoch=-1,
                        high_watermark=-1,
                        current_voters=(),
                        observers=(),
                    )
                    for p in topic.partitions
                ),
            )
            for topic in request.topics
        ),
        nodes=(),
    )


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    """Kafka's getTopLevelErrorResponse: ``error`` at the top level, nothing else."""
    b = response_builder(API_KEY, ctx.api_version)
    return b.DescribeQuorumResponse(
        error_code=error, error_message=error_message(error), topics=(), nodes=()
    )
