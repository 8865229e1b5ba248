"""DelayedRemoteFetch: a consumer's fetch that waits in the RemoteFetch purgatory for the tier.

A fetch whose offset is below the local log start but at or above the log start is read
from the remote tier (Kafka 4.2 reads every such partition of the fetch, each estimated
at its max bytes against the response's limit; the others are read from the local logs
at once). The remote reads are submitted, and the fetch is parked on its partitions'
keys until, as Kafka's doc names the cases, it can be completed when:

- Case a: this broker is no longer the leader of a partition it fetches;
- Case b: this broker no longer knows a partition it fetches;
- Case c: every remote read has finished (succeeded or failed);
- Case d: a partition is in an offline log directory (never here: a log dir failure
  is not modelled).

Each finished read calls ``check_and_complete`` on its partition's key. At
``remote.fetch.max.wait.ms`` the reaper expires the operation: reads not yet run are
cancelled, and the answer is Kafka's -- every partition as its local read found it, which
for a remote partition is no records and no error, so the consumer fetches again. A read
that failed answers its partition with the read's error.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from broker.remote.remote_log_reader import RemoteLogReadResult
from broker.remote.remote_log_reader_pool import PooledRead
from broker.replica.delayed_fetch import FetchPartitionStatus, FetchResults
from broker.replica.partition import ReadResult, TopicPartition
from broker.replica.ports import OnlinePartitions
from broker.server.purgatories import ParkedRequest, PurgatoryOutcome
from purgatory import DelayedOperation


class DelayedRemoteFetch(DelayedOperation):
    __slots__ = (
        "_local_read_results",
        "_remote_fetch_results",
        "_remote_fetch_tasks",
        "_replicas",
        "_respond",
        "_statuses",
        "parked_request",
    )

    def __init__(
        self,
        remote_fetch_tasks: dict[TopicPartition, PooledRead | None],
        remote_fetch_results: dict[TopicPartition, RemoteLogReadResult],
        remote_fetch_max_wait_ms: int,
        statuses: list[FetchPartitionStatus],
        local_read_results: FetchResults,
        replicas: OnlinePartitions,
        respond: Callable[[FetchResults], None],
        parked_request: ParkedRequest | None,
    ) -> None:
        super().__init__(remote_fetch_max_wait_ms)
        self._remote_fetch_tasks = remote_fetch_tasks
        self._remote_fetch_results = remote_fetch_results
        self._statuses = statuses
        self._local_read_results = local_read_results
        self._replicas = replicas
        self._respond = respond
        self.parked_request = parked_request

    def try_complete(self) -> bool:
        online = self._replicas.online_partition
        for status in self._statuses:
            partition = online(status.tp)
            if partition is None:  # Case b
                return self.force_complete()
            if not partition.is_leader:  # Case a
                return self.force_complete()
        if all(result.done for result in self._remote_fetch_results.values()):  # Case c
            return self.force_complete()
        return False

    def on_expiration(self) -> None:
        for task in self._remote_fetch_tasks.values():
            if task is not None:
                task.abandon()  # Kafka's cancel(false): a queued read never runs

    def on_complete(self) -> None:
        if self.parked_request is not None and self.watch_keys:  # it was parked
            self.parked_request.purgatory_done(
                PurgatoryOutcome.EXPIRED if self.is_expired else PurgatoryOutcome.COMPLETED
            )
        answered: FetchResults = []
        for status, result in self._local_read_results:
            remote = self._remote_fetch_results.get(status.tp)
            if remote is not None and remote.done and result.delayed_remote_storage_fetch:
                if remote.error.value != 0:
                    answered.append((status, ReadResult(remote.error)))
                    continue
                result = dataclasses.replace(
                    result,
                    records=remote.records,
                    aborted_transactions=remote.aborted_transactions,
                )
            answered.append(
                (status, dataclasses.replace(result, delayed_remote_storage_fetch=None))
            )
        self._respond(answered)
