"""A follower below the leader's local log start builds its state from the remote tier.

Kafka's ReplicaFetcherTierStateMachine: the leader answered OFFSET_MOVED_TO_TIERED_STORAGE
(the follower's fetch offset is older than anything the leader keeps locally), so the
follower does not fetch those records at all. It takes the tier's copied segment that
ends highest, reads that segment's leader-epoch checkpoint and producer snapshot, empties
its log to start right after it, loads the epochs and producers, and fetches on from
there; its log start is the tier's.

Where we differ: Kafka asks the leader its earliest local offset (ListOffsets -4) and
starts there; we start after the highest copied offset, which the leader's local log
start never exceeds (it deletes only what is copied), so the fetch that follows is
local on the leader. The two index reads go to the storage manager directly (Kafka's
fetcher thread blocks on them too), outside the latency model.
"""

from __future__ import annotations

import logging

from broker.remote.remote_log_metadata_manager import RemoteLogMetadataManager
from broker.remote.remote_storage_manager import IndexType, RemoteStorageManager
from broker.remote.segment_companions import (
    parse_leader_epoch_checkpoint,
    parse_producer_snapshot,
)
from broker.replica.partition import Partition

log = logging.getLogger("broker.remote")


class ReplicaFetcherTierStateMachine:
    def __init__(self, metadata: RemoteLogMetadataManager, storage: RemoteStorageManager) -> None:
        self.metadata = metadata
        self.storage = storage

    def build_remote_log_aux_state(self, partition: Partition) -> int | None:
        """Rebuild ``partition`` from the tier; the offset to fetch from, or None when
        the tier cannot help (the fetcher then handles it as out of range)."""
        tp = partition.tp
        copied = self.metadata.copied_segments(tp)
        if not copied:
            return None
        last = copied[-1]
        start = last.end_offset + 1
        try:
            epochs = parse_leader_epoch_checkpoint(
                self.storage.fetch_index(last, IndexType.LEADER_EPOCH)
            )
            producers = parse_producer_snapshot(
                self.storage.fetch_index(last, IndexType.PRODUCER_SNAPSHOT)
            )
        except Exception as exc:  # the tier failed: retried at the next fetch
            log.warning("%s-%d: building state from the remote tier failed: %s", *tp, exc)
            return None
        partition.truncate_fully_and_start_at(start)
        for entry in epochs:
            partition.epoch_cache.assign(entry.epoch, entry.start_offset)
        partition.producers.load_snapshot(producers)
        partition.remote_log_start_offset = copied[0].start_offset
        log.info("%s-%d: built from the remote tier, fetching from %d", *tp, start)
        return start
