"""A transaction coordinator, its state manager and marker channel on a manual clock.

Real state manager, coordinator and channel manager; ``__transaction_state`` is an
:class:`InMemoryTransactionLog` (appends answered at once unless held) and the marker
channel's IO is a :class:`FakeSender` the test answers: ``h.deliver_markers()`` drains
every destination's queue and acknowledges each partition (or answers the errors given),
as the partition leaders would. Time moves with ``h.advance(ms)``, which runs the
scheduler timer (the abort and expiration jobs, completion retries).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import ClusterMetadata
from broker.coordinator.coordinator_loader import LoadScheduler
from broker.txn.transaction_config import TransactionConfig
from broker.txn.transaction_coordinator import InitProducerIdResult, TransactionCoordinator
from broker.txn.transaction_log import TRANSACTION_STATE_TOPIC_NAME, InMemoryTransactionLog
from broker.txn.transaction_marker_channel_manager import (
    MarkerErrors,
    TransactionMarkerChannelManager,
    TxnMarkerEntry,
)
from broker.txn.transaction_metadata import TransactionMetadata
from broker.txn.transaction_state import TransactionState
from broker.txn.transaction_state_manager import TransactionStateManager
from purgatory import ManualClock, SystemTimer
from tests.helpers.group_harness import Box, Request

E = ErrorCode
S = TransactionState

__all__ = ["Box", "FakeSender", "Request", "TxnHarness"]


@dataclass
class FakeSender:
    """The marker channel's sender: remembers which brokers were woken."""

    woken: list[int] = field(default_factory=list)

    def wake(self, broker_id: int) -> None:
        self.woken.append(broker_id)


