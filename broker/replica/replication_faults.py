"""Replication faults of an in-process cluster: pause or slow a broker's followers.

The control endpoint (``POST /brokers/{id}/replication``) and tests pause a broker's
fetchers (its leaders' ISRs shrink after ``replica.lag.time.max.ms``), space its follower
fetches apart, or resume them. Kafka has no such switch; a partition or a slow disk is
how it happens there. The faults are kept by broker id, like the fault injector's: they
outlive a broker's restart (applied again when it starts) until resumed or cleared. They
act on each broker's ``ReplicaFetcherManager`` (``pause_replication``,
``set_replication_delay_ms``, ``resume_replication``), reached through the cluster that
owns the brokers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from broker.replica.replica_fetcher import ReplicaFetcherManager

# The lines keep the logger they were always written under (the composition root's).
log = logging.getLogger("broker.app")


class ReplicationFaults:
    """The replication faults in force, by broker id, and their effect on the fetchers.

    ``broker_count`` is how many brokers the cluster has (ids ``0..n-1``); ``fetchers``
    gives a broker's fetcher manager, None while the broker is stopped.
    """

    def __init__(
        self,
        broker_count: Callable[[], int],
        fetchers: Callable[[int], ReplicaFetcherManager | None],
        replica_lag_time_max_ms: int,
    ) -> None:
        self._broker_count = broker_count
        self._fetchers = fetchers
        self._lag_time_max_ms = replica_lag_time_max_ms
        self._paused: set[int] = set()
        self._delay_ms: dict[int, int] = {}

    def pause(self, broker_id: int) -> None:
        """Broker ``broker_id`` stops fetching as a follower; its leaders' ISRs shrink.

        Kept by broker id: a stopped broker is paused when it starts again."""
        self._check(broker_id)
        self._paused.add(broker_id)
        self.apply(broker_id)
        log.info(
            "Replication of broker %d paused: its followers stop fetching; the leaders drop "
            "it from their ISR after replica.lag.time.max.ms=%d",
            broker_id,
            self._lag_time_max_ms,
        )

    def resume(self, broker_id: int) -> None:
        """Undo ``pause`` and ``set_delay_ms``: full speed again."""
        self._check(broker_id)
        had = broker_id in self._paused or broker_id in self._delay_ms
        self._paused.discard(broker_id)
        self._delay_ms.pop(broker_id, None)
        fetchers = self._fetchers(broker_id)
        if fetchers is not None:
            fetchers.resume_replication()
        if had:
            log.info("Replication of broker %d resumed at full speed", broker_id)

    def set_delay_ms(self, broker_id: int, ms: int) -> None:
        """Space every follower fetch of ``broker_id`` at least ``ms`` apart (0: none)."""
        self._check(broker_id)
        if ms < 0:
            raise ValueError("replication delay must be >= 0")
        if ms == 0:
            self._delay_ms.pop(broker_id, None)
        else:
            self._delay_ms[broker_id] = ms
        fetchers = self._fetchers(broker_id)
        if fetchers is not None:
            fetchers.set_replication_delay_ms(ms)
        log.info("Replication of broker %d: follower fetches at least %d ms apart", broker_id, ms)

    def clear(self, broker_id: int | None = None) -> None:
        """Resume replication of one broker, or of every broker (``fault clear``)."""
        for b in range(self._broker_count()) if broker_id is None else (broker_id,):
            self.resume(b)

    def in_force(self) -> dict[int, dict[str, object]]:
        """The replication faults in force, by broker id (only brokers that have one)."""
        faulty = sorted(self._paused | set(self._delay_ms))
        return {
            b: {"paused": b in self._paused, "delay_ms": self._delay_ms.get(b, 0)} for b in faulty
        }

    def apply(self, broker_id: int) -> None:
        """Put the broker's faults on its fetchers (again, after a restart)."""
        fetchers = self._fetchers(broker_id)
        if fetchers is None:
            return
        if broker_id in self._paused:
            fetchers.pause_replication()
        delay = self._delay_ms.get(broker_id, 0)
        if delay:
            fetchers.set_replication_delay_ms(delay)

    def _check(self, broker_id: int) -> None:
        if not 0 <= broker_id < self._broker_count():
            raise ValueError(f"unknown broker id {broker_id}")
