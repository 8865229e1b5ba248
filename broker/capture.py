"""Capture: every request a broker serves, and every delayed operation's life, to disk.

``BrokerCapture`` is one broker's observer (``Broker.observers``): it is told when a
request has been handled (``request_received``, with the frame as received) and when
its response has been written (``request_completed``); at the second call the timing
breakdown is complete and one ``protocol.capture.CaptureRequest`` is due. It is also
the listener of the broker's four purgatories (``DelayedOperationPurgatory.listener``):
one ``DelayedOperationEvent`` when an operation is watched ("created"), one when it
completes or expires. ``CaptureSet`` owns the captures of a ``MiniKafka`` cluster (one
writer per broker id, kept across a broker's restart) and the thread that writes them.

**Off the request path.** On the event loop a request costs a dict insert at
``request_received`` and, at ``request_completed``, a dict pop and one tuple appended to
a deque (references only: the context, the frame, the decoded request and response);
an operation event, one tuple. The capture thread (``CaptureSet``, one per cluster)
takes what is queued every ``_POLL_S`` (0.1 s), in order, and does the rest: the timing
breakdown, the error-code walk (``protocol.error_codes``), the record's JSON line
(``protocol.capture_files.line_encoder``: generated from the pydantic model, no model
instance built), the gzip compression and the file IO. What the thread reads is
settled by then: a completed request's context, timing, frame, request and response
are not changed again, and an operation's keys and timeout never are.

The GIL: compression and file writes release it; the Python part holds it for
``_CHUNK`` (16) records at a time (a few hundred microseconds), then hands the chunk
to the compressor, so the loop, when it wants the GIL back, waits at most about that
long. Larger chunks cost less CPU but, holding the GIL for milliseconds, slow a
latency-bound client down more than they save (``bench/capture_bench.py`` measured
128 against 16). Per record the thread spends about 10 us of CPU (a Produce of a few
records), against about 60 us when the loop built a pydantic model and serialised it.

Losses: a clean stop (``CaptureSet.stop``, after the brokers) drains every queue and
closes every file, so nothing is lost. A crash loses the records queued since the
thread's last pass (``_POLL_S``) and the open gzip member (at most the flush interval,
one second by default), as before. Memory is bounded: a queue past ``_HIGH_WATER``
records (the thread starved of CPU) is written by the loop itself, under the same lock,
so the broker slows down instead of dropping records or growing without end.

Time: ``received_monotonic_us`` and the events' ``at_monotonic_us`` are both
``time.perf_counter_ns`` (CLOCK_MONOTONIC on Linux), the clock the connection stamps
requests with, so an operation's events line up with the request that parked it; the
event's stamp is taken on the loop when it happens, not when it is written.

A request whose response is never written (its connection dropped while it was parked,
or the broker stopped) is not captured; ``abandoned`` counts those seen at ``close``.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Hashable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

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
)
from protocol.capture_files import (
    DEFAULT_FLUSH_INTERVAL_MS,
    DEFAULT_ROLL_BYTES,
    CaptureWriter,
    line_encoder,
)
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

#: How often the capture thread takes what is queued (seconds).
_POLL_S: Final = 0.1
#: Records encoded between two writes to the compressor (each releases the GIL).
_CHUNK: Final = 16
#: Queued records past which the loop writes them itself (see the module docstring).
_HIGH_WATER: Final = 20_000

# The JSON lines, generated from the models: the arguments in the order of these names
# (checked against the models' fields when this module is imported).
_encode_request = line_encoder(
    CaptureRequest,
    (
        "broker_id",
        "connection_id",
        "sequence",
        "api_key",
        "api_name",
        "api_version",
        "correlation_id",
        "client_id",
        "request_size",
        "response_size",
        "request",
        "received_unix_us",
        "received_monotonic_us",
        "request_queue_time_ms",
        "local_time_ms",
        "remote_time_ms",
        "response_queue_time_ms",
        "response_send_time_ms",
        "total_time_ms",
        "purgatory",
        "purgatory_outcome",
        "error_codes",
        "replica_id",
    ),
)
_encode_event = line_encoder(
    DelayedOperationEvent,
    (
        "broker_id",
        "operation_id",
        "kind",
        "purgatory",
        "keys",
        "event",
        "at_unix_us",
        "at_monotonic_us",
        "delay_ms",
        "connection_id",
        "correlation_id",
    ),
)

#: The kind a purgatory's operations are when their class names none (a subclass of
#: our own with another name, say): Rebalance holds joins (and syncs, named).
_DEFAULT_KIND: Final[dict[str, DelayedOperationKind]] = {
    "Produce": "DelayedProduce",
    "Fetch": "DelayedFetch",
    "Rebalance": "DelayedJoin",
    "Heartbeat": "DelayedHeartbeat",
}
_kind_cache: dict[tuple[type, str], DelayedOperationKind] = {}
_api_names: dict[int, str] = {}


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


def _api_name(api_key: int) -> str:
    name = _api_names.get(api_key)
    if name is None:
        name = _api_names[api_key] = api_name(api_key)
    return name


class PurgatoryEventListener:
    """One purgatory's listener: queues created/completed/expired events."""

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


