"""DeleteShareGroupState (key 86): the group coordinator deletes share partitions' state
at the share coordinator (inter-broker, KIP-932).

Each partition's ShareSnapshot and ShareUpdate keys get tombstones, appended with
acks=all; its answer waits for the append. NOT_COORDINATOR /
COORDINATOR_LOAD_IN_PROGRESS as the coordinator says.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.handlers import share_state_common
from broker.server.context import RequestContext

API_KEY = 86
MIN_VERSION = 0
MAX_VERSION = 0


NAMES = ("DeleteShareGroupStateResponse", "DeleteStateResult")


def handle(ctx: RequestContext, request: Any) -> Any:
    coordinator = ctx.services.coordinators.share
    return share_state_common.serve_appends(
        ctx, request, API_KEY, NAMES, lambda key, _p, answer: coordinator.delete_state(key, answer)
    )


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    return share_state_common.error_response(ctx, request, API_KEY, NAMES, error)