class TxnHarness:
    def __init__(
        self,
        brokers: int = 1,
        num_partitions: int = 3,
        topics: dict[str, int] | None = None,
        load_scheduler: LoadScheduler | None = None,
        transaction_version: int = 0,
        **config: Any,
    ) -> None:
        # The cluster's finalized transaction.version (a test may change it).
        self.transaction_version = transaction_version
        self.clock = ManualClock(1_000_000)
        self.scheduler = SystemTimer(self.clock, name="scheduler")
        self.metadata = ClusterMetadata()
        for broker_id in range(brokers):
            self.metadata.register_broker(broker_id, "127.0.0.1", 9092 + broker_id)
        self.config = TransactionConfig(transaction_log_num_partitions=num_partitions, **config)
        self.log = InMemoryTransactionLog()
        self.manager = TransactionStateManager(
            0,
            self.config,
            self.clock,
            self.metadata,
            self.log,
            self.scheduler,
            load_scheduler,
            lambda: self.transaction_version,
        )
        self.channel = TransactionMarkerChannelManager(
            0, self.config, self.metadata, self.manager, self.scheduler
        )
        self.sender = FakeSender()
        ids = itertools.count(1000)
        self.coord = TransactionCoordinator(
            0,
            self.clock,
            self.scheduler,
            lambda: next(ids),
            self.manager,
            self.channel,
            self.sender,
        )
        # Every data partition led by broker 0 unless a test moves it.
        for name, count in (topics or {"t": 2}).items():
            self.metadata.create_topic(name, count, 1, {}, assignment=[[0]] * count)
        self.metadata.create_topic(
            TRANSACTION_STATE_TOPIC_NAME, num_partitions, 1, {}, assignment=[[0]] * num_partitions
        )
        self.coord.startup()
        # What every marker request carried, in order (for assertions).
        self.markers: list[TxnMarkerEntry] = []

    # ---------------------------------------------------------------- time
    def advance(self, ms: int, step: int = 100) -> None:
        remaining = ms
        while remaining > 0:
            d = min(step, remaining)
            self.clock.advance(d)
            remaining -= d
            self.scheduler.advance_clock()

    # ---------------------------------------------------------------- APIs
    def init_box(
        self,
        txn_id: str = "tx",
        timeout_ms: int = 60_000,
        expected: tuple[int, int] | None = None,
        request: Request | None = None,
    ) -> Box:
        box = Box()
        self.coord.handle_init_producer_id(txn_id, timeout_ms, expected, box, request)
        return box

    def init(self, txn_id: str = "tx", timeout_ms: int = 60_000) -> InitProducerIdResult:
        result: InitProducerIdResult = self.init_box(txn_id, timeout_ms).result
        assert result.error is E.none, result
        return result

    def add(
        self,
        txn_id: str,
        pid: int,
        epoch: int,
        partitions: list[tuple[str, int]] | None = None,
        request: Request | None = None,
    ) -> ErrorCode:
        box = Box()
        self.coord.handle_add_partitions_to_transaction(
            txn_id, pid, epoch, partitions or [("t", 0)], box, request
        )
        result: ErrorCode = box.result
        return result

    def end(
        self, txn_id: str, pid: int, epoch: int, commit: bool, request: Request | None = None
    ) -> ErrorCode:
        box = Box()
        self.coord.handle_end_transaction(
            txn_id, pid, epoch, commit, lambda error, _pid, _epoch: box(error), request
        )
        result: ErrorCode = box.result
        return result

    def end_v2(
        self, txn_id: str, pid: int, epoch: int, commit: bool, request: Request | None = None
    ) -> tuple[ErrorCode, int, int]:
        """EndTxn v5 (transactions v2): the error, and the producer id and epoch."""
        box = Box()
        self.coord.handle_end_transaction(
            txn_id,
            pid,
            epoch,
            commit,
            lambda error, new_pid, new_epoch: box((error, new_pid, new_epoch)),
            request,
            client_transaction_version=2,
        )
        result: tuple[ErrorCode, int, int] = box.result
        return result

    def add_v2(
        self,
        txn_id: str,
        pid: int,
        epoch: int,
        partitions: list[tuple[str, int]] | None = None,
        request: Request | None = None,
    ) -> ErrorCode:
        """A partition added by its leader for a Produce v12+ (transactions v2)."""
        box = Box()
        self.coord.handle_add_partitions_to_transaction(
            txn_id,
            pid,
            epoch,
            partitions or [("t", 0)],
            box,
            request,
            client_transaction_version=2,
        )
        result: ErrorCode = box.result
        return result

    def begin(self, txn_id: str = "tx", **kw: Any) -> InitProducerIdResult:
        """InitProducerId and one partition added: an Ongoing transaction."""
        r = self.init(txn_id, **kw)
        assert self.add(txn_id, r.producer_id, r.producer_epoch) is E.none
        return r

    # ------------------------------------------------------------- markers
    def deliver_markers(
        self,
        answer: Callable[[int, TxnMarkerEntry], dict[tuple[str, int], ErrorCode]] | None = None,
    ) -> int:
        """Drain every destination's queue once and answer it: NONE for each partition
        unless ``answer(broker_id, entry)`` says otherwise. Returns markers delivered."""
        delivered = 0
        for broker_id in sorted(set(self.channel.queued_brokers())):
            entries = self.channel.drain(broker_id)
            self.markers.extend(entries)
            errors: MarkerErrors = {}
            for entry in entries:
                per = answer(broker_id, entry) if answer is not None else {}
                errors[entry.producer_id] = {tp: per.get(tp, E.none) for tp in entry.partitions}
            self.channel.on_response(broker_id, entries, errors)
            delivered += len(entries)
        return delivered

    # ------------------------------------------------------------ queries
    def metadata_of(self, txn_id: str = "tx") -> TransactionMetadata:
        error, found = self.manager.get_transaction_state(txn_id)
        assert error is E.none and found is not None, error
        return found.transaction_metadata

    def state(self, txn_id: str = "tx") -> TransactionState:
        return self.metadata_of(txn_id).state

    def written(self, txn_id: str = "tx") -> list[TransactionState | None]:
        return self.log.states(txn_id)