# What the loop queues: a completed request, ((ctx, sequence, frame, request), response,
# response size); an operation event, (operation, purgatory, event, keys or None,
# monotonic ns, the parked request or None).
_Received = tuple["RequestContext", int, bytes, Any]
_Queued = tuple[Any, ...]


class BrokerCapture:
    """One broker's requests and delayed-operation events, queued on the loop and
    written to a ``CaptureWriter`` by ``drain`` (the capture thread)."""

    def __init__(self, writer: CaptureWriter, broker_id: int) -> None:
        self.writer = writer
        self.broker_id = broker_id
        # id(ctx) -> (ctx, sequence, frame, request). The ctx is held so its id cannot
        # be reused by another request while this one is in flight. Loop only.
        self._inflight: dict[int, _Received] = {}
        # Completed requests and operation events, in the order they happened: appended
        # on the loop, popped by whoever holds _lock (deque's ends are thread-safe).
        self._queue: deque[_Queued] = deque()
        self._lock = threading.Lock()
        # Under _lock: id(op) -> (op, operation_id, keys as strings), until it ends.
        self._operations: dict[int, tuple[DelayedOperation, int, list[str]]] = {}
        self._operation_ids = itertools.count(1)
        self.abandoned = 0
        """Requests received but never answered (connection dropped), seen at close."""
        self.failures = 0
        """Records that could not be written (logged once each); the broker goes on."""
        self.loop_drains = 0
        """Times the queue passed ``_HIGH_WATER`` and the loop wrote it itself."""
        # Wall clock = monotonic + this offset. The connection stamps a request's wall
        # time only after decoding it (a first decode of a class can take milliseconds),
        # so received_unix_us is derived from the monotonic stamp taken on arrival:
        # then wall and monotonic orders agree, which the replay's causality rule needs.
        self._wall_offset_us = time.time_ns() // 1000 - time.perf_counter_ns() // 1000

    # -- wiring ------------------------------------------------------------------------

    def purgatory_listeners(self) -> dict[BrokerPurgatoryName, PurgatoryEventListener]:
        """One listener per purgatory, for the composition root to build them with."""
        return {name: PurgatoryEventListener(self, name.value) for name in BrokerPurgatoryName}

    # -- on the loop: requests (Broker.observers) --------------------------------------

    def request_received(self, ctx: RequestContext, request: Any, frame: bytes) -> None:
        # The connection counts from 1 and has just counted this request; the sequence
        # must be read now: by completion time later requests may have been counted.
        self._inflight[id(ctx)] = (ctx, ctx.connection.sequence - 1, frame, request)

    def request_completed(self, ctx: RequestContext, response: Any, size: int) -> None:
        entry = self._inflight.pop(id(ctx), None)
        if entry is not None:
            queue = self._queue
            queue.append((entry, response, size))
            if len(queue) > _HIGH_WATER:
                self._loop_drain()

    # -- on the loop: delayed operations (PurgatoryEventListener) ----------------------

    def operation_event(
        self,
        operation: DelayedOperation,
        purgatory: PurgatoryName,
        event: OperationEvent,
        keys: tuple[Hashable, ...] | None,
    ) -> None:
        request: ParkedRequest | None = getattr(operation, "parked_request", None)
        queue = self._queue
        queue.append((operation, purgatory, event, keys, time.perf_counter_ns(), request))
        if len(queue) > _HIGH_WATER:
            self._loop_drain()

    def _loop_drain(self) -> None:
        self.loop_drains += 1
        if self.loop_drains == 1:
            log.warning(
                "capture of broker %d: more than %d records queued; the broker writes them "
                "itself (counted in loop_drains)",
                self.broker_id,
                _HIGH_WATER,
            )
        self.drain()

    # -- on the capture thread -----------------------------------------------------------

    def drain(self, now_monotonic: float | None = None) -> int:
        """Write every queued record, in order; then flush if the interval has passed
        (with ``now_monotonic``). Any thread; one at a time. Records written."""
        queue = self._queue
        popleft = queue.popleft
        request_line = self._request_line
        event_line = self._event_line
        written = 0
        with self._lock:
            lines: list[bytes] = []
            append = lines.append
            while queue:
                item = popleft()
                try:
                    line = request_line(item) if len(item) == 3 else event_line(item)
                except Exception:  # a capture must never take the broker down
                    self._failed("request" if len(item) == 3 else "delayed operation event")
                    continue
                if line is not None:
                    append(line)
                    if len(lines) >= _CHUNK:
                        written += self._write(lines)
                        lines = []
                        append = lines.append
            if lines:
                written += self._write(lines)
            if now_monotonic is not None:
                try:
                    self.writer.maybe_flush(now_monotonic)
                except Exception:
                    self._failed("flush")
        return written

    def _write(self, lines: list[bytes]) -> int:
        try:
            self.writer.write_lines(b"".join(lines), len(lines))
        except Exception:
            self._failed("batch of records")
            return 0
        return len(lines)

    def _request_line(self, item: _Queued) -> bytes:
        (ctx, sequence, frame, request), response, size = item
        header = ctx.header
        api_key = header.api_key
        t = ctx.timing
        # RequestTiming.breakdown_ms's arithmetic on the ints: each phase rounded to the
        # microsecond (+500 // 1000), never negative, as milliseconds.
        received = t.received_ns
        local_start = t.local_start_ns
        local_end = t.local_end_ns
        remote_end = t.remote_end_ns or local_end
        ready = t.response_ready_ns or remote_end
        send_end = t.send_end_ns or ready
        send_start = t.send_start_ns or ready
        received_us = received // 1000
        name = _api_names.get(api_key) or _api_name(api_key)
        return _encode_request(
            self.broker_id,
            ctx.connection.connection_id,
            sequence,
            api_key,
            name,
            header.api_version,
            header.correlation_id,
            header.client_id,
            ctx.request_size,
            size,
            frame,
            received_us + self._wall_offset_us,
            received_us,
            max(local_start - received + 500, 0) // 1000 / 1000,
            max(local_end - local_start + 500, 0) // 1000 / 1000,
            max(remote_end - local_end + 500, 0) // 1000 / 1000,
            max(send_start - remote_end + 500, 0) // 1000 / 1000,
            max(send_end - send_start + 500, 0) // 1000 / 1000,
            max(send_end - received + 500, 0) // 1000 / 1000,
            t.purgatory,
            t.purgatory_outcome,
            error_codes(response),
            replica_id(request),
        )

    def _event_line(self, item: _Queued) -> bytes | None:
        operation: DelayedOperation
        purgatory: PurgatoryName
        keys: tuple[Hashable, ...] | None
        request: ParkedRequest | None
        operation, purgatory, event, keys, mono_ns, request = item
        op_key = id(operation)
        if keys is not None:
            key_strings = [watch_key_name(k) for k in keys]
            operation_id = next(self._operation_ids)
            self._operations[op_key] = (operation, operation_id, key_strings)
        else:
            known = self._operations.pop(op_key, None)
            if known is None:
                return None  # watched before the capture was attached
            _, operation_id, key_strings = known
        mono_us = mono_ns // 1000
        return _encode_event(
            self.broker_id,
            operation_id,
            operation_kind(type(operation), purgatory),
            purgatory,
            key_strings,
            event,
            mono_us + self._wall_offset_us,
            mono_us,
            operation.delay_ms,
            request.connection_id if request is not None else None,
            request.correlation_id if request is not None else None,
        )

    def _failed(self, what: str) -> None:
        self.failures += 1
        if self.failures <= 10:
            log.exception("capture of broker %d: could not write a %s", self.broker_id, what)

    def close(self) -> None:
        """Write what is queued and close the file (after the capture thread stopped)."""
        self.abandoned += len(self._inflight)
        self._inflight.clear()
        self.drain()
        with self._lock:
            self._operations.clear()
            self.writer.close()


