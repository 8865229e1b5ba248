"""What the simulation reads from the brokers it hosts, beside what the clients see.

A client cannot tell every broker bug from Kafka's own latitude: a new leader's high
watermark may be lower than the old leader's (it starts from what it knew as a follower,
one fetch behind, or more after KIP-966's ELR), so the clients' "high watermark never
moves back" must allow a step back across a leader change, and a new leader that forgot
its high watermark altogether looks, for the moment until its followers' fetches raise it
again, just like one that is a fetch behind. The simulation hosts every broker in its own
process, so it can check the broker-side rule directly: **a new leader starts from the
high watermark it had as a follower** (Kafka's ``Partition.makeLeader`` keeps the local
log's high watermark, bounded by the log's start and end).

``watch_leader_starts`` wraps ``Partition.make_leader`` for one run (inside the planted
bug's replacement, if any: it sees what the broker does) and notes each leader start in
``History.leader_starts``; nothing of it enters the digest.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from broker.replica.partition import Partition
from simulation.history import History, LeaderStart

__all__ = ["watch_leader_starts"]


@contextmanager
def watch_leader_starts(history: History) -> Iterator[None]:
    """Note every ``make_leader`` of the run: the high watermark before (as the log bounds
    it) and after."""
    original = Partition.__dict__["make_leader"]

    def make_leader(self: Partition, epoch: int, *args: Any, **kwargs: Any) -> None:
        bound = min(max(self.high_watermark, self.log_start_offset), self.log_end_offset)
        original(self, epoch, *args, **kwargs)
        history.leader_starts.append(
            LeaderStart(
                self.topic, self.partition, self.broker_id, epoch, bound, self.high_watermark
            )
        )

    Partition.make_leader = make_leader  # type: ignore[method-assign]
    try:
        yield
    finally:
        Partition.make_leader = original  # type: ignore[method-assign]
