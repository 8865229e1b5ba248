"""``__transaction_state`` records: Kafka's ``TransactionLog`` schemas, and where they go.

The :class:`~broker.txn.transaction_state_manager.TransactionStateManager` never touches
a log itself: it encodes a transactional id's new state as one key/value record and
hands it to an injected :class:`TransactionLog`, naming the partition
``partition_for(transactional_id)``; when this broker becomes the leader of a partition
it reads the partition back through the same interface. The broker's log is the
coordinator kit's :class:`~broker.coordinator.state_log.CoordinatorStateLog` over
``__transaction_state`` (:func:`transaction_state_log`); :class:`InMemoryTransactionLog`
here serves unit tests.

The schemas are Kafka's (``TransactionLogKey.json``, ``TransactionLogValue.json``),
declared as data below and compiled by ``broker/coordinator/record_schema.py``:

* key: record type 0, then ``TransactionalId: string``
* value, version 0: ``ProducerId: int64, ProducerEpoch: int16, TransactionTimeoutMs:
  int32, TransactionStatus: int8, TransactionPartitions: nullable [Topic: string,
  PartitionIds: [int32]], TransactionLastUpdateTimestampMs: int64,
  TransactionStartTimestampMs: int64``. An Empty transactional id has null partitions.
* value, version 1: the same fields in the flexible encoding, with Kafka 4's tagged
  fields ``PreviousProducerId`` (tag 0, default -1), ``NextProducerId`` (tag 1, default
  -1) and ``ClientTransactionVersion`` (tag 2, default 0), each written only when it is
  not its default; tags we do not know are skipped.
* a value of ``None`` is a tombstone: the transactional id expired.

Which version is written follows the cluster's finalized ``transaction.version``, as
Kafka's ``TransactionVersion.transactionLogValueVersion``: 0 at level 0, 1 from level 1
(a new Kafka 4 cluster, at level 2, writes version 1). Both versions are always read, so
a partition written before an upgrade (or after a downgrade) loads.

As in Kafka, the last producer epoch is not written, so a coordinator that loads a
partition knows only the current one (and, from version 1, the previous and next
producer ids and the client's transaction version).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import TRANSACTION_STATE_TOPIC
from broker.coordinator.record_schema import Field, RecordType, Schema, Struct, read_int16
from broker.coordinator.state_log import (
    AppendCallback,
    CoordinatorLog,
    CoordinatorStateLog,
    KeyValue,
    plain_records,
)
from broker.server.purgatories import ParkedRequest, PurgatoryName, PurgatoryOutcome
from broker.txn.transaction_config import TransactionConfig
from broker.txn.transaction_metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TopicPartition,
    TransactionMetadata,
    TxnTransitMetadata,
)
from broker.txn.transaction_state import TransactionState, state_from_id
from purgatory import Clock

if TYPE_CHECKING:
    from broker.replica.replica_manager import ReplicaManager

__all__ = ("AppendCallback", "KeyValue")

log = logging.getLogger("broker.txn")

TRANSACTION_STATE_TOPIC_NAME = TRANSACTION_STATE_TOPIC

KEY_VERSION = 0
REQUIRED_ACKS = -1  # Kafka's TransactionLog.EnforcedRequiredAcks

TransactionLog = CoordinatorLog[KeyValue]
"""Where the state manager's records go, and where it reads them back.

