"""WriteShareGroupState (key 85): a share partition leader writes changed state batches
to the share coordinator (inter-broker, KIP-932).

Each partition's write becomes one ``__share_group_state`` record (a ShareUpdate, or a
ShareSnapshot for a key's first write and every
``share.coordinator.snapshot.update.records.per.snapshot`` updates) appended with
acks=all; its answer waits for the append. FENCED_LEADER_EPOCH / FENCED_STATE_EPOCH for
an older epoch than recorded, UNKNOWN_TOPIC_OR_PARTITION for a partition the metadata
does not have, NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS as the coordinator says.

Differences from Kafka: v1's DeliveryCompleteCount is accepted and not kept.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.handlers import share_state_common
from broker.handlers.share_state_common import Answer
from broker.server.context import RequestContext
from broker.share_coordinator.share_state_records import PersisterStateBatch, SharePartitionKey

API_KEY = 85
MIN_VERSION = 0
MAX_VERSION = 1


NAMES = ("WriteShareGroupStateResponse", "WriteStateResult")


def handle(ctx: RequestContext, request: Any) -> Any:
    coordinator = ctx.services.coordinators.share

    def write(key: SharePartitionKey, p: Any, answer: Answer) -> None:
        batches = tuple(
            PersisterStateBatch(
                int(s.first_offset),
                int(s.last_offset),
                int(s.delivery_state),
                int(s.delivery_count),
            )
            for s in p.state_batches
        )
        coordinator.write_state(
            key, int(p.state_epoch), int(p.leader_epoch), int(p.start_offset), batches, answer
        )

    return share_state_common.serve_appends(ctx, request, API_KEY, NAMES, write)


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    return share_state_common.error_response(ctx, request, API_KEY, NAMES, error)
