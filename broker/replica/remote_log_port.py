"""What the replica manager asks of tiered storage (``broker/remote/``'s RemoteLogManager).

A port, so that the replica manager need not import the remote log manager, which reads
the partitions and parks in the purgatories the replica manager owns. None of it is
asked when ``remote.log.storage.system.enable`` is false: there is no manager then.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from broker.remote.delayed_remote_list_offsets import ListOffsetsPartitionStatus
from broker.replica.delayed_fetch import FetchParams, FetchPartitionStatus, FetchResults
from broker.replica.partition import Partition, ReadResult, TopicPartition
from broker.server.purgatories import ParkedRequest


class RemoteLogPort(Protocol):
    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    def refresh_log_start(self, partition: Partition) -> None:
        """Tell a partition where the remote tier starts (at creation: a restart, a
        new replica)."""
        ...

    def local_deletion_bound(self, tp: TopicPartition) -> int | None:
        """Local retention stays below this (one past the highest copied offset)."""
        ...

    def remote_fetch_info(
        self,
        result: ReadResult,
        status: FetchPartitionStatus,
        limit: int,
        min_one: bool,
        read_committed: bool,
    ) -> ReadResult:
        """A consumer's read below the local log start, as a remote read to do."""
        ...

    def process_remote_fetches(
        self,
        params: FetchParams,
        statuses: list[FetchPartitionStatus],
        results: FetchResults,
        respond: Callable[[FetchResults], None],
        parked_request: ParkedRequest | None,
    ) -> None:
        """Start the remote reads and park the fetch in the RemoteFetch purgatory."""
        ...

    def latest_tiered_offset(self, tp: TopicPartition) -> int: ...

    def earliest_pending_upload_offset(self, partition: Partition) -> int: ...

    def offset_for_timestamp(
        self, partition: Partition, timestamp: int, fetchable: int
    ) -> ListOffsetsPartitionStatus | None:
        """A timestamp lookup the remote tier must answer first, its search started."""
        ...

    def park_list_offsets(
        self,
        statuses: list[ListOffsetsPartitionStatus],
        timeout_ms: int,
        respond: Callable[[list[ListOffsetsPartitionStatus]], None],
        parked_request: ParkedRequest | None,
    ) -> None:
        """Park a DelayedRemoteListOffsets in the RemoteListOffsets purgatory."""
        ...
