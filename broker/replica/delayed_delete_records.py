"""DelayedDeleteRecords: a DeleteRecords waiting in its purgatory for the followers.

Kafka's rule (DelayedDeleteRecords.tryComplete, Partition.lowWatermarkIfLeader): the
leader moved its own log start at once; the request then waits until, for every
partition it asked, the partition's low watermark — the lowest log start offset of the
leader and of every follower on a live broker, as each follower last reported it in its
fetch — has reached the requested offset. The partition's answer is then NONE with that
low watermark. Leadership moving away answers NOT_LEADER_OR_FOLLOWER (low watermark -1),
the partition vanishing UNKNOWN_TOPIC_OR_PARTITION; at the request's timeout a partition
still waiting answers REQUEST_TIMED_OUT with the low watermark it had when the request
was parked (Kafka sets the timeout error first and clears it on success). Watched on its
partitions in the "DeleteRecords" purgatory; a follower fetch that reports a new log
start, and any other state change of the partition, checks it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from kio.schema.errors import ErrorCode

from broker.replica.partition import TopicPartition
from broker.replica.ports import OnlinePartitions
from broker.server.purgatories import ParkedRequest, PurgatoryOutcome
from purgatory import DelayedOperation

INVALID_LOW_WATERMARK = -1


@dataclass(slots=True)
class DeleteRecordsPartitionStatus:
    """One partition of a DeleteRecords (Kafka's DeleteRecordsPartitionStatus)."""

    required_offset: int
    low_watermark: int
    error: ErrorCode = ErrorCode.none
    acks_pending: bool = False

    @property
    def must_wait(self) -> bool:
        """Kafka's delayedDeleteRecordsRequired, for one partition."""
        return self.error is ErrorCode.none and self.low_watermark < self.required_offset


DeleteRecordsStatuses = dict[TopicPartition, DeleteRecordsPartitionStatus]


class DeleteRecordsReplicas(OnlinePartitions, Protocol):
    """What a DelayedDeleteRecords reads of the replica manager: the partitions it
    waits on, and which brokers are alive (the low watermark counts only those)."""

    def is_alive_broker(self, broker_id: int) -> bool: ...


class DelayedDeleteRecords(DelayedOperation):
    __slots__ = ("_replica_manager", "_respond", "_statuses", "parked_request")

    def __init__(
        self,
        timeout_ms: int,
        statuses: DeleteRecordsStatuses,
        replica_manager: DeleteRecordsReplicas,
        respond: Callable[[DeleteRecordsStatuses], None],
        parked_request: ParkedRequest | None,
    ) -> None:
        super().__init__(timeout_ms)
        for status in statuses.values():
            # As Kafka: the timeout error is set now and cleared when the replicas follow.
            status.acks_pending = status.error is ErrorCode.none
            if status.acks_pending:
                status.error = ErrorCode.request_timed_out
        self._statuses = statuses
        self._replica_manager = replica_manager
        self._respond = respond
        self.parked_request = parked_request

    def try_complete(self) -> bool:
        manager = self._replica_manager
        pending = False
        for tp, status in self._statuses.items():
            if not status.acks_pending:
                continue
            partition = manager.online_partition(tp)
            if partition is None:
                self._settle(status, ErrorCode.unknown_topic_or_partition, INVALID_LOW_WATERMARK)
            elif not partition.is_leader:
                self._settle(status, ErrorCode.not_leader_or_follower, INVALID_LOW_WATERMARK)
            else:
                low_watermark = partition.low_watermark_if_leader(manager.is_alive_broker)
                if low_watermark >= status.required_offset:
                    self._settle(status, ErrorCode.none, low_watermark)
                else:
                    pending = True
        if pending:
            return False
        return self.force_complete()

    @staticmethod
    def _settle(status: DeleteRecordsPartitionStatus, error: ErrorCode, low_watermark: int) -> None:
        status.acks_pending = False
        status.error = error
        status.low_watermark = low_watermark

    def on_complete(self) -> None:
        if self.parked_request is not None and self.watch_keys:  # it was parked
            self.parked_request.purgatory_done(
                PurgatoryOutcome.EXPIRED if self.is_expired else PurgatoryOutcome.COMPLETED
            )
        self._respond(self._statuses)

    def on_expiration(self) -> None:
        pass  # the partitions still pending answer REQUEST_TIMED_OUT (set at creation)
