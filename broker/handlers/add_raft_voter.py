"""AddRaftVoter (key 80, v0-1, KIP-853): a controller joins the KRaft quorum.

Behavior:

- ``kafka-metadata-quorum.sh add-controller`` (and ``minikafka metadata-quorum
  add-controller``) sends it. The voter is named by id and directory id and must bring an
  endpoint on the CONTROLLER listener; the simulated quorum
  (``broker/cluster/kraft_quorum.py``) adds it when it is a live node with that directory
  id (a caught-up observer), and DescribeQuorum shows it among the voters at once.
- Errors as Kafka's KafkaRaftClient and AddVoterHandler: INCONSISTENT_CLUSTER_ID for
  another cluster's id; INVALID_REQUEST without a directory id or a CONTROLLER endpoint;
  UNSUPPORTED_VERSION on a static quorum (``controller.quorum.voters``, kraft.version 0);
  REQUEST_TIMED_OUT while the previous voter change is uncommitted, or when the node is
  not a caught-up observer ("lagging behind"); DUPLICATE_VOTER when the id already votes.
- With an authorizer, ALTER on the cluster (else CLUSTER_AUTHORIZATION_FAILED).

Version notes: v1 adds ``ack_when_committed`` (KIP-1186); the answer here always waits
for the commit, which in the simulated quorum is immediate when a majority is alive.

Differences from Kafka: any broker answers (Kafka forwards to the quorum leader);
throttle time 0; the request's timeout is not used (nothing waits).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.cluster.kraft_quorum import CONTROLLER_LISTENER
from broker.handlers.base import error_message
from broker.handlers.raft_voter_common import precheck
from broker.server.context import RequestContext
from protocol.builders import response_builder

API_KEY = 80
MIN_VERSION = 0
MAX_VERSION = 1


def handle(ctx: RequestContext, request: Any) -> Any:
    result = precheck(ctx, request.cluster_id)
    if result is None:
        address = next(
            (
                (lst.host, int(lst.port))
                for lst in request.listeners
                if lst.name == CONTROLLER_LISTENER
            ),
            None,
        )
        quorum = ctx.services.replica_manager.controller.quorum
        result = quorum.add_voter(int(request.voter_id), request.voter_directory_id, address)
    b = response_builder(API_KEY, ctx.api_version)
    return b.AddRaftVoterResponse(
        throttle_time=0, error_code=result.error, error_message=result.message
    )


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    return b.AddRaftVoterResponse(
        throttle_time=0, error_code=error, error_message=error_message(error)
    )
