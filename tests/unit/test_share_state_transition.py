"""An acknowledgement's state write, held open on the manual clock (Kafka's state
transitions): until the share coordinator answers, its records are neither acquired nor
acknowledged again and hold the start offset; a refused write rolls them back -- ACQUIRED
by their member again, or released when their lock ran out meanwhile -- so an
acknowledgement the client was told failed is never made durable by a later write of
this leader's."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.share.dlq.dlq_records import CLIENT_REJECT
from broker.share.share_partition import (
    AcknowledgementBatch,
    AcknowledgeType,
    AcquiredRecords,
    RecordState,
    SharePartition,
    SharePartitionConfig,
    WriteDone,
)
from broker.share_coordinator.share_state_records import PersisterStateBatch
from purgatory import ManualClock, SystemTimer
from tests.helpers.share_writes import Writes, recording

A, R, X = AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT
NONE = (ErrorCode.none, None)


class _DeadLetters:
    def __init__(self) -> None:
        self.runs: list[tuple[int, int, int, str]] = []

    def enabled(self, group_id: str) -> bool:
        return True

    def enqueue(
        self, partition: SharePartition, first: int, last: int, delivery_count: int, cause: str
    ) -> None:
        self.runs.append((first, last, delivery_count, cause))


class _Held:
    """A share partition whose state writes wait for the test to answer them."""

    def __init__(self, dead_letters: _DeadLetters | None = None, **config: int) -> None:
        self.clock = ManualClock()
        self.timer = SystemTimer(self.clock)
        self.writes: Writes = []
        self.answers: list[WriteDone] = []
        self.woken = 0
        self.sp = SharePartition(
            "g",
            "t",
            0,
            0,
            SharePartitionConfig(**{"record_lock_duration_ms": 1000, **config}),
            self.timer,
            on_available=self._wake,
            initialized=False,
            on_write=recording(self.writes, self.answers),
            dead_letters=dead_letters,
        )
        self.sp.initialize(0, [])

    def _wake(self) -> None:
        self.woken += 1

    def answer(self, made: bool) -> None:
        self.answers.pop(0)(made)

    def expire(self) -> None:
        self.clock.advance(1000)
        self.timer.advance_clock()


def _ack(first: int, last: int, kind: int) -> list[AcknowledgementBatch]:
    return [AcknowledgementBatch(first, last, (int(kind),))]


def test_a_refused_write_gives_the_records_back_to_their_member() -> None:
    held = _Held()
    sp = held.sp
    sp.acquire("m1", [(0, 4)], 100)
    assert sp.acknowledge("m1", _ack(0, 1, A)) == NONE
    # the records' own batches say they are done (Kafka's); the start offset moves once
    # the write is made
    assert held.writes[-1] == (0, (PersisterStateBatch(0, 1, int(RecordState.ACKNOWLEDGED), 1),))
    assert sp.start_offset == 0
    # while the write is out, the records are neither acknowledged nor acquired again
    assert sp.acknowledge("m1", _ack(0, 0, A))[0] is ErrorCode.invalid_record_state
    assert sp.acquire("m2", [(0, 4)], 100) == []
    held.answer(False)
    assert sp.start_offset == 0
    assert sp.record_state(0) == (RecordState.ACQUIRED, 1, "m1")
    assert sp.acknowledge("m1", _ack(0, 4, A)) == NONE  # the client acknowledges again
    held.answer(True)
    assert sp.start_offset == 5 and sp.acquired_count == 0


def test_a_refused_write_after_the_lock_ran_out_releases_the_records() -> None:
    held = _Held()
    sp = held.sp
    sp.acquire("m1", [(0, 2)], 100)
    sp.acknowledge("m1", _ack(0, 2, A))
    held.expire()  # the lock runs out while the write is out: nothing moves yet
    assert sp.record_state(0) == (RecordState.ACKNOWLEDGED, 1, None)
    held.answer(False)
    assert sp.record_state(0) == (RecordState.AVAILABLE, 1, None)
    assert held.woken == 1  # a parked share fetch may take them
    assert sp.acquire("m2", [(0, 2)], 100) == [AcquiredRecords(0, 2, 2)]  # delivered again


def test_a_later_write_does_not_carry_the_start_offset_past_a_refused_one() -> None:
    held = _Held()
    sp = held.sp
    sp.acquire("m1", [(0, 3)], 100)
    sp.acknowledge("m1", _ack(0, 1, A))
    sp.acknowledge("m1", _ack(2, 3, A))
    assert [start for start, _ in held.writes] == [0, 0]  # never past a write still out
    assert held.writes[-1][1] == (PersisterStateBatch(2, 3, int(RecordState.ACKNOWLEDGED), 1),)
    held.answer(False)  # the first is refused, the second made
    held.answer(True)
    assert sp.start_offset == 0
    assert sp.record_state(0) == (RecordState.ACQUIRED, 1, "m1")
    assert sp.record_state(2) == (RecordState.ACKNOWLEDGED, 1, None)


def test_a_release_is_acquirable_once_its_write_is_made() -> None:
    held = _Held()
    sp = held.sp
    sp.acquire("m1", [(0, 1)], 100)
    sp.acknowledge("m1", _ack(0, 1, R))
    assert held.writes[-1] == (0, (PersisterStateBatch(0, 1, int(RecordState.AVAILABLE), 1),))
    assert sp.next_fetch_offset() == 2 and sp.acquire("m2", [(0, 1)], 100) == []
    assert held.woken == 0
    held.answer(True)
    assert held.woken == 1 and sp.next_fetch_offset() == 0
    assert sp.acquire("m2", [(0, 1)], 100) == [AcquiredRecords(0, 1, 2)]


def test_a_refused_reject_sends_nothing_to_the_dead_letter_queue() -> None:
    dead_letters = _DeadLetters()
    held = _Held(dead_letters)
    sp = held.sp
    sp.acquire("m1", [(0, 1)], 100)
    sp.acknowledge("m1", _ack(0, 0, X))
    sp.acknowledge("m1", _ack(1, 1, X))
    assert dead_letters.runs == []  # not before the ARCHIVING state is durable
    held.answer(False)
    held.answer(True)
    assert dead_letters.runs == [(1, 1, 1, CLIENT_REJECT)]
    assert sp.record_state(0) == (RecordState.ACQUIRED, 1, "m1")


def test_the_lock_of_a_made_acknowledgement_is_cancelled() -> None:
    held = _Held()
    sp = held.sp
    sp.acquire("m1", [(0, 9)], 100)
    sp.acknowledge("m1", _ack(0, 9, A))
    assert sp.acquired_count == 10  # still under the lock while the write is out
    held.answer(True)
    assert sp.acquired_count == 0 and sp.start_offset == 10
    held.expire()
    assert sp.locks_expired == 0 and held.woken == 0
