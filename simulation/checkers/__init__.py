"""Jepsen's Kafka checkers over a run's History (issue 33): lost writes, duplicates, gaps
and inversions per consumer run, aborted and precommitted reads, and Elle's transaction
cycles. Each returns a `Verdict` whose evidence is the smallest piece of history that
shows its first violations. `invariants.check_all` runs them after the eight invariants.
"""

from __future__ import annotations

from simulation.checkers import duplicates, elle, lost_writes, read_order, txn_reads
from simulation.checkers.observations import observe
from simulation.history import History
from simulation.verdict import Verdict

__all__ = ["check_jepsen"]


def check_jepsen(history: History) -> list[Verdict]:
    seen = observe(history)
    return [
        checker.check(history, seen)
        for checker in (lost_writes, duplicates, read_order, txn_reads, elle)
    ]
