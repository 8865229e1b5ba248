"""One partition replica on one broker: its log, its role, its high watermark.

The leader appends what producers send and decides the high watermark: the smallest
log-end offset among the in-sync replicas (itself included). Consumers read only below
the high watermark; followers read up to the log end. Followers report how far they
have fetched, which moves the high watermark — and every such move is a state change
that may satisfy a parked DelayedProduce or DelayedFetch, so the replica manager calls
``check_and_complete`` for this partition whenever ``append``/``follower fetch`` return
``hw_changed``.

Beside the log it keeps what Kafka's UnifiedLog keeps beside its segments: the producer
state (``producer_state.py``: idempotent sequences, open transactions) and the aborted
transaction index (``broker/log/transaction_index.py``). Both are updated by every append
— a client's, the transaction coordinator's markers (``AppendOrigin.COORDINATOR``), a
follower's replica of its leader's batches — and rebuilt from the log when the partition
opens or is truncated. From them come the last stable offset (``last_stable_offset``),
the bound of a read_committed read, and the aborted transactions such a read returns.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from broker.log.disk_log import DiskLog
from broker.log.transaction_index import AbortedTxn, TransactionIndex
from broker.replica.append_origin import AppendOrigin
from broker.replica.leader_epoch_cache import LeaderEpochCache
from broker.replica.producer_state import (
    ProducerAppendAnalysis,
    ProducerStateEntry,
    ProducerStateError,
    ProducerStateManager,
    analyze_and_validate_producer_state,
)
from broker.replica.timestamp_validation import (
    INVALID_TIMESTAMP_MESSAGE,
    LONG_MAX,
    RecordErrors,
    timestamp_record_errors,
)
from protocol.control_batch import EndTransactionMarker, parse_control_batch
from protocol.record_batch import (
    ATTR_COMPRESSION_MASK,
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
    # the records a refused append names (ProduceResponse record_errors): (index of
    # the record in its batch, message)
    record_errors: RecordErrors = ()


@dataclass(slots=True)
class ReadResult:
    error: ErrorCode = ErrorCode.none
    records: bytes = b""
    high_watermark: int = -1
    log_start_offset: int = -1
    log_end_offset: int = -1
    last_stable_offset: int = -1
    # read_committed reads only: the aborted transactions overlapping ``records``
    aborted_transactions: list[AbortedTxn] | None = None
    # Kafka's delayedRemoteStorageFetch: a consumer's read the remote tier must answer
    # (broker/remote/remote_log_manager.py's RemoteStorageFetchInfo)
    delayed_remote_storage_fetch: object | None = None


@dataclass(slots=True)
class FollowerState:
    """What the leader knows of one follower (Kafka's Replica state)."""

    log_end_offset: int = 0
    last_caught_up_time_ms: int = 0
    last_fetch_time_ms: int = 0
    # the leader's log end when this follower last fetched (Kafka's
    # lastFetchLeaderLogEndOffset): reaching it by the next fetch counts as caught up
    last_fetch_leader_log_end_offset: int = 0
    # the follower's log start, as its last fetch reported it (-1: not yet known, as
    # Kafka's UnifiedLog.UNKNOWN_OFFSET): the partition's low watermark reads it
    log_start_offset: int = -1


@dataclass
class Partition:
    topic: str
    partition: int
    log: PartitionLog
    broker_id: int
    max_message_bytes: int = 1048588
    log_append_time: bool = False
    # message.timestamp.{before,after}.max.ms: CreateTime bounds (timestamp_validation.py)
    timestamp_before_max_ms: int = LONG_MAX
    timestamp_after_max_ms: int = 3_600_000
    leader_id: int = -1
    leader_epoch: int = -1
    replicas: list[int] = field(default_factory=list)
    isr: list[int] = field(default_factory=list)
    high_watermark: int = 0
    # KIP-966's strict min ISR: the HW stays while the ISR is smaller than this (capped
    # by the replica count); 0 when eligible leader replicas are off.
    min_isr: int = 0
    followers: dict[int, FollowerState] = field(default_factory=dict)
    producers: ProducerStateManager = field(default_factory=ProducerStateManager)
    epoch_cache: LeaderEpochCache = field(default_factory=LeaderEpochCache)
    txn_index: TransactionIndex = field(default_factory=TransactionIndex)
    # Tiered storage (broker/remote/): the first offset the remote tier holds, -1 when it
    # holds none; kept by the RemoteLogManager from the remote log metadata.
    remote_log_start_offset: int = -1

    def __post_init__(self) -> None:
        if isinstance(self.log, DiskLog):  # Kafka's .txnindex files beside the segments
            self.txn_index = TransactionIndex(self.log.directory, self.log.segment_base_offsets)

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
        """Kafka's logStartOffset: the remote tier's start when it holds older offsets
        than the local log, else the local log's."""
        local = self.log.log_start_offset
        remote = self.remote_log_start_offset
        return remote if 0 <= remote < local else local

    @property
    def local_log_start_offset(self) -> int:
        """Kafka's localLogStartOffset: below it, only the remote tier has the records."""
        return self.log.log_start_offset

    @property
    def last_stable_offset(self) -> int:
        """Kafka's LSO: the first offset of the earliest transaction not yet decided, or
        decided with its marker not yet below the HW — when that is below the HW — else
        the HW. read_committed consumers read below it."""
        hw = self.high_watermark
        # Unreplicated transactions end once the HW passes their markers (Kafka drops
        # them on each HW update; the HW only moves forward, so doing it here is the same).
        first = self.producers.first_unstable_offset_at(hw)
        if first is not None:
            first = max(first, self.log_start_offset)
            if first < hw:
                return first
        return hw

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

    def append_records_to_leader(
        self,
        records: bytes,
        now_ms: int,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        transaction_version: int = 0,
    ) -> AppendResult:
        """Validate and append a producer's batches; nothing is written if any is bad.

        A client's retry of one of a producer's last five batches is answered with the
        original offsets (and that batch's timestamp as log append time, as Kafka does)
        and not written again. ``origin`` COORDINATOR lets the transaction coordinator
        write COMMIT/ABORT markers, which a client may not (INVALID_RECORD). A client's
        CreateTime records out of the timestamp bounds are INVALID_TIMESTAMP
        (``timestamp_validation.py``), checked before the producer state, as Kafka does.
        ``now_ms`` is the wall clock: it bounds timestamps and stamps LogAppendTime.
        """
        if not self.is_leader:
            return AppendResult(ErrorCode.not_leader_or_follower)
        try:
            headers = validate_batches(records)
        except CorruptRecordError as exc:
            # Bad bytes are CORRUPT_MESSAGE; well-formed bytes breaking a rule (count vs
            # lastOffsetDelta, record framing) Kafka's INVALID_RECORD: ``error_code``.
            return AppendResult(exc.error_code, error_message=str(exc))
        compressed = idempotent = False
        for header in headers:  # one pass: the log is handed these headers, not the bytes
            if header.size > self.max_message_bytes:
                return AppendResult(
                    ErrorCode.message_too_large,
                    error_message=f"batch of {header.size} bytes exceeds max.message.bytes "
                    f"{self.max_message_bytes}",
                )
            if origin is AppendOrigin.CLIENT:
                refused = _client_batch_error(header)
                if refused is not None:
                    return AppendResult(ErrorCode.invalid_record, error_message=refused)
            compressed = compressed or header.attributes & ATTR_COMPRESSION_MASK != 0
            idempotent = idempotent or header.producer_id >= 0
        if compressed:
            try:
                _validate_compressed_records(records, _inflate_bound(self.max_message_bytes))
            except CorruptRecordError as exc:  # a batch inflating past the bound too
                return AppendResult(exc.error_code, error_message=str(exc))
        if origin is AppendOrigin.CLIENT and not self.log_append_time:
            try:
                record_errors = timestamp_record_errors(
                    records,
                    headers,
                    now_ms,
                    self.timestamp_before_max_ms,
                    self.timestamp_after_max_ms,
                    _inflate_bound(self.max_message_bytes),
                )
            except CorruptRecordError as exc:  # records that do not add up
                return AppendResult(exc.error_code, error_message=str(exc))
            if record_errors:
                return AppendResult(
                    ErrorCode.invalid_timestamp,
                    log_start_offset=self.log_start_offset,
                    error_message=INVALID_TIMESTAMP_MESSAGE,
                    record_errors=record_errors,
                )
        append_time = now_ms if self.log_append_time else None
        analysis = None
        if idempotent:
            # The headers as the log will hold them: offsets from our log end, and the
            # append time for LogAppendTime topics (the producer state records both).
            offset = self.log_end_offset
            for header in headers:
                header.base_offset = offset
                offset = header.next_offset
                if append_time is not None:
                    header.max_timestamp = append_time
            try:
                analysis = analyze_and_validate_producer_state(
                    self.producers,
                    _with_markers(records, headers, strict=True),
                    origin,
                    transaction_version,
                )
            except ProducerStateError as exc:
                return AppendResult(
                    exc.error, error_message=str(exc), log_start_offset=self.log_start_offset
                )
            except CorruptRecordError as exc:  # a marker that does not parse
                return AppendResult(exc.error_code, error_message=str(exc))
            duplicate = analysis.duplicate
            if duplicate is not None:
                return AppendResult(
                    base_offset=duplicate.first_offset,
                    last_offset=duplicate.last_offset,
                    log_append_time_ms=duplicate.timestamp,
                    log_start_offset=self.log_start_offset,
                )
        info = self.log.append_as_leader(
            records,
            log_append_time_ms=append_time,
            leader_epoch=max(self.leader_epoch, 0),
            validated=headers,
        )
        if analysis is not None:
            self._apply_producer_state(analysis)
        hw_changed = self.maybe_increment_high_watermark()
        return AppendResult(
            base_offset=info.first_offset,
            last_offset=info.last_offset,
            log_append_time_ms=append_time if append_time is not None else -1,
            log_start_offset=self.log_start_offset,
            hw_changed=hw_changed,
        )

    def _apply_producer_state(self, analysis: ProducerAppendAnalysis) -> None:
        """After the append: the staged producer entries go in, ended transactions
        complete, aborted ones enter the transaction index (Kafka's UnifiedLog.append)."""
        for info in analysis.updated_producers.values():
            self.producers.update(info)
        for txn in analysis.completed_txns:
            if txn.is_aborted:
                lso = self.producers.last_stable_offset(txn)
                self.txn_index.append(
                    AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, lso)
                )
            self.producers.complete_txn(txn)

    def _replay_producer_state(self, records: bytes, headers: list[RecordBatchHeader]) -> None:
        """A follower's (or a reopened log's) batches: producer state as the leader had it."""
        if any(h.producer_id >= 0 for h in headers):
            batches = _with_markers(records, headers, strict=False)
            analysis = analyze_and_validate_producer_state(
                self.producers, batches, AppendOrigin.REPLICATION
            )
            self._apply_producer_state(analysis)

    def maybe_increment_high_watermark(self) -> bool:
        """HW = min log-end offset over the ISR; it only moves forward, and not at all
        while the ISR is under min ISR (Kafka 4's ``maybeIncrementLeaderHW``)."""
        if not self.is_leader:
            return False
        if self.min_isr and len(self.isr) < min(self.min_isr, len(self.replicas) or 1):
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
            self.producers.on_high_watermark_updated(candidate)
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
        advanced = fetch_offset > state.log_end_offset
        log_end_offset = self.log.log_end_offset
        if fetch_offset >= log_end_offset:
            state.last_caught_up_time_ms = now_ms
        elif fetch_offset >= state.last_fetch_leader_log_end_offset:
            # It has what we had at its previous fetch: it was caught up back then.
            state.last_caught_up_time_ms = max(
                state.last_caught_up_time_ms, state.last_fetch_time_ms
            )
        state.log_end_offset = fetch_offset
        state.last_fetch_time_ms = now_ms
        state.last_fetch_leader_log_end_offset = log_end_offset
        # The HW is a minimum over the ISR: only a follower that moved up can raise it
        # (every other cause — an append, an ISR change — checks it itself).
        return self.maybe_increment_high_watermark() if advanced else False

    def update_follower_log_start(self, replica_id: int, log_start_offset: int) -> bool:
        """A follower's fetch reported its log start; True when it changed (a parked
        DeleteRecords may now be answered)."""
        state = self.followers.get(replica_id)
        if state is None or log_start_offset < 0 or state.log_start_offset == log_start_offset:
            return False
        state.log_start_offset = log_start_offset
        return True

    def low_watermark_if_leader(self, is_alive: Callable[[int], bool]) -> int:
        """Kafka's lowWatermarkIfLeader: the lowest log start offset of this leader and
        of its followers on live brokers (a follower not yet heard from counts as -1)."""
        low = self.log_start_offset
        for replica_id, state in self.followers.items():
            if state.log_start_offset < low and is_alive(replica_id):
                low = state.log_start_offset
        return low

    def maybe_increment_log_start_offset(self, leader_log_start_offset: int) -> bool:
        """Follower: follow the leader's log start from its fetch response (Kafka's
        ``maybeIncrementLogStartOffset`` with LeaderOffsetIncremented), never past
        what this replica has. True when the log start moved."""
        offset = min(leader_log_start_offset, self.log_end_offset)
        if offset <= self.log_start_offset:
            return False
        self.log.delete_records_before(offset)
        self.high_watermark = max(self.high_watermark, self.log_start_offset)
        self.on_log_start_offset_changed()
        return True

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
        self._replay_producer_state(records, info.batches)
        self.update_follower_high_watermark(leader_high_watermark)
        return info

    def update_follower_high_watermark(self, leader_high_watermark: int) -> None:
        """A follower's HW is the leader's, bounded by what it has itself."""
        if leader_high_watermark >= 0:
            self.high_watermark = min(leader_high_watermark, self.log_end_offset)
            self.producers.on_high_watermark_updated(self.high_watermark)

    def truncate_to(self, offset: int) -> None:
        """Drop records at and above ``offset`` (they diverge from the leader's log).

        Nothing to drop still drops the epochs that start at our log end (Kafka's
        ``UnifiedLog.truncateTo``): a leader notes its epoch at its log end before it
        appends, and one that lost its leadership before appending has an epoch no
        record carries, which a follower must not keep asking the new leader about."""
        if offset >= self.log_end_offset:
            self.epoch_cache.truncate_from_end(self.log_end_offset)
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
        self.txn_index.reset()

    def rebuild_from_log(self) -> None:
        """Rebuild the epoch cache, the producer state and the transaction index from
        the batches in the log.

        Kafka keeps these in checkpoint files, producer snapshots and ``.txnindex``
        files, and replays the segments it recovers; reading the batch headers (and the
        transaction markers' records) once when a partition opens, and after a
        truncation, gives the same state: sequences, epochs, open transactions and their
        first offsets, aborted transactions, coordinator epochs.
        """
        self.epoch_cache.clear()
        self.producers.clear()
        self.txn_index.reset()
        offset = self.local_log_start_offset
        end = self.log_end_offset
        while offset < end:
            chunk = self.log.read(offset, 1 << 20, max_offset=end, min_one_batch=True)
            headers = [h for _, h in iter_batches(chunk, allow_partial_tail=True)]
            if not headers:
                break
            for header in headers:
                self.epoch_cache.assign(header.partition_leader_epoch, header.base_offset)
            self._replay_producer_state(chunk, headers)
            offset = headers[-1].last_offset + 1

    def on_log_start_offset_changed(self) -> None:
        """Retention or DeleteRecords moved the log start: what lay below it goes."""
        start = self.log_start_offset
        self.producers.on_log_start_offset_incremented(start)
        self.txn_index.delete_before(start)

    def active_producers(self) -> list[ProducerStateEntry]:
        """DescribeProducers: every producer this replica has state for."""
        return list(self.producers.active_producers().values())

    def remove_expired_producers(self, now_ms: int, expiration_ms: int) -> list[int]:
        return self.producers.remove_expired_producers(now_ms, expiration_ms)

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
        self,
        fetch_offset: int,
        max_bytes: int,
        *,
        up_to_log_end: bool,
        min_one: bool = True,
        read_committed: bool = False,
    ) -> ReadResult:
        """Read for a consumer (below the HW; below the LSO for ``read_committed``, with
        the aborted transactions the records overlap) or a follower (``up_to_log_end``)."""
        if self.leader_id != self.broker_id:
            return ReadResult(ErrorCode.not_leader_or_follower)
        # Every fetch of every partition comes here (and most find nothing new): each
        # offset is read once, not once per use.
        read_committed = read_committed and not up_to_log_end
        log = self.log
        lso = self.last_stable_offset
        bound = self._fetch_bound(up_to_log_end, read_committed)  # (a planted bug's seam)
        log_end = log.log_end_offset
        local_start = log.log_start_offset
        remote_start = self.remote_log_start_offset
        log_start = remote_start if 0 <= remote_start < local_start else local_start
        # (positional: ReadResult's fields in order, the cheapest way to build one)
        result = ReadResult(ErrorCode.none, b"", self.high_watermark, log_start, log_end, lso)
        if fetch_offset < log_start or fetch_offset > log_end:
            result.error = ErrorCode.offset_out_of_range
            return result
        if fetch_offset < local_start:  # in the remote tier only
            result.error = ErrorCode.offset_moved_to_tiered_storage
            return result
        if read_committed:
            result.aborted_transactions = []
        if fetch_offset >= bound:
            return result
        result.records = log.read(fetch_offset, max_bytes, max_offset=bound, min_one_batch=min_one)
        if read_committed and result.records:
            upper = fetch_offset
            for _, header in iter_batches(result.records, allow_partial_tail=True):
                upper = header.next_offset
            result.aborted_transactions = self.txn_index.collect_aborted_txns(fetch_offset, upper)
        return result

    def _fetch_bound(self, up_to_log_end: bool, read_committed: bool) -> int:
        """Kafka's FetchIsolation: log end (followers), LSO (read_committed), else HW."""
        if up_to_log_end:
            return self.log.log_end_offset
        return self.last_stable_offset if read_committed else self.high_watermark

    def bytes_available(
        self, fetch_offset: int, up_to_log_end: bool, limit: int, read_committed: bool = False
    ) -> int:
        """How many bytes a fetch at ``fetch_offset`` could return now (at most ``limit``)."""
        bound = self._fetch_bound(up_to_log_end, read_committed and not up_to_log_end)
        if fetch_offset >= bound or fetch_offset < self.local_log_start_offset:
            return 0
        return len(self.log.read(fetch_offset, limit, max_offset=bound, min_one_batch=True))


