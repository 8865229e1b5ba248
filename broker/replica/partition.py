"""One partition replica on one broker: its log, its role, its high watermark.

The leader appends what producers send and decides the high watermark: the smallest
log-end offset among the in-sync replicas (itself included). Consumers read only below
the high watermark; followers read up to the log end. Followers report how far they
have fetched, which moves the high watermark — and every such move is a state change
that may satisfy a parked DelayedProduce or DelayedFetch, so the replica manager calls
``check_and_complete`` for this partition whenever ``append``/``follower fetch`` return
``hw_changed``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from broker.replica.leader_epoch_cache import LeaderEpochCache
from broker.replica.producer_state import ProducerStateManager
from protocol.record_batch import (
    CorruptRecordError,
    RecordBatchHeader,
    iter_batches,
    validate_batches,
    validate_records,
)

if TYPE_CHECKING:
    from broker.log import AppendInfo, PartitionLog

TopicPartition = tuple[str, int]


@dataclass(slots=True)
class AppendResult:
    error: ErrorCode = ErrorCode.none
    base_offset: int = -1
    last_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    error_message: str | None = None
    hw_changed: bool = False


@dataclass(slots=True)
class ReadResult:
    error: ErrorCode = ErrorCode.none
    records: bytes = b""
    high_watermark: int = -1
    log_start_offset: int = -1
    log_end_offset: int = -1


@dataclass(slots=True)
class FollowerState:
    """What the leader knows of one follower (Kafka's Replica state)."""

    log_end_offset: int = 0
    last_caught_up_time_ms: int = 0
    last_fetch_time_ms: int = 0
    # the leader's log end when this follower last fetched (Kafka's
    # lastFetchLeaderLogEndOffset): reaching it by the next fetch counts as caught up
    last_fetch_leader_log_end_offset: int = 0


@dataclass
class Partition:
    topic: str
    partition: int
    log: PartitionLog
    broker_id: int
    max_message_bytes: int = 1048588
    log_append_time: bool = False
    leader_id: int = -1
    leader_epoch: int = -1
    replicas: list[int] = field(default_factory=list)
    isr: list[int] = field(default_factory=list)
    high_watermark: int = 0
    followers: dict[int, FollowerState] = field(default_factory=dict)
    producers: ProducerStateManager = field(default_factory=ProducerStateManager)
    epoch_cache: LeaderEpochCache = field(default_factory=LeaderEpochCache)

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.broker_id

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    # -- roles -------------------------------------------------------------------------

    def make_leader(self, epoch: int, replicas: list[int], isr: list[int], now_ms: int) -> None:
        self.leader_id = self.broker_id
        self.leader_epoch = epoch
        self.replicas = list(replicas)
        self.isr = list(isr)
        self.followers = {
            r: FollowerState(0, now_ms, now_ms) for r in replicas if r != self.broker_id
        }
        # Batches we write from now on carry ``epoch``; it starts at our log end.
        self.epoch_cache.assign(epoch, self.log_end_offset)
        self.high_watermark = min(
            max(self.high_watermark, self.log_start_offset), self.log_end_offset
        )
        self.maybe_increment_high_watermark()

    def make_follower(self, leader: int, epoch: int, replicas: list[int], isr: list[int]) -> None:
        self.leader_id = leader
        self.leader_epoch = epoch
        self.replicas = list(replicas)
        self.isr = list(isr)
        self.followers = {}

    # -- leader path -------------------------------------------------------------------

    def append_records_to_leader(self, records: bytes, now_ms: int) -> AppendResult:
        """Validate and append a producer's batches; nothing is written if any is bad."""
        if not self.is_leader:
            return AppendResult(ErrorCode.not_leader_or_follower)
        try:
            headers = validate_batches(records)
            if any(header.compression for header in headers):
                _validate_compressed_records(records)
        except CorruptRecordError as exc:
            # Bad bytes are CORRUPT_MESSAGE; well-formed bytes breaking a rule (count vs
            # lastOffsetDelta, record framing) Kafka's INVALID_RECORD; a batch inflating
            # past the bound MESSAGE_TOO_LARGE: the error says which (``error_code``).
            return AppendResult(exc.error_code, error_message=str(exc))
        for header in headers:
            if header.size > self.max_message_bytes:
                return AppendResult(
                    ErrorCode.message_too_large,
                    error_message=f"batch of {header.size} bytes exceeds max.message.bytes "
                    f"{self.max_message_bytes}",
                )
        idempotent = [h for h in headers if h.producer_id >= 0 and h.base_sequence >= 0]
        for header in idempotent:
            verdict = self.producers.check(
                header.producer_id,
                header.producer_epoch,
                header.base_sequence,
                header.base_sequence + header.last_offset_delta,
            )
            if verdict.error is not ErrorCode.none:
                dup = verdict.duplicate_of
                return AppendResult(
                    verdict.error,
                    base_offset=dup.first_offset if dup else -1,
                    last_offset=dup.last_offset if dup else -1,
                    log_start_offset=self.log_start_offset,
                )
        info = self.log.append_as_leader(
            records,
            log_append_time_ms=now_ms if self.log_append_time else None,
            leader_epoch=max(self.leader_epoch, 0),
        )
        if idempotent:
            self._record_producers(info.batches)
        hw_changed = self.maybe_increment_high_watermark()
        return AppendResult(
            base_offset=info.first_offset,
            last_offset=info.last_offset,
            log_append_time_ms=now_ms if self.log_append_time else -1,
            log_start_offset=self.log_start_offset,
            hw_changed=hw_changed,
        )

    def _record_producers(self, batches: list[RecordBatchHeader]) -> None:
        for header in batches:
            if header.producer_id >= 0 and header.base_sequence >= 0:
                self.producers.record(
                    header.producer_id,
                    header.producer_epoch,
                    header.base_sequence,
                    header.base_sequence + header.last_offset_delta,
                    header.base_offset,
                    header.last_offset,
                )

    def maybe_increment_high_watermark(self) -> bool:
        """HW = min log-end offset over the ISR; it only moves forward."""
        if not self.is_leader:
            return False
        candidate = self.log_end_offset
        for replica in self.isr:
            if replica == self.broker_id:
                continue
            state = self.followers.get(replica)
            if state is not None:
                candidate = min(candidate, state.log_end_offset)
        if candidate > self.high_watermark:
            self.high_watermark = candidate
            return True
        return False

    def update_follower(self, replica_id: int, fetch_offset: int, now_ms: int) -> bool:
        """Record a follower's fetch position; True when the high watermark moved.

        A follower fetching at offset N has everything below N (Kafka's fetch-offset
        semantics). One that has caught up with our log end counts as caught up now,
        which is what keeps it in the ISR (``replica.lag.time.max.ms``).
        """
        state = self.followers.get(replica_id)
        if state is None:
            return False
        if fetch_offset >= self.log_end_offset:
            state.last_caught_up_time_ms = now_ms
        elif fetch_offset >= state.last_fetch_leader_log_end_offset:
            # It has what we had at its previous fetch: it was caught up back then.
            state.last_caught_up_time_ms = max(
                state.last_caught_up_time_ms, state.last_fetch_time_ms
            )
        state.log_end_offset = fetch_offset
        state.last_fetch_time_ms = now_ms
        state.last_fetch_leader_log_end_offset = self.log_end_offset
        return self.maybe_increment_high_watermark()

    # -- ISR (leader side) -------------------------------------------------------------

    def out_of_sync_replicas(self, now_ms: int, max_lag_ms: int) -> list[int]:
        """ISR followers not caught up within ``replica.lag.time.max.ms`` (to shrink)."""
        if not self.is_leader:
            return []
        lagging = []
        for replica in self.isr:
            state = self.followers.get(replica)
            if replica == self.broker_id or state is None:
                continue
            if now_ms - state.last_caught_up_time_ms > max_lag_ms:
                lagging.append(replica)
        return lagging

    def should_join_isr(self, replica_id: int) -> bool:
        """A follower outside the ISR has reached the HW in the current epoch (to expand).

        Kafka's rule: its log end is at least the high watermark and at least the start
        offset of the leader's epoch, so it holds every committed record of this epoch.
        """
        if not self.is_leader or replica_id in self.isr:
            return False
        state = self.followers.get(replica_id)
        if state is None:
            return False
        epoch_start = self.epoch_cache.latest_start_offset
        return state.log_end_offset >= self.high_watermark and state.log_end_offset >= epoch_start

    # -- follower path -----------------------------------------------------------------

    def append_records_as_follower(self, records: bytes, leader_high_watermark: int) -> AppendInfo:
        """Store the leader's batches as they are; learn the HW from the leader.

        Raises the log's UnexpectedAppendOffsetError when the batches do not follow our
        log end (the fetcher then truncates and starts over).
        """
        info = self.log.append_as_follower(records)
        for header in info.batches:
            self.epoch_cache.assign(header.partition_leader_epoch, header.base_offset)
        self._record_producers(info.batches)
        self.update_follower_high_watermark(leader_high_watermark)
        return info

    def update_follower_high_watermark(self, leader_high_watermark: int) -> None:
        """A follower's HW is the leader's, bounded by what it has itself."""
        if leader_high_watermark >= 0:
            self.high_watermark = min(leader_high_watermark, self.log_end_offset)

    def truncate_to(self, offset: int) -> None:
        """Drop records at and above ``offset`` (they diverge from the leader's log)."""
        if offset >= self.log_end_offset:
            return
        self.log.truncate_to(offset)
        self.high_watermark = min(self.high_watermark, self.log_end_offset)
        self.rebuild_from_log()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Empty the log and restart it at ``offset`` (below the leader's log start)."""
        self.log.truncate_fully_and_start_at(offset)
        self.high_watermark = offset
        self.epoch_cache.clear()
        self.producers.clear()

    def rebuild_from_log(self) -> None:
        """Rebuild the epoch cache and producer state from the batches in the log.

        Kafka keeps both in checkpoint files and snapshots; reading the batch headers
        once when a partition opens (and after a truncation) gives the same state.
        """
        self.epoch_cache.clear()
        self.producers.clear()
        offset = self.log_start_offset
        end = self.log_end_offset
        while offset < end:
            chunk = self.log.read(offset, 1 << 20, max_offset=end, min_one_batch=True)
            headers = [h for _, h in iter_batches(chunk, allow_partial_tail=True)]
            if not headers:
                break
            for header in headers:
                self.epoch_cache.assign(header.partition_leader_epoch, header.base_offset)
            self._record_producers(headers)
            offset = headers[-1].last_offset + 1

    def last_offset_for_leader_epoch(
        self, current_leader_epoch: int, leader_epoch: int
    ) -> tuple[ErrorCode, int, int]:
        """OffsetForLeaderEpoch on the leader: ``(error, epoch, end_offset)``."""
        if not self.is_leader:
            return ErrorCode.not_leader_or_follower, -1, -1
        if current_leader_epoch >= 0:
            if current_leader_epoch < self.leader_epoch:
                return ErrorCode.fenced_leader_epoch, -1, -1
            if current_leader_epoch > self.leader_epoch:
                return ErrorCode.unknown_leader_epoch, -1, -1
        epoch, end = self.epoch_cache.end_offset_for(leader_epoch, self.log_end_offset)
        return ErrorCode.none, epoch, end

    # -- reads -------------------------------------------------------------------------

    def read(
        self, fetch_offset: int, max_bytes: int, *, up_to_log_end: bool, min_one: bool = True
    ) -> ReadResult:
        """Read for a consumer (below the HW) or a follower (``up_to_log_end``)."""
        if not self.is_leader:
            return ReadResult(ErrorCode.not_leader_or_follower)
        bound = self.log_end_offset if up_to_log_end else self.high_watermark
        result = ReadResult(
            high_watermark=self.high_watermark,
            log_start_offset=self.log_start_offset,
            log_end_offset=self.log_end_offset,
        )
        if fetch_offset < self.log_start_offset or fetch_offset > self.log_end_offset:
            result.error = ErrorCode.offset_out_of_range
            return result
        if fetch_offset >= bound:
            return result
        result.records = self.log.read(
            fetch_offset, max_bytes, max_offset=bound, min_one_batch=min_one
        )
        return result

    def bytes_available(self, fetch_offset: int, up_to_log_end: bool, limit: int) -> int:
        """How many bytes a fetch at ``fetch_offset`` could return now (at most ``limit``)."""
        bound = self.log_end_offset if up_to_log_end else self.high_watermark
        if fetch_offset >= bound or fetch_offset < self.log_start_offset:
            return 0
        return len(self.log.read(fetch_offset, limit, max_offset=bound, min_one_batch=True))


def _validate_compressed_records(records: bytes) -> None:
    """Kafka's LogValidator for compressed batches: inflate (bounded) and check every
    record's framing, so a batch whose CRC is right but whose payload is garbage or a
    decompression bomb never reaches the log. Uncompressed batches are not walked
    record by record here (their bytes are what a reader reads, CRC-checked; a reader
    that decodes records copes with a bad one): that walk would cost ~0.6 µs a record
    on the produce path."""
    view = memoryview(records)
    for position, header in iter_batches(records):
        if header.compression:
            validate_records(view[position : position + header.size])
