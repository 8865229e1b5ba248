"""Capture: every request a broker serves, and every delayed operation's life, to disk.

``BrokerCapture`` is one broker's observer (``Broker.observers``): it is told when a
request has been handled (``request_received``, with the frame as received) and when
its response has been written (``request_completed``); at the second call the timing
breakdown is complete and one ``protocol.capture.CaptureRequest`` is written. It is
also the listener of the broker's four purgatories
(``DelayedOperationPurgatory.listener``) and writes one
``DelayedOperationEvent`` when an operation is watched ("created"), and one when it
completes or expires. ``CaptureSet`` owns the captures of a ``MiniKafka`` cluster (one
writer per broker id, kept across a broker's restart) and the small task that flushes
them when traffic is idle.

Cost on the event loop, per request: a dict insert and pop, the error-code walk
(``protocol.error_codes``, compiled per response class) and one record serialised by
pydantic-core into an incremental zlib stream. Records are built with
``model_construct`` (no validation): every value comes from the broker's own state,
already of the right type, and validation would double the cost. ``bench/capture_bench``
measures the whole.

Time: ``received_monotonic_us`` and the events' ``at_monotonic_us`` are both
``time.perf_counter_ns`` (CLOCK_MONOTONIC on Linux), the clock the connection stamps
requests with, so an operation's events line up with the request that parked it.

A request whose response is never written (its connection dropped while it was parked,
or the broker stopped) is not captured; ``abandoned`` counts those seen at ``close``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections.abc import Hashable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, cast

from broker.purgatories import ParkedRequest
from broker.purgatories import PurgatoryName as BrokerPurgatoryName
from broker.watch_keys import watch_key_name
from protocol.api_registry import api_name
from protocol.capture import (
    DELAYED_OPERATION_KINDS,
    CaptureRequest,
    DelayedOperationEvent,
    DelayedOperationKind,
    OperationEvent,
    PurgatoryName,
    PurgatoryOutcome,
)
from protocol.capture_files import DEFAULT_FLUSH_INTERVAL_MS, DEFAULT_ROLL_BYTES, CaptureWriter
from protocol.error_codes import error_codes
from purgatory.delayed_operation import DelayedOperation

if TYPE_CHECKING:
    from broker.context import RequestContext

__all__ = [
    "BrokerCapture",
    "CaptureSet",
    "PurgatoryEventListener",
    "operation_kind",
    "replica_id",
]

log = logging.getLogger("broker.capture")

#: The kind a purgatory's operations are when their class names none (a subclass of
#: our own with another name, say): Rebalance holds joins (and syncs, named).
_DEFAULT_KIND: Final[dict[str, DelayedOperationKind]] = {
    "Produce": "DelayedProduce",
    "Fetch": "DelayedFetch",
    "Rebalance": "DelayedJoin",
    "Heartbeat": "DelayedHeartbeat",
}
_kind_cache: dict[tuple[type, str], DelayedOperationKind] = {}


def operation_kind(cls: type, purgatory: str) -> DelayedOperationKind:
    """Kafka's class name of an operation: its own, or its nearest base's that is one of
    Kafka's (``InitialDelayedJoin`` is a ``DelayedJoin``), else the purgatory's kind."""
    cached = _kind_cache.get((cls, purgatory))
    if cached is not None:
        return cached
    kind = _DEFAULT_KIND.get(purgatory, "DelayedFetch")
    for base in cls.__mro__:
        if base.__name__ in DELAYED_OPERATION_KINDS:
            kind = base.__name__
            break
    _kind_cache[(cls, purgatory)] = kind
    return kind


def replica_id(request: Any) -> int | None:
    """The replica id a request carries (Fetch v15+ in its ``replica_state``), else
    None: >= 0 marks a follower's, inter-broker, request."""
    value = getattr(request, "replica_id", None)
    if value is None:
        state = getattr(request, "replica_state", None)
        value = getattr(state, "replica_id", None) if state is not None else None
    return None if value is None else int(value)


