"""A broker's purgatories and its scheduler, each on its own timer with its own reaper.

Kafka gives each purgatory (``DelayedOperationPurgatory``) its own ``SystemTimer`` and
``ExpirationReaper`` thread, and runs housekeeping on a ``KafkaScheduler``. Here the
purgatories are the same, one per ``PurgatoryName``, and the scheduler is one more
timing wheel (``scheduler``) that periodic jobs (ISR expiration, retention, offset
expiry) put themselves on, so that everything the broker schedules reads the one
injected clock and a test can drive it with ``ManualClock`` and ``advance_clock()``. One
more timer holds the share groups' acquisition locks (``share_lock_timer``, Kafka's
"share-group-lock-timeout"). The capture's listeners are given to the purgatories at
construction.

Purgatory names are one enum: capture, metrics and the control endpoint print them, and
the component that parks an operation records which one it used.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Protocol

from broker.config.broker_config import BrokerConfig
from purgatory import Clock, DelayedOperationPurgatory, ExpirationReaper, SystemTimer
from purgatory.operation_purgatory import OperationListener


class PurgatoryName(StrEnum):
    """Kafka's ``purgatoryName`` of each DelayedOperationPurgatory a broker runs."""

    PRODUCE = "Produce"
    FETCH = "Fetch"
    HEARTBEAT = "Heartbeat"
    REBALANCE = "Rebalance"
    DELETE_RECORDS = "DeleteRecords"
    SHARE_FETCH = "ShareFetch"  # DelayedShareFetch (KIP-932, broker/share/)
    REMOTE_FETCH = "RemoteFetch"  # DelayedRemoteFetch (KIP-405, broker/remote/)
    REMOTE_LIST_OFFSETS = "RemoteListOffsets"  # DelayedRemoteListOffsets (broker/remote/)


class PurgatoryOutcome(StrEnum):
    """How a parked request left its purgatory."""

    COMPLETED = "completed"
    EXPIRED = "expired"


class PurgatorySet:
    """The purgatories, the scheduler's timer and the share lock timer; started and
    stopped together."""

    def __init__(
        self,
        clock: Clock,
        config: BrokerConfig,
        listeners: Mapping[PurgatoryName, OperationListener] | None = None,
    ) -> None:
        purge_intervals = {
            PurgatoryName.PRODUCE: config.producer_purgatory_purge_interval_requests,
            PurgatoryName.FETCH: config.fetch_purgatory_purge_interval_requests,
            PurgatoryName.HEARTBEAT: 1000,
            PurgatoryName.REBALANCE: 1000,
            PurgatoryName.DELETE_RECORDS: config.delete_records_purgatory_purge_interval_requests,
            PurgatoryName.SHARE_FETCH: config.share_fetch_purgatory_purge_interval_requests,
            PurgatoryName.REMOTE_FETCH: 1000,  # Kafka's default purge interval
            PurgatoryName.REMOTE_LIST_OFFSETS: 1000,
        }
        self.timers: dict[PurgatoryName, SystemTimer] = {}
        self.purgatories: dict[PurgatoryName, DelayedOperationPurgatory[Any]] = {}
        self._reapers: list[ExpirationReaper] = []
        for name, interval in purge_intervals.items():
            timer = SystemTimer(clock, name=name.value)
            self.timers[name] = timer
            self.purgatories[name] = DelayedOperationPurgatory(
                name.value,
                timer,
                purge_interval=interval,
                listener=(listeners or {}).get(name),
            )
            self._reapers.append(ExpirationReaper(timer, name=f"ExpirationReaper-{name.value}"))
        # Kafka's KafkaScheduler: housekeeping jobs (broker/server/scheduler.py) run on this.
        self.scheduler_timer = SystemTimer(clock, name="scheduler")
        self._reapers.append(ExpirationReaper(self.scheduler_timer, name="kafka-scheduler"))
        # Kafka's share-group-lock-timeout timer: share partitions' acquisition locks.
        self.share_lock_timer = SystemTimer(clock, name="share-group-lock-timeout")
        self._reapers.append(
            ExpirationReaper(self.share_lock_timer, name="share-group-lock-timeout-reaper")
        )

    @property
    def reapers(self) -> tuple[ExpirationReaper, ...]:
        """Every timer's reaper (the purgatories', the scheduler's, the share locks')."""
        return tuple(self._reapers)

    @property
    def produce(self) -> DelayedOperationPurgatory[Any]:
        return self.purgatories[PurgatoryName.PRODUCE]

    @property
    def fetch(self) -> DelayedOperationPurgatory[Any]:
        return self.purgatories[PurgatoryName.FETCH]

    @property
    def heartbeat(self) -> DelayedOperationPurgatory[Any]:
        return self.purgatories[PurgatoryName.HEARTBEAT]

    @property
    def rebalance(self) -> DelayedOperationPurgatory[Any]:
        return self.purgatories[PurgatoryName.REBALANCE]

    @property
    def delete_records(self) -> DelayedOperationPurgatory[Any]:
        return self.purgatories[PurgatoryName.DELETE_RECORDS]

    @property
    def share_fetch(self) -> DelayedOperationPurgatory[Any]:
        return self.purgatories[PurgatoryName.SHARE_FETCH]

    @property
    def remote_fetch(self) -> DelayedOperationPurgatory[Any]:
        return self.purgatories[PurgatoryName.REMOTE_FETCH]

    @property
    def remote_list_offsets(self) -> DelayedOperationPurgatory[Any]:
        return self.purgatories[PurgatoryName.REMOTE_LIST_OFFSETS]

    def __getitem__(self, name: str) -> DelayedOperationPurgatory[Any]:
        return self.purgatories[PurgatoryName(name)]

    def start(self) -> None:
        for reaper in self._reapers:
            reaper.start()

    async def stop(self) -> None:
        for reaper in self._reapers:
            await reaper.stop()


class ParkedRequest(Protocol):
    """The client request a delayed operation answers (a ``RequestContext``).

    The component that parks an operation says where (``parked_in``) and the operation
    says how it left (``purgatory_done``); capture names the request in its events.
    """

    @property
    def connection_id(self) -> str: ...

    @property
    def correlation_id(self) -> int: ...

    def parked_in(self, purgatory: PurgatoryName) -> None: ...

    def purgatory_done(self, outcome: PurgatoryOutcome) -> None: ...
