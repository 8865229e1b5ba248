"""Kafka's ``TransactionStateManager``: the transactional ids this broker coordinates.

The coordinator (``transaction_coordinator.py``) decides what happens to a transaction;
this component keeps the transactions and makes their state durable, as Kafka's does:

* **the cache** (``transactionMetadataCache``): per ``__transaction_state`` partition this
  broker leads, its coordinator epoch (the partition's leader epoch) and the
  :class:`~broker.txn.transaction_metadata.TransactionMetadata` of each transactional id;
* **appends** (``append_transaction_to_log``): a prepared transition is written as one
  record to partition ``partition_for(transactional_id)`` through an injected
  :class:`~broker.txn.transaction_log.TransactionLog`, with acks=all and the
  transaction's timeout, and made current only in the append's callback, once the
  in-sync replicas have it and only if the partition's coordinator epoch has not moved
  meanwhile; a failed append clears the pending state and answers Kafka's mapped error;
* **load and unload**: when this broker becomes the leader of a partition it reads the
  partition back (``load_transactions_for_txn_topic_partition``) in slices on the
  injected :class:`~broker.coordinator.coordinator_loader.LoadScheduler` (the broker's: a couple of
  milliseconds per event-loop iteration, as Kafka loads on a scheduler thread), keeping
  each id's last record and decoding only those, installs it if this broker still leads
  the partition at that coordinator epoch, and hands the transactions caught between
  PrepareCommit/Abort and Complete to the marker channel; when it stops leading it, it
  drops them or gives the load up. Requests for a partition being loaded get
  COORDINATOR_LOAD_IN_PROGRESS, for a partition not led here NOT_COORDINATOR;
* **expiry** of idle transactional ids (``transactional.id.expiration.ms``, checked
  every ``transaction.remove.expired.transaction.cleanup.interval.ms``): tombstones
  written, then the ids forgotten; and the list of **timed-out transactions** the
  coordinator aborts;
* **placement**: ``partition_for`` (Java's ``String.hashCode``, as for groups), the
  creation of ``__transaction_state`` on first use, and who coordinates an id.

Where this differs from Kafka:

* A partition loads in slices on the event loop, not on a thread (``coordinator_loader``
  says why), and stays loading while its replica is not online. Unloading is at once.
* ``__transaction_state`` is created with the replication factor capped by the live
  brokers, and ``min.insync.replicas`` capped by that factor (Kafka refuses to create
  it with fewer brokers than ``transaction.state.log.replication.factor``, and a
  1-broker Kafka needs both settings lowered by hand).
* Timestamps come from the broker's injected clock (the event loop's monotonic clock),
  which is what timeouts and expiry need; DescribeTransactions converts start times
  to wall-clock time.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import BrokerEndpoint, ClusterMetadata, TopicInfo
from broker.coordinator.coordinator_loader import (
    ImmediateLoadScheduler,
    LoadJob,
    LoadScheduler,
    LoadSteps,
)
from broker.coordinator.coordinator_partitions import (
    LEADER_MOVED_ERRORS,
    PARTITION_UNAVAILABLE_ERRORS,
    CoordinatorPartitions,
)
from broker.server.purgatories import ParkedRequest
from broker.server.scheduler import PeriodicTask
from broker.txn.transaction_config import TransactionConfig
from broker.txn.transaction_loader import (
    TransactionToComplete,
    load_partition,
    transactions_to_complete,
)
from broker.txn.transaction_log import (
    TRANSACTION_STATE_TOPIC_NAME,
    KeyValue,
    TransactionLog,
    key_to_bytes,
    value_to_bytes,
)
from broker.txn.transaction_metadata import TransactionMetadata, TxnTransitMetadata
from broker.txn.transaction_state import TransactionState
from purgatory import Clock, SystemTimer

log = logging.getLogger("broker.txn")

E = ErrorCode
S = TransactionState

AppendCallback = Callable[[ErrorCode], None]


@dataclass(slots=True)
class TxnMetadataCacheEntry:
    """One led partition: its coordinator epoch and its transactional ids."""

    coordinator_epoch: int
    metadata_per_transactional_id: dict[str, TransactionMetadata] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CoordinatorEpochAndTxnMetadata:
    coordinator_epoch: int
    transaction_metadata: TransactionMetadata


@dataclass(frozen=True, slots=True)
class TransactionalIdAndProducerIdEpoch:
    transactional_id: str
    producer_id: int
    producer_epoch: int


class TxnElectionListener(Protocol):
    """Told when this broker starts or stops leading a ``__transaction_state`` partition
    (the coordinator: Kafka's ``onElection`` / ``onResignation``)."""

    def on_election(self, partition: int, coordinator_epoch: int) -> None: ...

    def on_resignation(self, partition: int) -> None: ...


def append_error(error: ErrorCode) -> ErrorCode:
    """The coordinator's error for a failed ``__transaction_state`` append (Kafka's
    ``appendTransactionToLog``): clients retry or rediscover the coordinator."""
    if error in PARTITION_UNAVAILABLE_ERRORS or error is E.request_timed_out:
        return E.coordinator_not_available
    if error in LEADER_MOVED_ERRORS:
        return E.not_coordinator
    if error in (E.message_too_large, E.record_list_too_large):
        return E.unknown_server_error
    return error


class TransactionStateManager:
    """The transactions of this broker's ``__transaction_state`` partitions."""

    def __init__(
        self,
        broker_id: int,
        config: TransactionConfig,
        clock: Clock,
        metadata: ClusterMetadata,
        txn_log: TransactionLog,
        scheduler_timer: SystemTimer,
        load_scheduler: LoadScheduler | None = None,
        transaction_version: Callable[[], int] = lambda: 0,
    ) -> None:
        self.broker_id = broker_id
        self.config = config
        # The cluster's finalized transaction.version (Kafka reads its metadata cache).
        self._transaction_version = transaction_version
        self._clock = clock
        self._log = txn_log
        self._partitions = CoordinatorPartitions(
            TRANSACTION_STATE_TOPIC_NAME,
            broker_id,
            metadata,
            config.transaction_log_num_partitions,
            config.transaction_log_replication_factor,
            self.transaction_topic_configs,
        )
        self._cache: dict[int, TxnMetadataCacheEntry] = {}
        self._loading: dict[int, int] = {}  # partition -> coordinator epoch being loaded
        self._load_jobs: dict[int, LoadJob] = {}  # the loads under way
        # Runs the loads; by default at once (unit tests), the broker's in slices.
        self._load_scheduler = load_scheduler or ImmediateLoadScheduler()
        self._send_markers: dict[int, Callable[[TransactionToComplete], None]] = {}
        self._listener: TxnElectionListener | None = None
        self._expiration = PeriodicTask(
            scheduler_timer,
            f"transactionalId-expiration-{broker_id}",
            config.remove_expired_transactional_ids_interval_ms,
            self.remove_expired_transactional_ids,
        )

    def transaction_version_level(self) -> int:
        """The finalized ``transaction.version``: the value version written, and the
        version the coordinator's own aborts (timeouts, fences) run with."""
        return self._transaction_version()

    # ============================================================== lifecycle
    def startup(self, listener: TxnElectionListener, enable_expiration: bool = True) -> None:
        """Follow the leadership of ``__transaction_state`` (``listener`` hears of each
        partition won or lost) and start transactional id expiration."""
        self._listener = listener
        self._partitions.follow(self._follow_leadership)
        if enable_expiration:
            self._expiration.start()

    def shutdown(self) -> None:
        self._partitions.unfollow()
        self._expiration.stop()
        self._listener = None
        for partition in list(self._load_jobs):
            self._cancel_load(partition)
        self._cache.clear()
        self._loading.clear()
        self._send_markers.clear()

    # ============================================================== placement
    def partition_for(self, transactional_id: str) -> int:
        """Kafka's ``Utils.abs(transactionalId.hashCode) % partitions``."""
        return self._partitions.partition_for(transactional_id)

    def ensure_transaction_topic(self) -> TopicInfo:
        """Create ``__transaction_state`` on first use (compacted, acks=all appends)."""
        return self._partitions.ensure_topic()

    def transaction_topic_configs(self, replication: int) -> dict[str, str]:
        return {
            "cleanup.policy": "compact",
            "min.insync.replicas": str(
                min(self.config.transaction_log_min_insync_replicas, replication)
            ),
            "segment.bytes": str(self.config.transaction_log_segment_bytes),
        }

    def coordinator_endpoint(
        self, transactional_id: str
    ) -> tuple[ErrorCode, BrokerEndpoint | None]:
        """FindCoordinator (key type 1): the leader of the id's partition, if alive."""
        return self._partitions.coordinator_endpoint(transactional_id)

    def now_ms(self) -> int:
        return self._clock.now_ms()

    def validate_transaction_timeout_ms(self, txn_timeout_ms: int) -> bool:
        return 0 < txn_timeout_ms <= self.config.transaction_max_timeout_ms

    # ================================================================== cache
    def get_transaction_state(
        self, transactional_id: str
    ) -> tuple[ErrorCode, CoordinatorEpochAndTxnMetadata | None]:
        """NONE and the id's metadata (None when unknown), or why this broker cannot
        answer for it: COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR."""
        return self._get_and_maybe_add(transactional_id, None)

    def put_transaction_state_if_not_exists(
        self, created: TransactionMetadata
    ) -> tuple[ErrorCode, CoordinatorEpochAndTxnMetadata | None]:
        """The id's metadata, ``created`` added first if the id is unknown."""
        return self._get_and_maybe_add(created.transactional_id, created)

    def _get_and_maybe_add(
        self, transactional_id: str, created: TransactionMetadata | None
    ) -> tuple[ErrorCode, CoordinatorEpochAndTxnMetadata | None]:
        partition = self.partition_for(transactional_id)
        if partition in self._loading:
            return E.coordinator_load_in_progress, None
        entry = self._cache.get(partition)
        if entry is None:
            return E.not_coordinator, None
        metadata = entry.metadata_per_transactional_id.get(transactional_id)
        if metadata is None and created is not None:
            metadata = entry.metadata_per_transactional_id.setdefault(transactional_id, created)
        if metadata is None:
            return E.none, None
        return E.none, CoordinatorEpochAndTxnMetadata(entry.coordinator_epoch, metadata)

    def all_transactions(self) -> Iterable[TransactionMetadata]:
        for entry in self._cache.values():
            yield from entry.metadata_per_transactional_id.values()

    @property
    def loading_partitions(self) -> frozenset[int]:
        return frozenset(self._loading)

    @property
    def owned_partitions(self) -> dict[int, int]:
        """Loaded partitions and their coordinator epochs."""
        return {p: e.coordinator_epoch for p, e in self._cache.items()}

    # ========================================================== load / unload
    def _follow_leadership(self) -> None:
        listener = self._listener
        if listener is None:
            return
        led = self._partitions.led_partitions()
        current = {**{p: e.coordinator_epoch for p, e in self._cache.items()}, **self._loading}
        for partition, epoch in sorted(current.items()):
            if led.get(partition) != epoch:
                listener.on_resignation(partition)
        for partition, epoch in sorted(led.items()):
            if partition not in self._cache and self._loading.get(partition) != epoch:
                listener.on_election(partition, epoch)
            elif partition in self._loading:
                self._load(partition, epoch)  # its replica may be online now

    def load_transactions_for_txn_topic_partition(
        self,
        partition: int,
        coordinator_epoch: int,
        send_txn_markers: Callable[[TransactionToComplete], None],
    ) -> None:
        """Rebuild the transactions of ``partition`` from its records, in slices on the
        load scheduler (COORDINATOR_LOAD_IN_PROGRESS meanwhile); those between Prepare
        and Complete get their markers sent (``send_txn_markers``)."""
        self._cache.pop(partition, None)
        self._cancel_load(partition)
        self._loading[partition] = coordinator_epoch
        self._send_markers[partition] = send_txn_markers
        self._load(partition, coordinator_epoch)

    def _load(self, partition: int, coordinator_epoch: int) -> None:
        if partition in self._load_jobs:
            return  # under way
        batches = self._log.open_log(partition)
        if batches is None:
            return  # no online replica yet: still loading
        name = f"{TRANSACTION_STATE_TOPIC_NAME}-{partition}"
        log.debug("Loading transaction metadata from %s at epoch %d", name, coordinator_epoch)
        job = LoadJob(
            name,
            self._load_steps(partition, coordinator_epoch, batches, self._clock.now_ms()),
        )
        self._load_jobs[partition] = job
        self._load_scheduler.schedule(job)

    def _load_steps(
        self,
        partition: int,
        coordinator_epoch: int,
        batches: Iterator[list[KeyValue]],
        started_ms: int,
    ) -> LoadSteps:
        """``transaction_loader.load_partition``'s steps, then the install if this
        broker still leads the partition at ``coordinator_epoch``."""
        try:
            loaded = yield from load_partition(batches)
        except Exception:  # a bug: the next metadata change tries again
            log.exception("Error loading %s-%d", TRANSACTION_STATE_TOPIC_NAME, partition)
            self._load_jobs.pop(partition, None)
            return
        job = self._load_jobs.pop(partition, None)
        if self._loading.get(partition) != coordinator_epoch or job is None:
            return  # given up meanwhile
        if not self._partitions.leads(partition, coordinator_epoch):
            log.info("Not loading %s-%d: not its leader", TRANSACTION_STATE_TOPIC_NAME, partition)
            return
        self._install(partition, coordinator_epoch, loaded.transactions)
        log.log(
            logging.INFO if loaded.records else logging.DEBUG,
            "Finished loading %d transaction metadata from %s-%d in %d milliseconds "
            "(%d slices, %d records)",
            len(loaded.transactions),
            TRANSACTION_STATE_TOPIC_NAME,
            partition,
            self._clock.now_ms() - started_ms,
            job.slices,
            loaded.records,
        )

    def _install(
        self, partition: int, coordinator_epoch: int, loaded: dict[str, TransactionMetadata]
    ) -> None:
        to_complete = transactions_to_complete(loaded, coordinator_epoch, self._clock.now_ms())
        self._cache[partition] = TxnMetadataCacheEntry(coordinator_epoch, loaded)
        del self._loading[partition]
        send_txn_markers = self._send_markers.pop(partition)
        for txn in to_complete:
            send_txn_markers(txn)

    def _cancel_load(self, partition: int) -> None:
        job = self._load_jobs.pop(partition, None)
        if job is not None:
            job.cancel()

    def remove_transactions_for_txn_topic_partition(self, partition: int) -> None:
        """This broker no longer leads ``partition``: forget its transactions (or give
        their load up)."""
        self._cancel_load(partition)
        self._loading.pop(partition, None)
        self._send_markers.pop(partition, None)
        entry = self._cache.pop(partition, None)
        if entry is None:
            log.debug(
                "No cached transaction metadata found for %s-%d during become-follower transition",
                TRANSACTION_STATE_TOPIC_NAME,
                partition,
            )
            return
        log.log(
            logging.INFO if entry.metadata_per_transactional_id else logging.DEBUG,
            "Unloaded transaction metadata of %d transactional ids for %s-%d on "
            "become-follower transition",
            len(entry.metadata_per_transactional_id),
            TRANSACTION_STATE_TOPIC_NAME,
            partition,
        )

    # ================================================================ appends
    def append_transaction_to_log(
        self,
        transactional_id: str,
        coordinator_epoch: int,
        new_metadata: TxnTransitMetadata,
        response_callback: AppendCallback,
        retry_on_error: Callable[[ErrorCode], bool] = lambda _error: False,
        parked_request: ParkedRequest | None = None,
    ) -> None:
        """Write ``new_metadata`` (a prepared transition) and make it current once the
        in-sync replicas have it. ``response_callback`` gets the coordinator's error,
        exactly once. On an error for which ``retry_on_error`` holds, the pending state
        is kept (the caller retries); on any other it is cleared."""
        error, found = self.get_transaction_state(transactional_id)
        if error is not E.none:
            response_callback(error)
            return
        if found is None or found.coordinator_epoch != coordinator_epoch:
            response_callback(E.not_coordinator)
            return
        partition = self.partition_for(transactional_id)
        record = (
            key_to_bytes(transactional_id),
            value_to_bytes(new_metadata, self._transaction_version()),
        )
        answered = False

        def on_appended(status: ErrorCode) -> None:
            nonlocal answered
            if answered:
                return
            answered = True
            response_callback(
                self._complete_append(
                    transactional_id, coordinator_epoch, new_metadata, status, retry_on_error
                )
            )

        try:
            self._log.append_to_log(
                partition,
                [record],
                on_appended,
                parked_request,
                timeout_ms=new_metadata.txn_timeout_ms,
            )
        except Exception:
            log.exception(
                "Appending to %s failed for %s", TRANSACTION_STATE_TOPIC_NAME, transactional_id
            )
            on_appended(E.unknown_server_error)

    def _complete_append(
        self,
        transactional_id: str,
        coordinator_epoch: int,
        new_metadata: TxnTransitMetadata,
        status: ErrorCode,
        retry_on_error: Callable[[ErrorCode], bool],
    ) -> ErrorCode:
        error = append_error(status)
        if error is not E.none:
            log.debug(
                "Appending %s's new metadata %s failed due to %s",
                transactional_id,
                new_metadata,
                status.name,
            )
        lookup_error, found = self.get_transaction_state(transactional_id)
        if error is E.none:
            if lookup_error is not E.none:
                log.info(
                    "Accessing the cached transaction metadata for %s returns %s error; "
                    "aborting transition to the new metadata and setting the error in the "
                    "callback",
                    transactional_id,
                    lookup_error.name,
                )
                return lookup_error
            if found is None or found.coordinator_epoch != coordinator_epoch:
                log.info(
                    "The cached coordinator epoch for %s has changed after appending its new "
                    "metadata to the transaction log; returning NOT_COORDINATOR",
                    transactional_id,
                )
                return E.not_coordinator
            found.transaction_metadata.complete_transition_to(new_metadata)
            return E.none
        if found is not None and found.coordinator_epoch == coordinator_epoch:
            metadata = found.transaction_metadata
            if retry_on_error(error):
                log.info(
                    "TransactionalId %s append transaction log for %s transition failed due "
                    "to %s, not resetting pending state %s but just returning the error in "
                    "the callback to let the caller retry",
                    transactional_id,
                    new_metadata.txn_state,
                    error.name,
                    metadata.pending_state,
                )
            else:
                log.info(
                    "TransactionalId %s append transaction log for %s transition failed due "
                    "to %s, resetting pending state from %s, aborting state transition and "
                    "returning %s in the callback",
                    transactional_id,
                    new_metadata.txn_state,
                    error.name,
                    metadata.pending_state,
                    error.name,
                )
                metadata.pending_state = None
        return error

    # ========================================================== timeouts, expiry
    def timed_out_transactions(self) -> list[TransactionalIdAndProducerIdEpoch]:
        """Ongoing transactions open longer than their timeout, with no move pending."""
        now = self._clock.now_ms()
        return [
            TransactionalIdAndProducerIdEpoch(m.transactional_id, m.producer_id, m.producer_epoch)
            for m in self.all_transactions()
            if not m.pending_transition_in_progress
            and m.state is S.ONGOING
            and m.txn_start_timestamp + m.txn_timeout_ms < now
        ]

    def remove_expired_transactional_ids(self) -> int:
        """Kafka's ``transactionalId-expiration`` job: ids idle (no transaction open) for
        ``transactional.id.expiration.ms`` get a tombstone and, once it is written, leave
        the cache. Returns how many were prepared for removal."""
        now = self._clock.now_ms()
        horizon = now - self.config.transactional_id_expiration_ms
        expiring = 0
        for partition, entry in list(self._cache.items()):
            expired = [
                (m, m.prepare_dead())
                for m in list(entry.metadata_per_transactional_id.values())
                if m.state.is_expiration_allowed
                and not m.pending_transition_in_progress
                and m.txn_last_update_timestamp <= horizon
            ]
            if not expired:
                continue
            expiring += len(expired)
            records: list[KeyValue] = [(key_to_bytes(m.transactional_id), None) for m, _ in expired]
            self._log.append_to_log(
                partition,
                records,
                self._remove_from_cache_callback(partition, entry.coordinator_epoch, expired),
                timeout_ms=self.config.request_timeout_ms,
            )
        return expiring

    def _remove_from_cache_callback(
        self,
        partition: int,
        coordinator_epoch: int,
        expired: list[tuple[TransactionMetadata, TxnTransitMetadata]],
    ) -> AppendCallback:
        def on_done(error: ErrorCode) -> None:
            entry = self._cache.get(partition)
            for metadata, transit in expired:
                if (
                    entry is not None
                    and entry.coordinator_epoch == coordinator_epoch
                    and metadata.pending_state is S.DEAD
                    and metadata.producer_epoch == transit.producer_epoch
                    and error is E.none
                ):
                    entry.metadata_per_transactional_id.pop(metadata.transactional_id, None)
                    log.info(
                        "Removed expired transactionalId %s from %s-%d",
                        metadata.transactional_id,
                        TRANSACTION_STATE_TOPIC_NAME,
                        partition,
                    )
                else:
                    log.warning(
                        "Failed to remove expired transactionalId: %s from cache. Tombstone "
                        "append error code: %s, pendingState: %s, producerEpoch: %d, expected "
                        "producerEpoch: %d",
                        metadata.transactional_id,
                        error.name,
                        metadata.pending_state,
                        metadata.producer_epoch,
                        transit.producer_epoch,
                    )
                    metadata.pending_state = None

        return on_done
