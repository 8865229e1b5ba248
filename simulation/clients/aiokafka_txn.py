"""The aiokafka transform's transactions into the event log: where each send landed (its
future's metadata, once the producer has it) and how the transaction ended."""

from __future__ import annotations

import asyncio
from typing import Any

from simulation.events import EventLog, Outcome, Txn


def note_writes(txn: Txn, sent: list[tuple[asyncio.Future[Any], bytes]], outcome: Outcome) -> None:
    """The writes whose offsets are known by now, and the transaction's state."""
    txn.writes = [
        ((meta.topic, meta.partition, meta.offset), value)
        for future, value in sent
        if future.done() and not future.cancelled() and future.exception() is None
        for meta in (future.result(),)
    ]
    txn.outcome = outcome


def settle_open_txns(events: EventLog, aborted: bool) -> None:
    """After an error: an open transaction the producer then aborted, before its commit was
    asked for, is aborted; any other (its commit asked for, or no abort) is unknown."""
    for txn in events.txns:
        if txn.outcome == "open" and txn.name.startswith("sim-transform#"):
            definite = aborted and txn.end_sent_at_s is None
            txn.outcome = "aborted" if definite else "unknown"
