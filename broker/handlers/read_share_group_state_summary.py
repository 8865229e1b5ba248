"""ReadShareGroupStateSummary (key 87): a share partition's state epoch, leader epoch and
start offset, without its batches (inter-broker, KIP-932: what
DescribeShareGroupOffsets reads).

The errors are ReadShareGroupState's. v1's DeliveryCompleteCount is counted from the
batches the share coordinator holds (``summary_of``), not kept from the writes as Kafka
4.2 keeps it: the same number.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.handlers import share_state_common
from broker.server.context import RequestContext
from broker.share_coordinator.share_state_records import StateSummary

API_KEY = 87
MIN_VERSION = 0
MAX_VERSION = 1


NAMES = ("ReadShareGroupStateSummaryResponse", "ReadStateSummaryResult")


def _fields(b: Any, state: Any) -> dict[str, Any]:
    return {
        "state_epoch": state.state_epoch,
        "leader_epoch": state.leader_epoch,
        "start_offset": state.start_offset,
        "delivery_complete_count": state.delivery_complete_count
        if isinstance(state, StateSummary)
        else -1,
    }


def handle(ctx: RequestContext, request: Any) -> Any:
    coordinator = ctx.services.coordinators.share
    return share_state_common.serve_reads(
        ctx,
        request,
        API_KEY,
        NAMES,
        lambda key, p: coordinator.read_state_summary(key, int(p.leader_epoch)),
        _fields,
    )


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    return share_state_common.error_response(ctx, request, API_KEY, NAMES, error)
