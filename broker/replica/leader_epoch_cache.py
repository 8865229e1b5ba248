"""Leader epoch -> start offset, per partition (Kafka's LeaderEpochFileCache, KIP-101).

Every batch carries the epoch of the leader that wrote it, so after a failover a
replica can ask the new leader "where did my last epoch end for you?"
(OffsetForLeaderEpoch) and cut exactly the records the new leader never had — instead
of truncating to its high watermark, which loses or keeps the wrong records when
leaders change twice in a row. The cache is the index that answers that question: the
first offset written in each epoch, in increasing order of both.

Kafka checkpoints it to a file; here it is rebuilt from the batches' epochs when a
partition is opened (``Partition.rebuild_from_log``), which gives the same answer.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


@dataclass(slots=True)
class EpochEntry:
    epoch: int
    start_offset: int


@dataclass
class LeaderEpochCache:
    entries: list[EpochEntry] = field(default_factory=list)

    @property
    def latest_epoch(self) -> int:
        return self.entries[-1].epoch if self.entries else UNDEFINED_EPOCH

    @property
    def latest_start_offset(self) -> int:
        """Where the latest epoch began (-1 when there is none)."""
        return self.entries[-1].start_offset if self.entries else UNDEFINED_EPOCH_OFFSET

    def assign(self, epoch: int, start_offset: int) -> None:
        """Note that ``epoch`` starts at ``start_offset``; older or equal epochs are kept.

        An entry is added only for an epoch newer than the latest. Entries at or above
        ``start_offset`` belong to epochs that wrote nothing that survived, so they go
        (Kafka drops such "empty" entries the same way).
        """
        if epoch < 0:
            return
        if self.entries and epoch <= self.entries[-1].epoch:
            return
        while self.entries and self.entries[-1].start_offset >= start_offset:
            self.entries.pop()
        self.entries.append(EpochEntry(epoch, start_offset))

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """``(epoch, end_offset)`` as OffsetForLeaderEpoch answers it.

        - unknown requested epoch (-1): undefined;
        - our latest epoch: it has not ended, so the log end offset;
        - an older epoch: the start offset of the first epoch after it, with the
          largest epoch we know that is not after the requested one (the requested one
          itself when we have it);
        - an epoch later than all we know: undefined.
        """
        if requested_epoch == UNDEFINED_EPOCH or not self.entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self.entries[-1].epoch:
            return requested_epoch, log_end_offset
        epochs = [e.epoch for e in self.entries]
        higher = bisect_right(epochs, requested_epoch)
        if higher >= len(self.entries):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        end = self.entries[higher].start_offset
        if higher == 0:
            return requested_epoch, end
        return self.entries[higher - 1].epoch, end

    def truncate_from_end(self, end_offset: int) -> None:
        """The log was truncated to ``end_offset``: drop epochs that start at or after it."""
        while self.entries and self.entries[-1].start_offset >= end_offset:
            self.entries.pop()

    def clear(self) -> None:
        self.entries.clear()
