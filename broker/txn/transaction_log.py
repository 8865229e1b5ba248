"""``__transaction_state`` records: Kafka's ``TransactionLog`` schemas, and where they go.

The :class:`~broker.txn.transaction_state_manager.TransactionStateManager` never touches
a log itself: it encodes a transactional id's new state as one key/value record and
hands it to an injected :class:`TransactionLog`, naming the partition
``partition_for(transactional_id)``; when this broker becomes the leader of a partition
it reads the partition back through the same interface. The broker's log is
:class:`~broker.txn.transaction_state_log.TransactionStateTopicLog` (the replica
manager); :class:`InMemoryTransactionLog` here serves unit tests.

Encoding, as Kafka's (``TransactionLogKey.json``, ``TransactionLogValue.json``); every
key and value starts with an int16 schema version:

* key, version 0: ``transactional_id: string``
* value, version 0 (written): ``producer_id: int64, producer_epoch: int16,
  transaction_timeout_ms: int32, transaction_status: int8, transaction_partitions:
  nullable [topic: string, partition_ids: [int32]], last_update_timestamp_ms: int64,
  start_timestamp_ms: int64``. An Empty transactional id has null partitions.
* value, version 1 (read): the same fields in the flexible encoding (compact strings
  and arrays, tagged fields; the tags Kafka 4 adds are skipped).
* a value of ``None`` is a tombstone: the transactional id expired.

As in Kafka, the last producer id and epoch are not written, so a coordinator that
loads a partition knows only the current ones.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import TRANSACTION_STATE_TOPIC
from broker.server.purgatories import ParkedRequest, PurgatoryName, PurgatoryOutcome
from broker.txn.transaction_metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TopicPartition,
    TransactionMetadata,
    TxnTransitMetadata,
)
from broker.txn.transaction_state import TransactionState, state_from_id

log = logging.getLogger("broker.txn")

TRANSACTION_STATE_TOPIC_NAME = TRANSACTION_STATE_TOPIC

KeyValue = tuple[bytes, bytes | None]
AppendCallback = Callable[[ErrorCode], None]

KEY_VERSION = 0
VALUE_VERSION = 0


class TransactionLog(Protocol):
    """Where the state manager's records go, and where it reads them back.

    ``append_to_log`` writes with acks=all and calls ``on_done`` exactly once with the
    append's own error: NONE once the in-sync replicas have the records (possibly
    before it returns), else e.g. NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT (after
    ``timeout_ms``), NOT_LEADER_OR_FOLLOWER. Meanwhile the request it serves
    (``parked_request``) waits in the Produce purgatory and is told so.

    ``open_log`` reads the partition back for a load: the key/values of each record
    batch from the log start up to the log end it had when it was opened, one list per
    batch, read when the iterator gets there; None when this broker has no online
    replica of the partition (yet).
    """

    def append_to_log(
        self,
        partition: int,
        records: list[KeyValue],
        timeout_ms: int,
        on_done: AppendCallback,
        parked_request: ParkedRequest | None = None,
    ) -> None: ...

    def open_log(self, partition: int) -> Iterator[list[KeyValue]] | None: ...


# ------------------------------------------------------------------- records
@dataclass(frozen=True, slots=True)
class TransactionLogValue:
    """A decoded value: what a load rebuilds a :class:`TransactionMetadata` from."""

    producer_id: int
    producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    topic_partitions: frozenset[TopicPartition]
    txn_last_update_timestamp: int
    txn_start_timestamp: int

    def to_metadata(self, transactional_id: str) -> TransactionMetadata:
        """Kafka's ``readTxnRecordValue``: last producer id and epoch are unknown."""
        return TransactionMetadata(
            transactional_id=transactional_id,
            producer_id=self.producer_id,
            last_producer_id=NO_PRODUCER_ID,
            producer_epoch=self.producer_epoch,
            last_producer_epoch=NO_PRODUCER_EPOCH,
            txn_timeout_ms=self.txn_timeout_ms,
            state=self.state,
            topic_partitions=set(self.topic_partitions),
            txn_start_timestamp=self.txn_start_timestamp,
            txn_last_update_timestamp=self.txn_last_update_timestamp,
        )


def key_to_bytes(transactional_id: str) -> bytes:
    raw = transactional_id.encode("utf-8")
    return struct.pack(">hh", KEY_VERSION, len(raw)) + raw