class PurgatoryEventListener:
    """One purgatory's listener: writes created/completed/expired events."""

    __slots__ = ("_capture", "_purgatory")

    def __init__(self, capture: BrokerCapture, purgatory: PurgatoryName) -> None:
        self._capture = capture
        self._purgatory: PurgatoryName = purgatory

    def on_watch(self, operation: DelayedOperation, keys: tuple[Hashable, ...]) -> None:
        self._capture.operation_event(operation, self._purgatory, "created", keys)

    def on_complete(self, operation: DelayedOperation) -> None:
        self._capture.operation_event(operation, self._purgatory, "completed", None)

    def on_expire(self, operation: DelayedOperation) -> None:
        self._capture.operation_event(operation, self._purgatory, "expired", None)


class BrokerCapture:
    """Writes one broker's requests and delayed-operation events to a ``CaptureWriter``."""

    def __init__(self, writer: CaptureWriter, broker_id: int) -> None:
        self.writer = writer
        self.broker_id = broker_id
        # id(ctx) -> (ctx, sequence, frame, replica id). The ctx is held so its id cannot
        # be reused by another request while this one is in flight.
        self._inflight: dict[int, tuple[RequestContext, int, bytes, int | None]] = {}
        # id(op) -> (op, operation_id, keys as strings) for operations not yet ended.
        self._operations: dict[int, tuple[DelayedOperation, int, list[str]]] = {}
        self._operation_ids = itertools.count(1)
        self.abandoned = 0
        """Requests received but never answered (connection dropped), seen at close."""
        self.failures = 0
        """Records that could not be written (logged once each); the broker goes on."""
        # Wall clock = monotonic + this offset. The connection stamps a request's wall
        # time only after decoding it (a first decode of a class can take milliseconds),
        # so received_unix_us is derived from the monotonic stamp taken on arrival:
        # then wall and monotonic orders agree, which the replay's causality rule needs.
        self._wall_offset_us = time.time_ns() // 1000 - time.perf_counter_ns() // 1000

    # -- wiring ------------------------------------------------------------------------

    def purgatory_listeners(self) -> dict[BrokerPurgatoryName, PurgatoryEventListener]:
        """One listener per purgatory, for the composition root to build them with."""
        return {name: PurgatoryEventListener(self, name.value) for name in BrokerPurgatoryName}

    # -- requests (Broker.observers) ---------------------------------------------------

    def request_received(self, ctx: RequestContext, request: Any, frame: bytes) -> None:
        # The connection counts from 1 and has just counted this request; the sequence
        # must be read now: by completion time later requests may have been counted.
        self._inflight[id(ctx)] = (ctx, ctx.connection.sequence - 1, frame, replica_id(request))

    def request_completed(self, ctx: RequestContext, response: Any, size: int) -> None:
        entry = self._inflight.pop(id(ctx), None)
        if entry is None:
            return
        _, sequence, frame, replica = entry
        timing = ctx.timing
        header = ctx.header
        b = timing.breakdown_ms()
        try:
            record = CaptureRequest.model_construct(
                broker_id=self.broker_id,
                connection_id=ctx.connection.connection_id,
                sequence=sequence,
                api_key=header.api_key,
                api_name=api_name(header.api_key),
                api_version=header.api_version,
                correlation_id=header.correlation_id,
                client_id=header.client_id,
                request_size=ctx.request_size,
                response_size=size,
                request=bytes(frame),
                received_unix_us=timing.received_ns // 1000 + self._wall_offset_us,
                received_monotonic_us=timing.received_ns // 1000,
                request_queue_time_ms=b["request_queue_ms"],
                local_time_ms=b["local_ms"],
                remote_time_ms=b["remote_ms"],
                throttle_time_ms=0.0,
                response_queue_time_ms=b["response_queue_ms"],
                response_send_time_ms=b["send_ms"],
                total_time_ms=b["total_ms"],
                purgatory=cast(PurgatoryName | None, timing.purgatory),
                purgatory_outcome=cast(PurgatoryOutcome | None, timing.purgatory_outcome),
                error_codes=error_codes(response),
                replica_id=replica,
            )
            self._write(record)
        except Exception:  # a capture must never take the broker down
            self._failed("request")

    # -- delayed operations (PurgatoryEventListener) -----------------------------------

    def operation_event(
        self,
        operation: DelayedOperation,
        purgatory: PurgatoryName,
        event: OperationEvent,
        keys: tuple[Hashable, ...] | None,
    ) -> None:
        try:
            op_key = id(operation)
            if keys is not None:
                key_strings = [watch_key_name(k) for k in keys]
                operation_id = next(self._operation_ids)
                self._operations[op_key] = (operation, operation_id, key_strings)
            else:
                known = self._operations.pop(op_key, None)
                if known is None:
                    return  # watched before the capture was attached
                _, operation_id, key_strings = known
            request: ParkedRequest | None = getattr(operation, "parked_request", None)
            mono_us = time.perf_counter_ns() // 1000
            wall_us = mono_us + self._wall_offset_us
            record = DelayedOperationEvent.model_construct(
                broker_id=self.broker_id,
                operation_id=operation_id,
                kind=operation_kind(type(operation), purgatory),
                purgatory=purgatory,
                keys=key_strings,
                event=event,
                at_unix_us=wall_us,
                at_monotonic_us=mono_us,
                delay_ms=operation.delay_ms,
                connection_id=request.connection_id if request is not None else None,
                correlation_id=request.correlation_id if request is not None else None,
            )
            self._write(record)
        except Exception:
            self._failed("delayed operation event")

    # -- writing -----------------------------------------------------------------------

    def _write(self, record: CaptureRequest | DelayedOperationEvent) -> None:
        writer = self.writer
        writer.write(record)
        writer.maybe_flush(time.monotonic())

    def _failed(self, what: str) -> None:
        self.failures += 1
        if self.failures <= 10:
            log.exception("capture of broker %d: could not write a %s", self.broker_id, what)

    def maybe_flush(self, now_monotonic: float) -> None:
        try:
            self.writer.maybe_flush(now_monotonic)
        except Exception:
            self._failed("flush")

    def close(self) -> None:
        self.abandoned += len(self._inflight)
        self._inflight.clear()
        self._operations.clear()
        self.writer.close()


