"""A share partition's durable state (the share coordinator, ``broker/share_coordinator/``):
what it writes, and what it is rebuilt from.

Made with ``initialized=False``, a share partition acquires nothing and refuses
acknowledgements until ``SharePartition.initialize`` hands it what its persister read
(start offset, state batches: ``rebuild``); its fetches wait meanwhile. After every
acknowledgement, release, archive, lock expiry or start-offset move that changes durable
state, ``on_write(start_offset, batches, done)`` gets the start offset and the changed
offsets at or past it as Kafka's state batches (``state_batches``: first, last, delivery
state, delivery count; acquired offsets are not written, as in Kafka).

An acknowledgement with a persister is a *state transition* (Kafka's
``startStateTransition``): its records take their new state at once, so nothing acquires
or acknowledges them again, but keep their lock and the member they came from
(``rollback``) until the write is answered (``done``). Its write carries the start offset
as it is and the records' own batches, as Kafka's: a write that carried a start offset
past them, and no batch, was undone by a later write with the lower one (seed 6 of the
all-faults mix: an ACCEPTed record delivered again). Answered, the transition commits
(locks dropped, released records AVAILABLE, the start offset moves, the DLQ gets its runs)
or, refused, rolls back (Kafka's ``completeStateTransition(false)``): the records are
ACQUIRED by their member again, or released when their lock expired meanwhile, and a later
write does not carry the start offset past them. (A refused write may still have been
applied: the share coordinator took the first attempt, its answer was lost and the
persister's retry was fenced by a newer leader epoch -- seed 118 of issue 33's all-faults
campaign. The client was told its acknowledgement failed; Kafka's acknowledgements are at
least once, and so are ours.)
A release (member gone) and a lock expiry are not transitions (Kafka rolls a failed
release back too; a record the write lost is AVAILABLE again when the state is read).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from broker.share.dlq.dlq_records import inferred_cause
from broker.share.in_flight_state import InFlightRecord, RecordState
from broker.share_coordinator.share_state_records import PersisterStateBatch

__all__ = ["Rebuilt", "rebuild", "state_batches"]


#: What ``rebuild`` makes: the in-flight records, the end offset, and the (offset,
#: delivery count, cause) of the ARCHIVING ones, whose DLQ write must be made again.
Rebuilt = tuple[dict[int, InFlightRecord], int, list[tuple[int, int, str]]]


def rebuild(
    start_offset: int,
    batches: Iterable[PersisterStateBatch],
    max_record_locks: int,
    delivery_count_limit: int,
) -> Rebuilt:
    """In-flight records rebuilt from the state batches read (a gap between two batches is
    AVAILABLE, never delivered). Only the record-lock window is kept (all a share partition
    ever writes): memory stays bounded."""
    in_flight: dict[int, InFlightRecord] = {}
    archiving: list[tuple[int, int, str]] = []
    end = start_offset
    bound = start_offset + max_record_locks  # the window's end
    for batch in sorted(batches, key=lambda b: b.first_offset):
        last = min(batch.last_offset, bound - 1)
        for offset in range(max(end, batch.first_offset), last + 1):
            while end < offset:  # a gap
                in_flight[end] = InFlightRecord()
                end += 1
            record = in_flight[offset] = InFlightRecord()
            state = batch.delivery_state
            if state in _LOADED_STATES:
                record.state = RecordState(state)
            record.delivery_count = count = batch.delivery_count
            if state == RecordState.ARCHIVING:  # a DLQ write the last leader began
                archiving.append((offset, count, inferred_cause(count, delivery_count_limit)))
            end = offset + 1
    return in_flight, end, archiving


def state_batches(
    in_flight: Mapping[int, InFlightRecord], changed: Iterable[int], start_offset: int
) -> tuple[PersisterStateBatch, ...]:
    """The changed offsets at or past ``start_offset`` as state batches (first, last,
    delivery state, delivery count): consecutive offsets with one state and count share a
    batch. ACQUIRED offsets (renewed) are not written, as in Kafka."""
    batches: list[PersisterStateBatch] = []
    first = last = count = -1
    state = RecordState.ACQUIRED
    for offset in sorted(set(changed)):
        record = in_flight.get(offset)
        if offset < start_offset or record is None or record.state is RecordState.ACQUIRED:
            continue
        if offset == last + 1 and record.state is state and record.delivery_count == count:
            last = offset
            continue
        if first >= 0:
            batches.append(PersisterStateBatch(first, last, int(state), count))
        first = last = offset
        state, count = record.state, record.delivery_count
    if first >= 0:
        batches.append(PersisterStateBatch(first, last, int(state), count))
    return tuple(batches)


_LOADED_STATES = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVING, RecordState.ARCHIVED)