#: The most a compressed batch may inflate to: 16 x max.message.bytes, at least 16 MiB.
#: Producers compress batches of ``batch.size`` (16 KiB by default) up to a request of
#: max.message.bytes, so real batches stay far below; a bomb is refused after inflating
#: at most this much (~50 ms of zstd on the event loop for the 16 MiB floor).
_MIN_INFLATE_BOUND = 16 * 1024 * 1024


def _inflate_bound(max_message_bytes: int) -> int:
    return max(_MIN_INFLATE_BOUND, 16 * max_message_bytes)


def _validate_compressed_records(records: bytes, max_decompressed_bytes: int) -> None:
    """Kafka's LogValidator for compressed batches: inflate (bounded) and check every
    record's framing, so a batch whose CRC is right but whose payload is garbage or a
    decompression bomb never reaches the log. Uncompressed batches are not walked
    record by record here (their bytes are what a reader reads, CRC-checked; a reader
    that decodes records copes with a bad one): that walk would cost ~0.6 µs a record
    on the produce path."""
    view = memoryview(records)
    for position, header in iter_batches(records):
        if header.compression:
            validate_records(view[position : position + header.size], max_decompressed_bytes)


def _client_batch_error(header: RecordBatchHeader) -> str | None:
    """Kafka's LogValidator rules for a client's batch, beyond framing (INVALID_RECORD)."""
    if header.is_control:
        return "Clients are not allowed to write control records"
    if header.producer_id >= 0 and header.base_sequence < 0:
        return (
            f"Invalid sequence number {header.base_sequence} in record batch with "
            f"producerId {header.producer_id}"
        )
    return None


def _with_markers(
    records: bytes, headers: list[RecordBatchHeader], *, strict: bool
) -> list[tuple[RecordBatchHeader, EndTransactionMarker | None]]:
    """Each batch with the COMMIT/ABORT marker it carries, if it is a control batch.

    ``headers`` are the batches of ``records`` in order from position 0. ``strict`` (a
    leader's append) raises CorruptRecordError for a marker that does not parse; a
    replica or a replay takes it as no marker.
    """
    out: list[tuple[RecordBatchHeader, EndTransactionMarker | None]] = []
    view = memoryview(records)
    position = 0
    for header in headers:
        marker = None
        if header.is_control and header.producer_id >= 0:
            try:
                marker = parse_control_batch(view[position : position + header.size])
            except CorruptRecordError:
                if strict:
                    raise
        out.append((header, marker))
        position += header.size
    return out
