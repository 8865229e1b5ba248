"""The aiokafka transform's transactions into the event log: where each send landed (its
future's metadata, once the producer has it) and how the transaction ended."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

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


async def renewed_if_fatal(
    producer: AIOKafkaProducer, bootstrap: str, transactional_id: str, stop_at_s: float
) -> AIOKafkaProducer:
    """The producer again, or a new one with its ``transactional.id`` if it went fatal.

    aiokafka's transactional producer is done once its sender task dies (FATAL_ERROR: its
    next ``begin_transaction`` is an AssertionError), and aiokafka lets it die on a
    connection closed during a FindCoordinator (a broker crashing then, as against Kafka:
    campaign seed 1472; aio-libs/aiokafka#1151 is the same family). What Kafka's docs ask
    of a fatal error is what a user does: close the producer and start another with the
    same id, whose InitProducerId bumps the epoch and aborts what the old one left open.
    Retried until it starts or the run ends."""
    manager = producer._txn_manager
    if manager is None or not manager.is_fatal_error():
        return producer
    with contextlib.suppress(KafkaError):
        await producer.stop()
    loop = asyncio.get_running_loop()
    while True:
        fresh = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id)
        try:
            await fresh.start()
            return fresh
        except KafkaError:
            with contextlib.suppress(KafkaError):
                await fresh.stop()
            if loop.time() >= stop_at_s:
                return fresh
            await asyncio.sleep(1)
