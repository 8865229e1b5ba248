"""DelayedProduce: an acks=all produce waiting in the Produce purgatory for the ISR.

Kafka's rule (DelayedProduce.tryComplete, Partition.checkEnoughReplicasReachOffset):
for every partition it appended to, the produce waits until the high watermark passes
its last offset — i.e. every in-sync replica has the batch. Then the partition's answer
is NONE, or NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below
``min.insync.replicas`` meanwhile. Leadership moving away answers NOT_LEADER_OR_FOLLOWER
at once; the request's timeout answers REQUEST_TIMED_OUT. It is watched on its
partitions; every high-watermark move and follower fetch checks it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from broker.replica.partition import AppendResult, TopicPartition
from broker.replica.ports import OnlinePartitions
from broker.server.purgatories import ParkedRequest, PurgatoryOutcome
from purgatory import DelayedOperation


@dataclass(slots=True)
class ProducePartitionStatus:
    result: AppendResult
    required_offset: int
    acks_pending: bool


ProduceStatuses = dict[TopicPartition, ProducePartitionStatus]


class DelayedProduce(DelayedOperation):
    __slots__ = ("_min_isr", "_replica_manager", "_respond", "_statuses", "parked_request")

    def __init__(
        self,
        timeout_ms: int,
        statuses: ProduceStatuses,
        replica_manager: OnlinePartitions,
        min_insync_replicas: Callable[[TopicPartition], int],
        respond: Callable[[ProduceStatuses], None],
        parked_request: ParkedRequest | None,
    ) -> None:
        super().__init__(timeout_ms)
        self._statuses = statuses
        self._replica_manager = replica_manager
        self._min_isr = min_insync_replicas
        self._respond = respond
        self.parked_request = parked_request

    def try_complete(self) -> bool:
        pending = False
        for tp, status in self._statuses.items():
            if not status.acks_pending:
                continue
            partition = self._replica_manager.online_partition(tp)
            if partition is None or not partition.is_leader:
                status.result.error = ErrorCode.not_leader_or_follower
                status.acks_pending = False
            elif partition.high_watermark >= status.required_offset:
                if len(partition.isr) < self._min_isr(tp):
                    status.result.error = ErrorCode.not_enough_replicas_after_append
                status.acks_pending = False
            else:
                pending = True
        if pending:
            return False
        return self.force_complete()

    def on_complete(self) -> None:
        for status in self._statuses.values():
            if status.acks_pending:
                status.result.error = ErrorCode.request_timed_out
                status.acks_pending = False
        if self.parked_request is not None and self.watch_keys:  # it was parked
            self.parked_request.purgatory_done(
                PurgatoryOutcome.EXPIRED if self.is_expired else PurgatoryOutcome.COMPLETED
            )
        self._respond(self._statuses)

    def on_expiration(self) -> None:
        pass  # the outcome was told in on_complete