class CaptureSet:
    """The captures of one cluster: a writer per broker id, all in one directory, and
    the task that flushes them when no record arrives to do it."""

    def __init__(
        self,
        directory: str | Path,
        *,
        roll_bytes: int = DEFAULT_ROLL_BYTES,
        flush_interval_ms: int = DEFAULT_FLUSH_INTERVAL_MS,
    ) -> None:
        self.directory = Path(directory)
        self.roll_bytes = roll_bytes
        self.flush_interval_ms = flush_interval_ms
        self.captures: dict[int, BrokerCapture] = {}
        self._task: asyncio.Task[None] | None = None

    def for_broker(self, broker_id: int) -> BrokerCapture:
        """The capture of ``broker_id``; a restarted broker continues its predecessor's
        files."""
        capture = self.captures.get(broker_id)
        if capture is None:
            writer = CaptureWriter(
                self.directory, broker_id, self.roll_bytes, self.flush_interval_ms
            )
            capture = self.captures[broker_id] = BrokerCapture(writer, broker_id)
        return capture

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._flush_periodically(), name="capture-flush"
            )

    async def _flush_periodically(self) -> None:
        interval_s = max(self.flush_interval_ms / 1000.0, 0.01) / 2
        while True:
            await asyncio.sleep(interval_s)
            now = time.monotonic()
            for capture in self.captures.values():
                capture.maybe_flush(now)

    async def stop(self) -> None:
        """Stop the flush task and close every file (call after the brokers stopped)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        for capture in self.captures.values():
            capture.close()
