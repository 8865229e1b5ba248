"""Idempotent-producer sequence checks for one partition (Kafka's ProducerStateManager).

A producer with ``enable.idempotence`` numbers its batches per partition. The leader
keeps, per producer id, its epoch and the last few batches' sequence ranges with the
offsets they were written at, so that a retried batch is recognised (answered with
DUPLICATE_SEQUENCE_NUMBER and the original offset, written once) and a gap is refused
(OUT_OF_ORDER_SEQUENCE_NUMBER). Kafka keeps five batches per producer, the client's
``max.in.flight.requests.per.connection`` bound for idempotence; so do we.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

RECENT_BATCHES = 5


@dataclass(slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


@dataclass(slots=True)
class ProducerEntry:
    epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=RECENT_BATCHES))

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1


@dataclass(slots=True)
class SequenceCheck:
    """The verdict on one batch: append it, or answer with ``error``/``duplicate_of``."""

    error: ErrorCode = ErrorCode.none
    duplicate_of: BatchMetadata | None = None


class ProducerStateManager:
    def __init__(self) -> None:
        self._producers: dict[int, ProducerEntry] = {}

    def check(self, producer_id: int, epoch: int, first_seq: int, last_seq: int) -> SequenceCheck:
        entry = self._producers.get(producer_id)
        if entry is None:
            # A producer we have never seen must start its sequence at 0.
            if first_seq != 0:
                return SequenceCheck(ErrorCode.out_of_order_sequence_number)
            return SequenceCheck()
        if epoch < entry.epoch:
            return SequenceCheck(ErrorCode.invalid_producer_epoch)
        if epoch > entry.epoch:
            if first_seq != 0:
                return SequenceCheck(ErrorCode.out_of_order_sequence_number)
            return SequenceCheck()
        for batch in entry.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return SequenceCheck(ErrorCode.duplicate_sequence_number, batch)
        expected = (entry.last_seq + 1) & 0x7FFFFFFF
        if first_seq != expected:
            if entry.batches and first_seq <= entry.last_seq:
                # Older than what we remember: a duplicate we can no longer place.
                return SequenceCheck(ErrorCode.duplicate_sequence_number)
            return SequenceCheck(ErrorCode.out_of_order_sequence_number)
        return SequenceCheck()

    def record(
        self,
        producer_id: int,
        epoch: int,
        first_seq: int,
        last_seq: int,
        first_offset: int,
        last_offset: int,
    ) -> None:
        entry = self._producers.get(producer_id)
        if entry is None or epoch > entry.epoch:
            entry = ProducerEntry(epoch)
            self._producers[producer_id] = entry
        entry.batches.append(BatchMetadata(first_seq, last_seq, first_offset, last_offset))

    def clear(self) -> None:
        self._producers.clear()
