"""DelayedShareFetch: a ShareFetch that waits in the ShareFetch purgatory for records to acquire.

Kafka's rule (DelayedShareFetch.tryComplete): the fetch completes as soon as one of its
partitions has records it could acquire — a redelivery (an offset made AVAILABLE again
by a release or a lock expiry) or new records below the high watermark within the
record-lock window — or a partition is no longer led here (it answers with the error);
otherwise at ``max_wait_ms`` it answers with whatever it can acquire then (usually
nothing). Completing acquires: the acquisition happens in ``on_complete``, once.

It is watched, as Kafka's is, under two keys per partition: the group's
(``DelayedShareFetchGroupKey``: group, topic, partition — woken by a release or lock
expiry in that group's share partition) and the partition's
(``DelayedShareFetchPartitionKey``: the replica manager's ``(topic, partition)`` key,
woken by an append, a high-watermark move or a leadership change).

Differences from Kafka: ``min_bytes`` counts as one record: a share fetch completes when
anything can be acquired (Kafka 4.2 also waits for min bytes when it can tell).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from broker.server.purgatories import ParkedRequest, PurgatoryOutcome
from purgatory import DelayedOperation

TopicPartition = tuple[str, int]


def group_key(group_id: str, tp: TopicPartition) -> tuple[str, str, str, int]:
    """Kafka's DelayedShareFetchGroupKey."""
    return ("share", group_id, tp[0], tp[1])


@dataclass(frozen=True, slots=True)
class ShareFetchPartition:
    topic_id: uuid.UUID
    topic: str
    partition: int

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)


@dataclass(slots=True)
class ShareFetchParams:
    """What a share fetch asks for (Kafka's ShareFetch), kept here beside the delayed
    operation that carries it, as ``FetchParams`` is beside ``DelayedFetch``."""

    group_id: str
    member_id: str
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    max_records: int
    partitions: list[ShareFetchPartition]
    # KIP-1206's ShareAcquireMode (ShareFetch v2): record_limit (1) caps the records
    # acquired at max_records; batch_optimized (0, the default) acquires whole batches
    record_limit: bool = False


class SharePartitions(Protocol):
    """What a DelayedShareFetch asks of the share partition manager: whether one of its
    partitions has something to answer now. A Protocol, so this module need not import
    the manager that parks it; ``SharePartitionManager`` is the one implementation."""

    def can_complete(self, params: ShareFetchParams) -> bool: ...


class DelayedShareFetch(DelayedOperation):
    __slots__ = ("_manager", "_params", "_respond", "parked_request")

    def __init__(
        self,
        params: ShareFetchParams,
        manager: SharePartitions,
        respond: Callable[[ShareFetchParams], None],
        parked_request: ParkedRequest | None,
    ) -> None:
        super().__init__(params.max_wait_ms)
        self._params = params
        self._manager = manager
        self._respond = respond
        self.parked_request = parked_request

    def try_complete(self) -> bool:
        if self._manager.can_complete(self._params):
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        if self.parked_request is not None and self.watch_keys:  # it was parked
            self.parked_request.purgatory_done(
                PurgatoryOutcome.EXPIRED if self.is_expired else PurgatoryOutcome.COMPLETED
            )
        self._respond(self._params)

    def on_expiration(self) -> None:
        pass  # the outcome was told in on_complete
