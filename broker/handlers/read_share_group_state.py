"""ReadShareGroupState (key 84): a share partition's new leader reads its durable state
from the share coordinator (inter-broker, KIP-932).

Answered from the coordinator's memory: state epoch, start offset and state batches; a
key without state reads as uninitialised (start offset -1, state epoch 0, as Kafka 4.1).
A newer leader epoch than recorded is recorded (an update record); an older one is
FENCED_LEADER_EPOCH. NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS as the coordinator
says; UNKNOWN_TOPIC_OR_PARTITION for a partition the metadata does not have.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.handlers import share_state_common
from broker.server.context import RequestContext

API_KEY = 84
MIN_VERSION = 0
MAX_VERSION = 0


NAMES = ("ReadShareGroupStateResponse", "ReadStateResult")


def _fields(b: Any, state: Any) -> dict[str, Any]:
    return {
        "state_epoch": state.state_epoch,
        "start_offset": state.start_offset,
        "state_batches": tuple(
            b.StateBatch(
                first_offset=s.first_offset,
                last_offset=s.last_offset,
                delivery_state=s.delivery_state,
                delivery_count=s.delivery_count,
            )
            for s in state.state_batches
        ),
    }


def handle(ctx: RequestContext, request: Any) -> Any:
    coordinator = ctx.services.coordinators.share
    return share_state_common.serve_reads(
        ctx,
        request,
        API_KEY,
        NAMES,
        lambda key, p: coordinator.read_state(key, int(p.leader_epoch)),
        _fields,
    )


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    return share_state_common.error_response(ctx, request, API_KEY, NAMES, error)
