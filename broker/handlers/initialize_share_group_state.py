"""InitializeShareGroupState (key 83): the group coordinator sets a share partition's
start offset and state epoch at the share coordinator (inter-broker, KIP-932).

Each partition becomes a new ShareSnapshot (no state batches) appended with acks=all;
its answer waits for the append. FENCED_STATE_EPOCH when the recorded state epoch is
not older; NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS as the coordinator says.

Differences from Kafka: our share-group coordinator does not send it (a share partition
with no state starts at the high watermark); it is served for other brokers and tools.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.handlers import share_state_common
from broker.handlers.share_state_common import Answer
from broker.server.context import RequestContext
from broker.share_coordinator.share_state_records import SharePartitionKey

API_KEY = 83
MIN_VERSION = 0
MAX_VERSION = 0


NAMES = ("InitializeShareGroupStateResponse", "InitializeStateResult")


def handle(ctx: RequestContext, request: Any) -> Any:
    coordinator = ctx.services.coordinators.share

    def initialize(key: SharePartitionKey, p: Any, answer: Answer) -> None:
        coordinator.initialize_state(key, int(p.state_epoch), int(p.start_offset), answer)

    return share_state_common.serve_appends(ctx, request, API_KEY, NAMES, initialize)


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    return share_state_common.error_response(ctx, request, API_KEY, NAMES, error)