def value_to_bytes(transit: TxnTransitMetadata) -> bytes:
    """Kafka's ``valueToBytes`` (value version 0)."""
    if transit.txn_state is TransactionState.EMPTY and transit.topic_partitions:
        raise ValueError(
            f"Transaction is not expected to have any partitions since its state is "
            f"{transit.txn_state}: {transit}"
        )
    out = bytearray(
        struct.pack(
            ">hqhib",
            VALUE_VERSION,
            transit.producer_id,
            transit.producer_epoch,
            transit.txn_timeout_ms,
            transit.txn_state.id,
        )
    )
    if transit.txn_state is TransactionState.EMPTY:
        out += struct.pack(">i", -1)
    else:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(transit.topic_partitions):
            by_topic.setdefault(topic, []).append(partition)
        out += struct.pack(">i", len(by_topic))
        for topic, partitions in by_topic.items():
            raw = topic.encode("utf-8")
            out += struct.pack(">h", len(raw)) + raw
            out += struct.pack(f">i{len(partitions)}i", len(partitions), *partitions)
    out += struct.pack(">qq", transit.txn_last_update_timestamp, transit.txn_start_timestamp)
    return bytes(out)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def unpack(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return int(value)

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            byte = self.data[self.pos]
            self.pos += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise ValueError("varint too long")

    def raw(self, n: int) -> bytes:
        chunk = self.data[self.pos : self.pos + n]
        if len(chunk) != n:
            raise ValueError("truncated record")
        self.pos += n
        return bytes(chunk)

    def string(self, compact: bool) -> str:
        n = self.uvarint() - 1 if compact else self.unpack(">h")
        if n < 0:
            raise ValueError("null where a string is required")
        return self.raw(n).decode("utf-8")

    def array_length(self, compact: bool) -> int:
        return self.uvarint() - 1 if compact else self.unpack(">i")

    def skip_tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self.raw(self.uvarint())


def read_txn_record_key(key: bytes) -> str:
    """The transactional id of a key; ValueError for an unknown key version."""
    reader = _Reader(key)
    version = reader.unpack(">h")
    if version != KEY_VERSION:
        raise ValueError(f"Unknown version {version} from the transaction log message key")
    return reader.string(False)


def read_txn_record_value(value: bytes) -> TransactionLogValue:
    """A value of version 0 or 1; ValueError for anything else."""
    reader = _Reader(value)
    version = reader.unpack(">h")
    if version not in (0, 1):
        raise ValueError(f"Unknown version {version} from the transaction log message value")
    compact = version >= 1
    producer_id = reader.unpack(">q")
    producer_epoch = reader.unpack(">h")
    timeout_ms = reader.unpack(">i")
    state = state_from_id(reader.unpack(">b"))
    partitions: set[TopicPartition] = set()
    for _ in range(max(reader.array_length(compact), 0)):
        topic = reader.string(compact)
        for _ in range(max(reader.array_length(compact), 0)):
            partitions.add((topic, reader.unpack(">i")))
        if compact:
            reader.skip_tagged_fields()
    last_update = reader.unpack(">q")
    start = reader.unpack(">q")
    if compact:
        reader.skip_tagged_fields()
    return TransactionLogValue(
        producer_id, producer_epoch, timeout_ms, state, frozenset(partitions), last_update, start
    )


def decode_all(records: Iterable[KeyValue]) -> dict[str, TransactionLogValue | None]:
    """Replay a partition: the last record of each transactional id wins (what compaction
    keeps); None for an id whose last record is a tombstone. Records that do not parse
    are skipped with a warning."""
    out: dict[str, TransactionLogValue | None] = {}
    for key, value in records:
        try:
            transactional_id = read_txn_record_key(key)
            out[transactional_id] = None if value is None else read_txn_record_value(value)
        except (struct.error, ValueError, IndexError, UnicodeDecodeError) as exc:
            log.warning("Skipping malformed %s record: %s", TRANSACTION_STATE_TOPIC_NAME, exc)
    return out


# ------------------------------------------------------------ in-memory log
class InMemoryTransactionLog:
    """A :class:`TransactionLog` in a list, for unit tests.

    Appends complete at once unless ``hold`` is set: then the append is written but its
    callback waits for :meth:`complete` (as a lagging ISR would), and the request it
    serves waits in the Produce purgatory meanwhile. ``fail_next`` fails the next append
    with that error, writing nothing.
    """

    def __init__(self) -> None:
        self._entries: list[tuple[int, bytes, bytes | None]] = []
        self.fail_next: ErrorCode | None = None
        self.hold = False
        self.waiting: list[tuple[AppendCallback, ParkedRequest | None]] = []
        self.timeouts: list[int] = []
        # Partitions without an online replica (open_log answers None).
        self.offline: set[int] = set()

    def append_to_log(
        self,
        partition: int,
        records: list[KeyValue],
        timeout_ms: int,
        on_done: AppendCallback,
        parked_request: ParkedRequest | None = None,
    ) -> None:
        failure, self.fail_next = self.fail_next, None
        self.timeouts.append(timeout_ms)
        if failure is not None:
            on_done(failure)
            return
        self._entries.extend((partition, k, v) for k, v in records)
        if self.hold:
            if parked_request is not None:
                parked_request.parked_in(PurgatoryName.PRODUCE)
            self.waiting.append((on_done, parked_request))
            return
        on_done(ErrorCode.none)

    def complete(self, error: ErrorCode = ErrorCode.none) -> None:
        """The oldest held append is replicated (NONE) or failed."""
        on_done, parked_request = self.waiting.pop(0)
        if parked_request is not None:
            parked_request.purgatory_done(
                PurgatoryOutcome.EXPIRED
                if error is ErrorCode.request_timed_out
                else PurgatoryOutcome.COMPLETED
            )
        on_done(error)

    def open_log(self, partition: int) -> Iterator[list[KeyValue]] | None:
        """One record a "batch", up to the end the partition has now."""
        if partition in self.offline:
            return None
        return iter([[record] for record in self.records(partition)])

    def records(self, partition: int | None = None) -> list[KeyValue]:
        return [(k, v) for p, k, v in self._entries if partition is None or p == partition]

    def states(self, transactional_id: str) -> list[TransactionState | None]:
        """Every state written for ``transactional_id``, in order (None: tombstone)."""
        out: list[TransactionState | None] = []
        for key, value in self.records():
            if read_txn_record_key(key) == transactional_id:
                out.append(None if value is None else read_txn_record_value(value).state)
        return out
