"""Replication faults are kept by broker id: they outlive a restart and clear on resume.

What the control endpoint's ``POST /brokers/{id}/replication`` and ``fault clear`` rely on
(``broker/replica/replication_faults.py``), without a cluster: each broker's fetchers are a
recorder, None while the broker is stopped.
"""

from __future__ import annotations

from typing import Any, cast

import pytest

from broker.replica.replica_fetcher import ReplicaFetcherManager
from broker.replica.replication_faults import ReplicationFaults


class Fetchers:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def pause_replication(self) -> None:
        self.calls.append(("pause", None))

    def resume_replication(self) -> None:
        self.calls.append(("resume", None))

    def set_replication_delay_ms(self, ms: int) -> None:
        self.calls.append(("delay", ms))


def _faults(stopped: set[int]) -> tuple[ReplicationFaults, list[Fetchers]]:
    fetchers = [Fetchers(), Fetchers()]

    def of(broker_id: int) -> ReplicaFetcherManager | None:
        return None if broker_id in stopped else cast(ReplicaFetcherManager, fetchers[broker_id])

    return ReplicationFaults(lambda: len(fetchers), of, 30_000), fetchers


def test_a_fault_on_a_stopped_broker_is_applied_when_it_starts_again() -> None:
    stopped = {1}
    faults, fetchers = _faults(stopped)
    faults.pause(1)
    faults.set_delay_ms(1, 200)
    assert fetchers[1].calls == []
    assert faults.in_force() == {1: {"paused": True, "delay_ms": 200}}
    stopped.clear()
    faults.apply(1)
    assert fetchers[1].calls == [("pause", None), ("delay", 200)]


def test_resume_and_clear_undo_every_fault() -> None:
    faults, fetchers = _faults(set())
    faults.pause(0)
    faults.set_delay_ms(1, 50)
    faults.clear()
    assert faults.in_force() == {}
    assert fetchers[0].calls[-1] == ("resume", None)
    assert fetchers[1].calls[-1] == ("resume", None)


def test_an_unknown_broker_or_a_negative_delay_is_refused() -> None:
    faults, _ = _faults(set())
    with pytest.raises(ValueError, match="unknown broker id 2"):
        faults.pause(2)
    with pytest.raises(ValueError, match="replication delay must be >= 0"):
        faults.set_delay_ms(0, -1)
