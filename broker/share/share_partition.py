"""SharePartition: one share group's view of one topic partition (KIP-932), on its leader.

Theory of operation. A share group reads a partition as a queue. The share-partition
start offset (SPSO) is the first offset not yet done with; the end offset (SPEO, here
``end_offset``, exclusive) is one past the last offset ever acquired. Between them every
offset is *in flight* and has a state — AVAILABLE, ACQUIRED (by one member, under an
acquisition lock), ACKNOWLEDGED or ARCHIVED — and a delivery count. Offsets below the
SPSO are done; offsets from the SPEO on were never delivered.

- ``acquire`` takes what a share fetch read from the log (its batches' offset ranges)
  and acquires, for one member, the AVAILABLE offsets in flight and the new offsets past
  the SPEO, each with its delivery count incremented, up to ``max_records`` — the
  batch that reaches it whole in KIP-1206's batch-optimized mode, exactly in
  record-limit mode — and within the in-flight window ``share.partition.max.record.locks``
  (back-pressure: no new offsets past SPSO + that many; as Kafka's, a batch-optimized
  fetch that fits in it takes its last batch whole, even past it). A read_committed read's aborted
  batches are archived instead. Every run of offsets acquired together gets one
  acquisition lock, a timer task on the share lock timer (``group.share.record.lock.
  duration.ms``); the answer lists them as Kafka's AcquiredRecords (first, last,
  delivery count).
- ``acknowledge`` applies a member's ACCEPT (-> ACKNOWLEDGED), RELEASE (-> AVAILABLE),
  REJECT and GAP (-> ARCHIVED) and, from ShareFetch/ShareAcknowledge v2, RENEW (a fresh
  lock, when the group enables it: else INVALID_RECORD_STATE) to offsets it holds. All
  or nothing: it is checked whole before anything
  changes, with Kafka's errors — INVALID_REQUEST for a malformed batch or an offset past
  the acquired ones, INVALID_RECORD_STATE for offsets not in flight, not acquired, or
  acquired by another member.
- A lock that expires (the member neither acknowledged nor renewed in time) makes its
  offsets still ACQUIRED AVAILABLE again; a release does the same. Either way an offset
  whose delivery count reached ``group.share.delivery.count.limit`` is ARCHIVED instead.
- Kafka 4.4's dead-letter queue (KIP-1191; ``dead_letters``, active when the group has
  a DLQ at ``share.version`` 2): a REJECTed or exhausted offset is ARCHIVING (durable
  state 3, not done: it holds the SPSO) and handed, in runs, to the DLQ writer once the
  state write is made; ``finish_archiving`` makes it ARCHIVED when the write ends,
  written or not. A state read with ARCHIVING runs writes them again (at least once).
  A lock is cancelled (O(1) on the timing wheel) once no offset of its run is held.
- The SPSO moves past every leading ACKNOWLEDGED/ARCHIVED offset, and their state is
  dropped: memory is bounded by the window.
- ``on_available`` is called when offsets become AVAILABLE again (release, lock expiry)
  or an acknowledgement opens a full record-lock window: the manager wakes the
  DelayedShareFetches of the group waiting on this partition.

Durable state (``durable_state.py``): made with ``initialized=False``, a share partition
waits for ``initialize``; each change of durable state is written (``on_write``), and an
acknowledgement is a state transition until its write is answered: committed, or rolled
back when refused.

Differences from Kafka: state is kept per offset (a slotted object each) rather than per
fetched batch with per-offset state only where a batch was split; the lock is per run of
offsets acquired together, which is Kafka's lock per acquired batch for the common case;
offsets between persisted batches come back AVAILABLE with delivery count 0.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Protocol

from kio.schema.errors import ErrorCode

from broker.share.acknowledgement_check import check_acknowledgements
from broker.share.dlq.dlq_records import (
    CLIENT_REJECT,
    DELIVERY_COUNT_EXCEEDED,
    dlq_runs,
)
from broker.share.durable_state import rebuild, state_batches
from broker.share.in_flight_state import (
    ABORTED,
    CONTROL,
    DATA,
    AcknowledgementBatch,
    AcknowledgeType,
    AcquiredRecords,
    AcquisitionLockTimerTask,
    InFlightRecord,
    RecordState,
    SharePartitionConfig,
)
from broker.share_coordinator.share_state_records import PersisterStateBatch
from purgatory import SystemTimer

#: A share partition's state write: (start offset, state batches, called with True when
#: the write is made and False when it is refused, or None when no one waits for it).
WriteDone = Callable[[bool], None]
StateWrite = Callable[[int, tuple[PersisterStateBatch, ...], WriteDone | None], None]

__all__ = [  # the state's values, from in_flight_state, as their users always named them
    "ABORTED",
    "CONTROL",
    "DATA",
    "AcknowledgeType",
    "AcknowledgementBatch",
    "AcquiredRecords",
    "AcquisitionLockTimerTask",
    "DeadLetters",
    "RecordState",
    "SharePartition",
    "SharePartitionConfig",
    "StateWrite",
    "WriteDone",
]

log = logging.getLogger("broker.share")


class DeadLetters(Protocol):
    """Where a share partition sends what it dead-letters (KIP-1191): its manager, which
    hands the runs to the broker's ``ShareGroupDLQManager`` and calls
    ``finish_archiving`` once each run's write has ended."""

    def enabled(self, group_id: str) -> bool:
        """``share.version`` >= 2 and the group names a DLQ topic (Kafka's
        ``isDLQEnabledForGroup``), read afresh at each archive."""
        ...

    def enqueue(
        self, partition: SharePartition, first: int, last: int, delivery_count: int, cause: str
    ) -> None: ...


