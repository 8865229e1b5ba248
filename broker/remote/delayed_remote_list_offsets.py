"""DelayedRemoteListOffsets: a ListOffsets by timestamp that waits for the remote tier's search.

A timestamp lookup on a tiered partition searches the remote segments first (their
records are the oldest), then the local log (Kafka's RemoteLogManager
.findOffsetByTimestamp). The remote search is submitted to the storage model; the request
is parked in the RemoteListOffsets purgatory on its partitions' keys, and it can be
completed, as Kafka's doc names the cases, when:

- Case a: this broker is no longer the leader of a partition it looks up;
- Case b: this broker no longer knows a partition it looks up;
- Case c: every remote search has finished (found, not found, or failed).

A finished search calls ``check_and_complete`` on its key. At the request's ``timeout``
(v10+, else ``remote.list.offsets.request.timeout.ms``) the reaper expires it: the
searches not yet run are abandoned and their partitions answer REQUEST_TIMED_OUT, as
Kafka's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from broker.remote.remote_log_reader_pool import PooledRead
from broker.replica.partition import TopicPartition
from broker.replica.ports import OnlinePartitions
from broker.server.purgatories import ParkedRequest, PurgatoryOutcome
from purgatory import DelayedOperation


@dataclass(slots=True)
class ListOffsetsPartitionStatus:
    """One partition's answer, or the remote search it waits for (Kafka's
    ListOffsetsPartitionStatus): ``done`` once ``error``/``offset``/``timestamp`` hold."""

    tp: TopicPartition
    done: bool = True
    error: ErrorCode = ErrorCode.none
    timestamp: int = -1
    offset: int = -1
    leader_epoch: int = -1
    task: PooledRead | None = None


class DelayedRemoteListOffsets(DelayedOperation):
    __slots__ = ("_replicas", "_respond", "_statuses", "parked_request")

    def __init__(
        self,
        delay_ms: int,
        statuses: list[ListOffsetsPartitionStatus],
        replicas: OnlinePartitions,
        respond: Callable[[list[ListOffsetsPartitionStatus]], None],
        parked_request: ParkedRequest | None,
    ) -> None:
        super().__init__(delay_ms)
        self._statuses = statuses
        self._replicas = replicas
        self._respond = respond
        self.parked_request = parked_request

    def try_complete(self) -> bool:
        for status in self._statuses:
            if status.done:
                continue
            partition = self._replicas.online_partition(status.tp)
            if partition is None or not partition.is_leader:  # Case b, Case a
                return self.force_complete()
        if all(status.done for status in self._statuses):  # Case c
            return self.force_complete()
        return False

    def on_expiration(self) -> None:
        for status in self._statuses:
            if status.task is not None:
                status.task.abandon()

    def on_complete(self) -> None:
        if self.parked_request is not None and self.watch_keys:
            self.parked_request.purgatory_done(
                PurgatoryOutcome.EXPIRED if self.is_expired else PurgatoryOutcome.COMPLETED
            )
        online = self._replicas.online_partition
        for status in self._statuses:
            if status.done:
                continue
            status.done = True
            partition = online(status.tp)
            if partition is None:
                status.error = ErrorCode.unknown_topic_or_partition
            elif not partition.is_leader:
                status.error = ErrorCode.not_leader_or_follower
            else:
                status.error = ErrorCode.request_timed_out
        self._respond(self._statuses)
