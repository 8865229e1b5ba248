"""RemoveRaftVoter (key 81, v0, KIP-853): a controller leaves the KRaft quorum.

Behavior:

- ``kafka-metadata-quorum.sh remove-controller`` (and ``minikafka metadata-quorum
  remove-controller``) sends it with the voter's id and directory id (DescribeQuorum's
  ``--replication`` shows both). The simulated quorum (``broker/cluster/kraft_quorum.py``)
  drops it from the voters: it shows as an observer (it is still a broker), and a leader
  that leaves hands the quorum to the lowest live voter (epoch + 1).
- Errors as Kafka's KafkaRaftClient and RemoveVoterHandler: INCONSISTENT_CLUSTER_ID;
  INVALID_REQUEST without a directory id; UNSUPPORTED_VERSION on a static quorum;
  REQUEST_TIMED_OUT while the previous voter change is uncommitted; VOTER_NOT_FOUND when
  no voter has that id and directory id, or it is the last voter.
- With an authorizer, ALTER on the cluster (else CLUSTER_AUTHORIZATION_FAILED).

Version notes: v0 only (Kafka 4.2's newest).

Differences from Kafka: any broker answers (Kafka forwards to the quorum leader);
throttle time 0.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.handlers.base import error_message
from broker.handlers.raft_voter_common import precheck
from broker.server.context import RequestContext
from protocol.builders import response_builder

API_KEY = 81
MIN_VERSION = 0
MAX_VERSION = 0


def handle(ctx: RequestContext, request: Any) -> Any:
    result = precheck(ctx, request.cluster_id)
    if result is None:
        quorum = ctx.services.replica_manager.controller.quorum
        result = quorum.remove_voter(int(request.voter_id), request.voter_directory_id)
    b = response_builder(API_KEY, ctx.api_version)
    return b.RemoveRaftVoterResponse(
        throttle_time=0, error_code=result.error, error_message=result.message
    )


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    return b.RemoveRaftVoterResponse(
        throttle_time=0, error_code=error, error_message=error_message(error)
    )