class CaptureSet:
    """The captures of one cluster: a writer per broker id, all in one directory, and
    the thread that writes and flushes them."""

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
        self._all: tuple[BrokerCapture, ...] = ()  # what the thread reads (swapped whole)
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()

    def for_broker(self, broker_id: int) -> BrokerCapture:
        """The capture of ``broker_id``; a restarted broker continues its predecessor's
        files."""
        capture = self.captures.get(broker_id)
        if capture is None:
            writer = CaptureWriter(
                self.directory, broker_id, self.roll_bytes, self.flush_interval_ms
            )
            capture = self.captures[broker_id] = BrokerCapture(writer, broker_id)
            self._all = tuple(self.captures.values())
        return capture

    def start(self) -> None:
        if self._thread is None:
            self._stopping.clear()
            # A daemon: a crashed broker's process must be able to exit without it.
            self._thread = threading.Thread(target=self._run, name="capture-writer", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        stopping = self._stopping
        while not stopping.wait(_POLL_S):
            now = time.monotonic()
            for capture in self._all:
                capture.drain(now)

    async def stop(self) -> None:
        """Stop the thread, write what is left and close every file (call after the
        brokers stopped)."""
        thread = self._thread
        if thread is not None:
            self._stopping.set()
            await asyncio.to_thread(thread.join)
            self._thread = None
        for capture in self.captures.values():
            capture.close()