class SharePartition:
    """One (group, topic, partition)'s in-flight state; synchronous, clock-free (the
    lock timer reads the clock)."""

    def __init__(
        self,
        group_id: str,
        topic: str,
        partition: int,
        start_offset: int,
        config: SharePartitionConfig,
        lock_timer: SystemTimer,
        on_available: Callable[[], None] = lambda: None,
        *,
        initialized: bool = True,
        on_write: StateWrite | None = None,
        dead_letters: DeadLetters | None = None,
    ) -> None:
        self.group_id = group_id
        self.topic = topic
        self.partition = partition
        self.config = config
        self.start_offset = start_offset
        self.end_offset = start_offset
        self._timer = lock_timer
        self._on_available = on_available
        # offset -> state, for offsets in [start_offset, end_offset) that had a record;
        # inserted in offset order, so iteration is ascending.
        self._in_flight: dict[int, InFlightRecord] = {}
        self.acquired_count = 0
        # how many in-flight records are AVAILABLE: none, and the next fetch reads from
        # the end offset without a scan (every append asks, through DelayedShareFetch)
        self._available = 0
        # Counters for metrics and the bench: locks started / cancelled / expired.
        self.locks_added = 0
        self.locks_expired = 0
        self.initialized = initialized
        self._on_write = on_write
        self.writes = 0  # state writes handed to on_write
        self.state_epoch = 0  # the persisted state's
        self._dead_letters = dead_letters
        # (offset, delivery count, cause) made ARCHIVING by the operation under way: handed
        # to ``dead_letters`` in runs once its state write is made (_send_dead_letters)
        self._dead_lettering: list[tuple[int, int, str]] = []

    # -- durable state ----------------------------------------------------------------

    def initialize(
        self, start_offset: int, batches: Iterable[PersisterStateBatch], state_epoch: int = 0
    ) -> None:
        """The state the persister read (``durable_state.rebuild``)."""
        config = self.config
        in_flight, end, archiving = rebuild(
            start_offset, batches, config.max_record_locks, config.delivery_count_limit
        )
        self._dead_lettering.extend(archiving)
        self.state_epoch = state_epoch
        self.start_offset = start_offset
        self.end_offset = end
        self._in_flight = in_flight
        self._available = sum(r.state is RecordState.AVAILABLE for r in in_flight.values())
        self.initialized = True
        self._maybe_update_start_offset()
        self._send_dead_letters()

    def _write(
        self,
        changed: list[int],
        old_start: int,
        done: WriteDone | None = None,
    ) -> bool:
        """Hand the changed offsets' new state and the start offset as it is to
        ``on_write``; False when there was nothing to hand on."""
        on_write = self._on_write
        start = self.start_offset
        if on_write is None or (not changed and start == old_start):
            return False
        self.writes += 1
        on_write(start, state_batches(self._in_flight, changed, start), done)
        return True

    # -- reads ------------------------------------------------------------------------

    def next_fetch_offset(self) -> int:
        """Where the next share fetch reads: the first AVAILABLE offset in flight, else
        the end offset."""
        if not self._available or not self.initialized:
            return self.end_offset
        for offset, record in self._in_flight.items():
            if record.state is RecordState.AVAILABLE and record.rollback is None:
                return offset
        return self.end_offset

    def window_full(self) -> bool:
        """Back-pressure: no new offsets past SPSO + max record locks."""
        return self.end_offset - self.start_offset >= self.config.max_record_locks

    def can_acquire_records(self, log_bound: int) -> bool:
        """Whether a fetch could acquire anything now, the log readable below
        ``log_bound`` (the high watermark)."""
        if not self.initialized:
            return False
        if self.next_fetch_offset() < self.end_offset:
            return True
        return not self.window_full() and log_bound > self.end_offset

    def record_state(self, offset: int) -> tuple[RecordState, int, str | None] | None:
        """(state, delivery count, member) of an in-flight offset; None outside."""
        record = self._in_flight.get(offset)
        if record is None:
            return None
        return record.state, record.delivery_count, record.member_id

    def in_flight(self) -> list[tuple[int, RecordState, int, str | None, int | None]]:
        """(offset, state, delivery count, member, lock deadline ms) of every in-flight
        record, in offset order: what the console shows of a share partition."""
        return [
            (
                offset,
                record.state,
                record.delivery_count,
                record.member_id,
                record.lock.deadline_ms if record.lock is not None else None,
            )
            for offset, record in sorted(self._in_flight.items())
        ]

    def in_flight_count(self) -> int:
        return len(self._in_flight)

    # -- acquire ----------------------------------------------------------------------

    def acquire(
        self,
        member_id: str,
        batches: Iterable[tuple[int, ...]],
        max_records: int,
        record_limit: bool = False,
    ) -> list[AcquiredRecords]:
        """Acquire for ``member_id`` what it may have of the fetched batches' offset
        ranges — (base, last, kind): a DATA batch's offsets are acquired; a CONTROL
        batch's (transaction markers) are never delivered and only move the end offset;
        an ABORTED batch's (read_committed) are archived, never delivered.

        KIP-1206's acquire modes: batch-optimized (the default) acquires whole batches —
        once ``max_records`` is reached inside a batch, the rest of that batch is
        acquired too; record-limit stops at ``max_records`` exactly."""
        acquired: list[AcquiredRecords] = []
        if not self.initialized:
            return acquired
        start = self.start_offset
        archived: list[int] = []
        run: list[InFlightRecord] = []
        run_first = run_count = -1
        budget = max_records
        full = False
        room = self.config.max_record_locks - (self.end_offset - self.start_offset)
        soft_window = not record_limit and room >= max_records
        for batch in batches:
            base, last = batch[0], batch[1]
            kind = batch[2] if len(batch) > 2 else DATA
            if kind == CONTROL:
                self._archive_markers(base, last, archived)
                if last >= self.end_offset and not self.window_full():
                    self.end_offset = last + 1
                continue
            if kind == ABORTED:
                full = self._archive_aborted(base, last, archived)
            if full or budget <= 0:
                break
            if kind == ABORTED:
                continue
            offset = max(base, self.start_offset)
            while offset <= last and (budget > 0 or not record_limit):
                if offset >= self.end_offset:
                    # new records, never delivered: acquired together, in one step
                    if run and (run_count != 1 or offset != run_first + len(run)):
                        acquired.append(self._lock_run(member_id, run_first, run, run_count))
                        run = []
                    if not run:
                        run_first, run_count = offset, 1
                    taken = self._acquire_new(
                        member_id, offset, last, budget, record_limit, soft_window, run
                    )
                    if not taken:
                        full = True
                        break
                    budget -= taken
                    offset += taken
                    continue
                record = self._acquirable(offset)
                if record is None:
                    if offset >= self.end_offset and self.window_full():
                        full = True
                        break
                    offset += 1
                    continue
                count = record.delivery_count + 1
                if run and (count != run_count or offset != run_first + len(run)):
                    acquired.append(self._lock_run(member_id, run_first, run, run_count))
                    run = []
                if not run:
                    run_first, run_count = offset, count
                record.state = RecordState.ACQUIRED
                self._available -= 1
                record.delivery_count = count
                record.member_id = member_id
                run.append(record)
                budget -= 1
                offset += 1
            if full:
                break
        if run:
            acquired.append(self._lock_run(member_id, run_first, run, run_count))
        self._maybe_update_start_offset()
        if archived:
            self._write(archived, start)
        return acquired

    def _acquire_new(
        self,
        member_id: str,
        offset: int,
        last: int,
        budget: int,
        record_limit: bool,
        soft_window: bool,
        run: list[InFlightRecord],
    ) -> int:
        """Acquire the new offsets from ``offset`` (the end offset or past it) to
        ``last`` (the end of their batch), onto ``run``; how many (0: the window is full).

        As Kafka's ``lastOffsetAndMaxRecordsToAcquire``: when the record-lock window had
        room for the fetch's whole MaxRecords (``soft_window``), a batch-optimized
        acquisition takes the batch that reaches MaxRecords whole, even past the window;
        otherwise the window is a hard limit. No new offset starts past the window, and
        record_limit mode also stops at the budget."""
        window_end = self.start_offset + self.config.max_record_locks
        if offset >= window_end:
            return 0
        count = last + 1 - offset
        if not soft_window:
            count = min(count, window_end - offset)
        if record_limit:
            count = min(count, budget)
        acquired = RecordState.ACQUIRED
        records = [InFlightRecord(acquired, 1, member_id) for _ in range(count)]
        self._in_flight.update(zip(range(offset, offset + count), records, strict=True))
        run.extend(records)
        self.end_offset = offset + count
        return count

    def _archive_markers(self, base: int, last: int, archived: list[int]) -> None:
        """ARCHIVE a control batch's offsets in flight as AVAILABLE (a durable-state gap a
        new leader read back), which would hold the start offset for good (issue 33)."""
        for offset in range(max(base, self.start_offset), min(last + 1, self.end_offset)):
            record = self._in_flight.get(offset)
            if record is not None and _available(record):
                record.state = RecordState.ARCHIVED
                self._available -= 1
                archived.append(offset)

    def _archive_aborted(self, base: int, last: int, archived: list[int]) -> bool:
        """A read_committed share partition's aborted records (Kafka's
        ``filterAbortedTransactionalAcquiredRecords``): ARCHIVED, never delivered.
        True when the record-lock window is full."""
        for offset in range(max(base, self.start_offset), last + 1):
            if offset < self.end_offset:
                record = self._in_flight.get(offset)
                if record is None or not _available(record):
                    continue
                self._available -= 1
            elif self.window_full():
                return True
            else:
                record = self._in_flight[offset] = InFlightRecord()
                self.end_offset = offset + 1
            record.state = RecordState.ARCHIVED
            archived.append(offset)
        return False

    def _acquirable(self, offset: int) -> InFlightRecord | None:
        """The record at ``offset`` if it can be acquired now (a new one past the end
        offset is made, within the window); else None."""
        if offset < self.end_offset:
            record = self._in_flight.get(offset)
            return record if record is not None and _available(record) else None
        if self.window_full():
            return None
        record = InFlightRecord()
        self._available += 1  # a new record is AVAILABLE until acquired, at once
        self._in_flight[offset] = record
        self.end_offset = offset + 1
        return record

    def _lock_run(
        self, member_id: str, first: int, run: list[InFlightRecord], delivery_count: int
    ) -> AcquiredRecords:
        last = first + len(run) - 1
        lock = self._new_lock(member_id, first, last)
        for record in run:
            record.lock = lock
        lock.held = len(run)
        self.acquired_count += len(run)
        return AcquiredRecords(first, last, delivery_count)

    def _new_lock(self, member_id: str, first: int, last: int) -> AcquisitionLockTimerTask:
        lock = AcquisitionLockTimerTask(
            self, member_id, first, last, self.config.record_lock_duration_ms
        )
        self.locks_added += 1
        self._timer.add(lock)
        return lock

    # -- acknowledge ------------------------------------------------------------------

    def acknowledge(
        self,
        member_id: str,
        batches: list[AcknowledgementBatch],
        allow_renew: bool = False,
        renew_enabled: bool = True,
    ) -> tuple[ErrorCode, str | None]:
        """Apply ``member_id``'s acknowledgements, all or none (Kafka's errors).
        ``allow_renew``: the request's version has RENEW (v2); ``renew_enabled``: the
        group's ``share.renew.acknowledge.enable`` (KIP-1222) — off, a RENEW is
        INVALID_RECORD_STATE, as Kafka 4.3."""
        if not self.initialized:
            return ErrorCode.invalid_record_state, "The share partition is initializing."
        error = check_acknowledgements(
            self._in_flight, self.start_offset, self.end_offset, member_id, batches, allow_renew
        )
        if error is not None:
            return error
        if allow_renew and not renew_enabled and _has_renew(batches):
            return (
                ErrorCode.invalid_record_state,
                "Renew acknowledgements are not enabled for the share group.",
            )
        start = self.start_offset
        released = False
        # with a persister the acknowledgement is a transition, until its write is answered
        changed: list[int] | None = [] if self._on_write is not None else None
        renewed: list[tuple[int, InFlightRecord]] = []
        for batch in batches:
            types = batch.acknowledge_types
            single = len(types) == 1
            if single and types[0] in _DONE_TYPES:  # one ACCEPT/REJECT/GAP for the range
                state = _DONE_TYPES[types[0]]
                if types[0] == AcknowledgeType.REJECT and self._dead_lettering_on():
                    state = RecordState.ARCHIVING
                self._complete(batch.first_offset, batch.last_offset, state, changed)
                continue
            for index, offset in enumerate(range(batch.first_offset, batch.last_offset + 1)):
                record = self._in_flight[offset]
                kind = types[0] if single else types[index]
                if kind == AcknowledgeType.RENEW:
                    renewed.append((offset, record))
                    self._unlock(record)
                    self.acquired_count += 1  # still acquired: _unlock counted it out
                    continue
                if changed is None:
                    self._unlock(record)
                else:
                    record.rollback = record.member_id
                    changed.append(offset)
                record.member_id = None
                if kind == AcknowledgeType.ACCEPT:
                    record.state = RecordState.ACKNOWLEDGED
                elif kind == AcknowledgeType.RELEASE:
                    if not self._release(record, offset):
                        pass  # archived at the delivery limit
                    elif changed is None:
                        released = True
                    else:
                        self._available -= 1  # not acquirable until the write is made
                elif kind == AcknowledgeType.REJECT:
                    self._archive(record, offset, CLIENT_REJECT)
                else:  # GAP: no record there, nothing to dead-letter
                    record.state = RecordState.ARCHIVED
        if renewed:
            self._renew(member_id, renewed)
        if changed is not None:
            self._start_transition(changed, start)
            return ErrorCode.none, None
        self._maybe_update_start_offset()
        self._send_dead_letters()
        # a release makes records available; a start offset that moved may open the
        # record-lock window to new records: both can complete a parked share fetch
        if released or (self.start_offset != start and self._window_was_full(start)):
            self._on_available()
        return ErrorCode.none, None

    def _complete(
        self, first: int, last: int, state: RecordState, transition: list[int] | None
    ) -> None:
        """ACQUIRED (checked) -> ``state`` for a range: the hot path of acknowledgements
        (ARCHIVING: a REJECT that is dead-lettered). In a ``transition`` the records keep
        their lock and note their member until the state write is answered."""
        in_flight = self._in_flight
        if transition is not None:
            transition.extend(range(first, last + 1))
        for offset in range(first, last + 1):
            record = in_flight[offset]
            lock = record.lock
            if transition is not None:
                record.rollback = record.member_id
            elif lock is not None:
                record.lock = None
                self.acquired_count -= 1
                lock.held -= 1
                if lock.held <= 0:
                    lock.cancel()
            record.member_id = None
            record.state = state
        if state is RecordState.ARCHIVING:
            self._dead_lettering.extend(
                (offset, in_flight[offset].delivery_count, CLIENT_REJECT)
                for offset in range(first, last + 1)
            )

    def _window_was_full(self, start: int) -> bool:
        return self.end_offset - start >= self.config.max_record_locks

    def _renew(self, member_id: str, records: list[tuple[int, InFlightRecord]]) -> None:
        """RENEW: the records stay ACQUIRED by the member under one fresh lock."""
        offsets = [offset for offset, _record in records]
        lock = self._new_lock(member_id, min(offsets), max(offsets))
        for _offset, record in records:
            record.lock = lock
        lock.held = len(records)

    # -- state transitions (an acknowledgement's write out) ------------------------------

    def _start_transition(self, changed: list[int], old_start: int) -> None:
        """Write an acknowledgement's records with the start offset as it is (their own
        batches say they are done, as Kafka's), and end the transition when the write is
        answered -- at once when there was nothing to write."""
        in_flight = self._in_flight
        records = [(o, in_flight[o]) for o in changed if in_flight[o].rollback is not None]
        dead, self._dead_lettering = self._dead_lettering, []

        def done(made: bool) -> None:
            self._end_transition(records, dead, made)

        if not self._write(changed, old_start, done):
            done(True)

    def _end_transition(
        self,
        records: list[tuple[int, InFlightRecord]],
        dead_letters: list[tuple[int, int, str]],
        made: bool,
    ) -> None:
        """The write is answered: commit (locks dropped, released records AVAILABLE, the
        start offset moves, the DLQ gets its runs) or roll back (ACQUIRED by the member
        again; released, or archived at the delivery limit, when the lock expired)."""
        start = self.start_offset
        released = False
        for offset, record in records:
            member = record.rollback
            if member is None:
                continue  # gone with the start offset (move_start_offset)
            record.rollback = None
            lock = record.lock
            if made:
                self._unlock(record)
                if record.state is RecordState.AVAILABLE:
                    self._available += 1
                    released = True
            elif lock is not None and not lock.expired:
                record.state = RecordState.ACQUIRED
                record.member_id = member
            else:
                self._unlock(record)
                released = self._release(record, offset) or released
        if made:
            self._dead_lettering.extend(dead_letters)
        else:
            log.info(
                "The state write of %s-%s-%d was refused: %d acknowledged records rolled back",
                self.group_id,
                self.topic,
                self.partition,
                len(records),
            )
        self._maybe_update_start_offset()
        self._send_dead_letters()
        if released or (self.start_offset != start and self._window_was_full(start)):
            self._on_available()

    # -- release, expiry --------------------------------------------------------------

    def release_acquired_records(self, member_id: str) -> int:
        """A member left (its share session closed): everything it holds goes back.
        Returns how many offsets were released."""
        start = self.start_offset
        released: list[int] = []
        for offset, record in self._in_flight.items():
            if record.state is RecordState.ACQUIRED and record.member_id == member_id:
                self._unlock(record)
                record.member_id = None
                self._release(record, offset)
                released.append(offset)
        count = len(released)
        if count:
            self._maybe_update_start_offset()
            self._write(released, start)
            self._send_dead_letters()
            self._on_available()
        return count

    def _on_lock_expired(self, lock: AcquisitionLockTimerTask) -> None:
        self.locks_expired += 1
        start = self.start_offset
        changed: list[int] = []
        for offset in range(max(lock.first_offset, self.start_offset), lock.last_offset + 1):
            record = self._in_flight.get(offset)
            if record is None or record.lock is not lock or record.rollback is not None:
                continue  # one acknowledged, its write out, is released if that fails
            record.lock = None
            self.acquired_count -= 1
            record.member_id = None
            self._release(record, offset)
            changed.append(offset)
        released = len(changed)
        log.debug(
            "Acquisition lock of %s-%s-%d offsets %d-%d (member %s) expired: %d released",
            self.group_id,
            self.topic,
            self.partition,
            lock.first_offset,
            lock.last_offset,
            lock.member_id,
            released,
        )
        if released:
            self._maybe_update_start_offset()
            self._write(changed, start)
            self._send_dead_letters()
            self._on_available()

    def _release(self, record: InFlightRecord, offset: int) -> bool:
        """ACQUIRED -> AVAILABLE, or archived at the delivery count limit. True when the
        record is available again."""
        if record.delivery_count >= self.config.delivery_count_limit:
            self._archive(record, offset, DELIVERY_COUNT_EXCEEDED)
            return False
        record.state = RecordState.AVAILABLE
        self._available += 1
        return True

    # -- the dead-letter queue (KIP-1191) ---------------------------------------------

    def _dead_lettering_on(self) -> bool:
        dead_letters = self._dead_letters
        return dead_letters is not None and dead_letters.enabled(self.group_id)

    def _archive(self, record: InFlightRecord, offset: int, cause: str) -> None:
        """A REJECTed or exhausted record: ARCHIVING until its DLQ write ends when the
        group has a DLQ, else ARCHIVED at once."""
        if self._dead_lettering_on():
            record.state = RecordState.ARCHIVING
            self._dead_lettering.append((offset, record.delivery_count, cause))
        else:
            record.state = RecordState.ARCHIVED

    def _send_dead_letters(self) -> None:
        """Hand the operation's ARCHIVING offsets to ``dead_letters``, in runs of
        consecutive offsets with one delivery count and cause (after the state write
        that makes them ARCHIVING was handed on: a leader that takes over before the
        DLQ write ends finds them ARCHIVING and writes them again)."""
        pending, dead_letters = self._dead_lettering, self._dead_letters
        if pending and dead_letters is not None:
            self._dead_lettering = []
            for first, last, count, cause in dlq_runs(pending):
                dead_letters.enqueue(self, first, last, count, cause)

    def finish_archiving(self, first: int, last: int) -> None:
        """The DLQ write of ``first``-``last`` ended (written or given up: a record that
        cannot be dead-lettered must not hold the SPSO for ever, as Kafka's
        ``initiateDLQAndArchive``): its ARCHIVING offsets are ARCHIVED."""
        start = self.start_offset
        changed: list[int] = []
        for offset in range(max(first, start), last + 1):
            record = self._in_flight.get(offset)
            if record is not None and record.state is RecordState.ARCHIVING:
                record.state = RecordState.ARCHIVED
                changed.append(offset)
        if not changed:
            return
        self._maybe_update_start_offset()
        self._write(changed, start)
        if self.start_offset != start and self._window_was_full(start):
            self._on_available()

    def _unlock(self, record: InFlightRecord) -> None:
        lock = record.lock
        if lock is None:
            return
        record.lock = None
        self.acquired_count -= 1
        lock.held -= 1
        if lock.held <= 0:
            lock.cancel()

    # -- the start offset -------------------------------------------------------------

    def _maybe_update_start_offset(self) -> None:
        in_flight = self._in_flight
        start, end = self.start_offset, self.end_offset
        while start < end:
            record = in_flight.get(start)
            if record is not None:
                state = record.state
                if (
                    state is not RecordState.ACKNOWLEDGED and state is not RecordState.ARCHIVED
                ) or record.rollback is not None:
                    break  # AVAILABLE, ACQUIRED, ARCHIVING (its DLQ write is not done), or
                    # an acknowledgement whose state write is out
                del in_flight[start]
            start += 1
        self.start_offset = start

    def move_start_offset(self, offset: int) -> None:
        """The log's start moved past the SPSO (retention, DeleteRecords): offsets below
        ``offset`` are gone, their locks dropped."""
        if offset <= self.start_offset or not self.initialized:
            return
        start = self.start_offset
        for gone in [o for o in self._in_flight if o < offset]:
            record = self._in_flight.pop(gone)
            if _available(record):
                self._available -= 1
            record.rollback = None  # its transition has nothing left to end
            self._unlock(record)
        self.start_offset = offset
        self.end_offset = max(self.end_offset, offset)
        self._maybe_update_start_offset()
        self._write([], start)

    def release_all_locks(self) -> None:
        """The partition is no longer led here: every lock is cancelled."""
        for record in self._in_flight.values():
            self._unlock(record)


_DONE_TYPES: dict[int, RecordState] = {
    AcknowledgeType.ACCEPT: RecordState.ACKNOWLEDGED,
    AcknowledgeType.REJECT: RecordState.ARCHIVED,
    AcknowledgeType.GAP: RecordState.ARCHIVED,
}


def _has_renew(batches: list[AcknowledgementBatch]) -> bool:
    return any(AcknowledgeType.RENEW in batch.acknowledge_types for batch in batches)


def _available(record: InFlightRecord) -> bool:
    """AVAILABLE and acquirable: not a RELEASE whose state write is still out."""
    return record.state is RecordState.AVAILABLE and record.rollback is None
