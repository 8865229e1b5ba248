"""What ShareFetch (78) and ShareAcknowledge (79) have in common (KIP-932).

Both name partitions by topic id and carry acknowledgement batches per partition; both
answer per partition with the current leader, and at the top level with the share
session's error. ``RequestedPartitions`` reads a request's topics once: the partitions
it names (an unknown topic id is UNKNOWN_TOPIC_ID for its partitions) and their
acknowledgements.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from broker.handlers.topic_names import NO_UUID
from broker.server.context import RequestContext
from broker.share.delayed_share_fetch import ShareFetchPartition
from broker.share.share_partition import AcknowledgementBatch
from broker.share.share_session import SessionPartitions
from protocol.builders import Builder

AckResult = tuple[ErrorCode, str | None]


@dataclass(slots=True)
class RequestedPartitions:
    partitions: SessionPartitions = field(default_factory=dict)
    acks: dict[ShareFetchPartition, list[AcknowledgementBatch]] = field(default_factory=dict)
    unknown: list[tuple[uuid.UUID, int]] = field(default_factory=list)


def read_partitions(ctx: RequestContext, request: Any) -> RequestedPartitions:
    found = RequestedPartitions()
    metadata = ctx.services.metadata
    for topic in request.topics:
        topic_id = topic.topic_id if isinstance(topic.topic_id, uuid.UUID) else NO_UUID
        info = metadata.topic_by_id(topic_id) if topic_id != NO_UUID else None
        for p in topic.partitions:
            index = int(p.partition_index)
            if info is None:
                found.unknown.append((topic_id, index))
                continue
            fp = ShareFetchPartition(info.topic_id, info.name, index)
            found.partitions[(fp.topic_id, index)] = fp.topic
            batches = p.acknowledgement_batches
            if batches:
                found.acks[fp] = [
                    AcknowledgementBatch(
                        int(a.first_offset),
                        int(a.last_offset),
                        tuple(int(t) for t in a.acknowledge_types),
                    )
                    for a in batches
                ]
    return found


class Acknowledgements:
    """Each partition's acknowledgement result, final once the state writes they made
    are answered (a failed write is the partition's error): ``when_durable``."""

    __slots__ = ("_callback", "_pending", "results")

    def __init__(self) -> None:
        self.results: dict[ShareFetchPartition, AckResult] = {}
        self._pending = 0
        self._callback: Callable[[], None] | None = None

    @property
    def durable(self) -> bool:
        return self._pending == 0

    def when_durable(self, callback: Callable[[], None]) -> None:
        """``callback`` once every write is answered (now, if they are)."""
        if self._pending == 0:
            callback()
        else:
            self._callback = callback

    def _written(self, fp: ShareFetchPartition) -> Callable[[ErrorCode], None]:
        self._pending += 1

        def written(error: ErrorCode) -> None:
            self._pending -= 1
            if (
                error is not ErrorCode.none
                and self.results.get(fp, (ErrorCode.none,))[0] is ErrorCode.none
            ):
                self.results[fp] = (error, "The share state could not be written.")
            if self._pending == 0 and self._callback is not None:
                callback, self._callback = self._callback, None
                callback()

        return written


def acknowledge_all(
    ctx: RequestContext, group_id: str, member_id: str, requested: RequestedPartitions
) -> Acknowledgements:
    """Every partition's acknowledgements, each all or nothing (RENEW from v2)."""
    manager = ctx.services.share_partition_manager
    allow_renew = ctx.api_version >= 2
    acks = Acknowledgements()
    for fp, batches in requested.acks.items():
        written = acks._written(fp)
        result = manager.acknowledge(group_id, member_id, fp.tp, batches, allow_renew, written)
        acks.results.setdefault(fp, result)
    return acks


def current_leader(ctx: RequestContext, b: Builder, topic: str | None, partition: int) -> Any:
    state = ctx.services.metadata.partition_state(topic, partition) if topic else None
    if state is None:
        return b.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1)
    return b.LeaderIdAndEpoch(leader_id=state.leader, leader_epoch=state.leader_epoch)


def lock_timeout_ms(ctx: RequestContext, group_id: str | None = None) -> int:
    """The AcquisitionLockTimeoutMs answered: the group's share.record.lock.duration.ms."""
    manager = ctx.services.share_partition_manager
    if group_id is None:
        return manager.config.record_lock_duration_ms
    return manager.partition_config(group_id).record_lock_duration_ms


def check_ids(request: Any) -> str | None:
    """Kafka's INVALID_REQUEST for a share request without a group or member id."""
    if not request.group_id:
        return "GroupId can't be empty."
    if not request.member_id:
        return "MemberId can't be empty."
    return None