``append_to_log`` writes with acks=all within the ``timeout_ms`` it is given (the
transaction's timeout, as in Kafka) and calls ``on_done`` exactly once with the
append's own error; meanwhile the request it serves (``parked_request``) waits in the
Produce purgatory. ``open_log`` hands back the key/values of each batch.
"""


def transaction_state_log(
    replica_manager: ReplicaManager, clock: Clock, config: TransactionConfig
) -> CoordinatorStateLog[KeyValue]:
    """The broker's ``TransactionLog``: ``__transaction_state``, acks=all, loads in
    chunks of ``transaction.state.log.load.buffer.size`` (at least 1 KB)."""
    return CoordinatorStateLog(
        TRANSACTION_STATE_TOPIC_NAME,
        replica_manager,
        clock,
        required_acks=REQUIRED_ACKS,
        timeout_ms=config.request_timeout_ms,  # every append names its own
        load_buffer_size=max(config.transaction_log_load_buffer_size, 1024),
        read_entries=plain_records,
        logger=log,
    )


# ------------------------------------------------------------------- schemas
TRANSACTION_LOG_KEY = Schema(
    "TransactionLogKey", "0", "none", (Field("TransactionalId", "string"),)
)
PARTITIONS_SCHEMA = Struct(
    "PartitionsSchema", (Field("Topic", "string"), Field("PartitionIds", "[]int32"))
)
TRANSACTION_LOG_VALUE = Schema(
    "TransactionLogValue",
    "0-1",
    "1+",
    (
        Field("ProducerId", "int64"),
        Field("ProducerEpoch", "int16"),
        Field("TransactionTimeoutMs", "int32"),
        Field("TransactionStatus", "int8"),
        Field.of("TransactionPartitions", PARTITIONS_SCHEMA, nullable_versions="0+"),
        Field("TransactionLastUpdateTimestampMs", "int64"),
        Field("TransactionStartTimestampMs", "int64"),
        Field("PreviousProducerId", "int64", versions="1+", tag=0, default=-1),
        Field("NextProducerId", "int64", versions="1+", tag=1, default=-1),
        Field("ClientTransactionVersion", "int16", versions="1+", tag=2, default=0),
    ),
)
TRANSACTION_LOG = RecordType(KEY_VERSION, TRANSACTION_LOG_KEY, TRANSACTION_LOG_VALUE)


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
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    client_transaction_version: int = 0

    def to_metadata(self, transactional_id: str) -> TransactionMetadata:
        """Kafka's ``TransactionLog.read``: the last epoch is unknown."""
        return TransactionMetadata(
            transactional_id=transactional_id,
            producer_id=self.producer_id,
            last_producer_id=self.previous_producer_id,
            producer_epoch=self.producer_epoch,
            last_producer_epoch=NO_PRODUCER_EPOCH,
            txn_timeout_ms=self.txn_timeout_ms,
            state=self.state,
            topic_partitions=set(self.topic_partitions),
            txn_start_timestamp=self.txn_start_timestamp,
            txn_last_update_timestamp=self.txn_last_update_timestamp,
            next_producer_id=self.next_producer_id,
            client_transaction_version=self.client_transaction_version,
        )


def value_version(transaction_version_level: int) -> int:
    """``TransactionVersion.transactionLogValueVersion``: flexible from level 1."""
    return 1 if transaction_version_level >= 1 else 0


def key_to_bytes(transactional_id: str) -> bytes:
    return TRANSACTION_LOG.key_bytes({"TransactionalId": transactional_id})


def value_to_bytes(transit: TxnTransitMetadata, transaction_version_level: int = 0) -> bytes:
    """Kafka's ``valueToBytes``: version 0, or 1 from ``transaction.version`` 1."""
    if transit.txn_state is TransactionState.EMPTY and transit.topic_partitions:
        raise ValueError(
            f"Transaction is not expected to have any partitions since its state is "
            f"{transit.txn_state}: {transit}"
        )
    partitions: list[dict[str, Any]] | None = None
    if transit.txn_state is not TransactionState.EMPTY:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(transit.topic_partitions):
            by_topic.setdefault(topic, []).append(partition)
        partitions = [{"Topic": t, "PartitionIds": ps} for t, ps in by_topic.items()]
    values = {
        "ProducerId": transit.producer_id,
        "ProducerEpoch": transit.producer_epoch,
        "TransactionTimeoutMs": transit.txn_timeout_ms,
        "TransactionStatus": transit.txn_state.id,
        "TransactionPartitions": partitions,
        "TransactionLastUpdateTimestampMs": transit.txn_last_update_timestamp,
        "TransactionStartTimestampMs": transit.txn_start_timestamp,
    }
    version = value_version(transaction_version_level)
    if version >= 1:  # tagged fields, each only when it is not its default
        values["PreviousProducerId"] = _unless(transit.last_producer_id, NO_PRODUCER_ID)
        values["NextProducerId"] = _unless(transit.next_producer_id, NO_PRODUCER_ID)
        values["ClientTransactionVersion"] = _unless(transit.client_transaction_version, 0)
    return TRANSACTION_LOG.value_bytes(version, values)


def _unless(value: int, default: int) -> int | None:
    return None if value == default else value


def read_txn_record_key(key: bytes) -> str:
    """The transactional id of a key; ValueError for an unknown key version."""
    version = read_int16(key, 0)
    if version != KEY_VERSION:
        raise ValueError(f"Unknown version {version} from the transaction log message key")
    return str(TRANSACTION_LOG.read_key(key)["TransactionalId"])


def read_txn_record_value(value: bytes) -> TransactionLogValue:
    """A value of version 0 or 1; ValueError for anything else."""
    version = read_int16(value, 0)
    if version not in TRANSACTION_LOG_VALUE.versions:
        raise ValueError(f"Unknown version {version} from the transaction log message value")
    v = TRANSACTION_LOG.read_value(value)[1]
    partitions = frozenset(
        (p["Topic"], partition)
        for p in v["TransactionPartitions"] or ()
        for partition in p["PartitionIds"]
    )
    return TransactionLogValue(
        v["ProducerId"],
        v["ProducerEpoch"],
        v["TransactionTimeoutMs"],
        state_from_id(v["TransactionStatus"]),
        partitions,
        v["TransactionLastUpdateTimestampMs"],
        v["TransactionStartTimestampMs"],
        _or(v.get("PreviousProducerId"), NO_PRODUCER_ID),
        _or(v.get("NextProducerId"), NO_PRODUCER_ID),
        _or(v.get("ClientTransactionVersion"), 0),
    )


def _or(value: Any, default: int) -> int:
    return default if value is None else int(value)


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
        on_done: AppendCallback | None = None,
        parked_request: ParkedRequest | None = None,
        *,
        timeout_ms: int | None = None,
        producer: tuple[int, int] | None = None,
    ) -> None:
        failure, self.fail_next = self.fail_next, None
        assert timeout_ms is not None, "the state manager names every append's timeout"
        self.timeouts.append(timeout_ms)
        if failure is not None:
            if on_done is not None:
                on_done(failure)
            return
        self._entries.extend((partition, k, v) for k, v in records)
        if on_done is None:
            return
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
