"""Capture: every request a broker serves, and every delayed operation's life, to disk.

``BrokerCapture`` is one broker's observer (``Broker.observers``): it is told when a
request has been handled (``request_received``, with the frame as received) and when
its response has been written (``request_completed``); at the second call the timing
breakdown is complete and one ``protocol.capture.CaptureRequest`` is due. It is also
the listener of the broker's four purgatories (``DelayedOperationPurgatory.listener``):
one ``DelayedOperationEvent`` when an operation is watched ("created"), one when it
completes or expires. ``CaptureSet`` owns the captures of a ``MiniKafka`` cluster (one
writer per broker id, kept across a broker's restart) and their timer, on an injected
clock: the batch delays, and the flush of files when traffic is idle.

**Off the request path, batched.** An observer call costs a dict insert
(``request_received``) and a dict pop and a list append (``request_completed``:
references only, the context, the frame, the decoded request and response); an
operation event, one append. ``format_pending`` turns them into JSON lines a batch at a
time, on the loop, when ``_BATCH`` (64) records are queued or ``_BATCH_DELAY_MS`` (5 ms)
after the first: the timing breakdown from the integer stamps, the error-code walk
(``protocol.error_codes``), the line itself (``protocol.capture_files.line_encoder``,
generated from the pydantic model: no model instance per record), and the batch joined
into one call of the writer, which compresses 256 KiB at a time. Every response of the
batch was written before its record is made. About 5 us of CPU for a small request,
against about 60 us when each record was a pydantic model serialised and compressed on
its own (``bench/replay_whatif/capture_bench.py``;
``bench/request_cost/request_cost.py --broker-args '--capture-dir DIR'``).

Why not a thread, although zlib and file writes release the GIL: the loop under load
(uvloop) releases and retakes the GIL around every poll, so a thread waiting for it
never sees the switch interval pass without a switch and never asks for it: measured,
the compression of 3 MB took 10 ms of CPU and 300 ms waiting, records queued by the
tens of megabytes, and a thread that also formatted the records cost more CPU per
record than the loop does. On the loop the cost is plain, bounded by a batch, and needs
no queue between threads.

Losses: a clean stop (``CaptureSet.stop``, after the brokers) writes what is queued and
closes every file. A crash loses what was not flushed: the open gzip member and the
lines not yet compressed (at most the flush interval, one second by default), and the
records queued in the last 5 ms.

Time: ``received_monotonic_us`` and the events' ``at_monotonic_us`` are both
the injected `RequestClock`'s ``monotonic_ns`` (``time.perf_counter_ns`` when serving, the
loop's virtual time in a simulation), the clock the connection stamps requests with, so an
operation's events line up with the request that parked it; the
event's stamp is taken on the loop when it happens, not when it is written.

A request whose response is never written (its connection dropped while it was parked,
or the broker stopped) is not captured; ``abandoned`` counts those seen at ``close``.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Hashable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from broker.server.purgatories import ParkedRequest
from broker.server.purgatories import PurgatoryName as BrokerPurgatoryName
from broker.server.request_timing import RequestClock
from broker.server.scheduler import PeriodicTask
from broker.server.watch_keys import watch_key_name
from protocol.api_registry import api_name
from protocol.capture import (
    DELAYED_OPERATION_KINDS,
    CaptureRequest,
    ClientTelemetryPush,
    DelayedOperationEvent,
    DelayedOperationKind,
    OperationEvent,
    PurgatoryName,
    TelemetryPoint,
)
from protocol.capture_files import (
    DEFAULT_FLUSH_INTERVAL_MS,
    DEFAULT_ROLL_BYTES,
    CaptureWriter,
    line_encoder,
)
from protocol.error_codes import error_codes
from purgatory import Clock, ExpirationReaper, SystemTimer, TimerTask
from purgatory.delayed_operation import DelayedOperation

if TYPE_CHECKING:
    from broker.observability.client_telemetry.client_metrics_instance import (
        ClientMetricsInstance,
    )
    from broker.observability.client_telemetry.otlp_payload import TelemetryPayload
    from broker.server.context import RequestContext

__all__ = [
    "BrokerCapture",
    "CaptureSet",
    "PurgatoryEventListener",
    "operation_kind",
    "replica_id",
]

log = logging.getLogger("broker.capture")  # the name its log lines have always carried


#: Records formatted and handed to the writer together ...
_BATCH: Final = 64
#: ... or, when fewer come, this long after the first of them was queued (ms).
_BATCH_DELAY_MS: Final = 5

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
        "throttle_time_ms",
        "response_queue_time_ms",
        "response_send_time_ms",
        "total_time_ms",
        "purgatory",
        "purgatory_outcome",
        "error_codes",
        "replica_id",
        "principal",
        "listener_name",
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
    "DeleteRecords": "DelayedDeleteRecords",
    "ShareFetch": "DelayedShareFetch",
    "RemoteFetch": "DelayedRemoteFetch",
    "RemoteListOffsets": "DelayedRemoteListOffsets",
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


class _FormatLater(TimerTask):
    """A capture's batch delay: formats what is queued when the timer runs it."""

    __slots__ = ("capture",)

    def __init__(self, capture: BrokerCapture) -> None:
        super().__init__(_BATCH_DELAY_MS)
        self.capture = capture

    def run(self) -> None:
        capture = self.capture
        if capture._format_later is self:
            capture._format_later = None
            capture.format_pending()


class BrokerCapture:
    """One broker's requests and delayed-operation events: queued by the observer calls,
    written to a ``CaptureWriter`` as JSON lines a batch at a time.

    ``timer`` runs the batch delay (``CaptureSet``'s, on its injected clock); without
    one, every record is written as soon as it is queued.
    """

    def __init__(
        self,
        writer: CaptureWriter,
        broker_id: int,
        timer: SystemTimer | None = None,
        request_clock: RequestClock | None = None,
    ) -> None:
        self.writer = writer
        # The clocks the connection stamps requests with (virtual in a simulation).
        self._clocks = request_clock or RequestClock()
        self.broker_id = broker_id
        self._timer = timer
        # id(ctx) -> (ctx, sequence, frame, request); the ctx is held so its id cannot be
        # reused by another request while this one is in flight.
        self._inflight: dict[int, _Received] = {}
        # Completed requests and operation events not yet written, in order.
        self._pending: list[_Queued] = []
        self._format_later: _FormatLater | None = None
        # id(op) -> (op, operation_id, keys as strings), until the op ends.
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
        self._wall_offset_us = (
            round(self._clocks.wall_ms() * 1000) - self._clocks.monotonic_ns() // 1000
        )

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
            pending = self._pending
            pending.append((entry, response, size))
            if len(pending) >= _BATCH:
                self.format_pending()
            elif self._format_later is None:
                self._arm_timer()

    # -- on the loop: delayed operations (PurgatoryEventListener) ----------------------

    def operation_event(
        self,
        operation: DelayedOperation,
        purgatory: PurgatoryName,
        event: OperationEvent,
        keys: tuple[Hashable, ...] | None,
    ) -> None:
        request: ParkedRequest | None = getattr(operation, "parked_request", None)
        pending = self._pending
        now_ns = self._clocks.monotonic_ns()
        pending.append((operation, purgatory, event, keys, now_ns, request))
        if len(pending) >= _BATCH:
            self.format_pending()
        elif self._format_later is None:
            self._arm_timer()

    # -- on the loop: client telemetry (ClientTelemetryReceiver's listener) --------------

    def client_telemetry_pushed(
        self, instance: ClientMetricsInstance, payload: TelemetryPayload
    ) -> None:
        """One ``ClientTelemetryPush`` line for an accepted KIP-714 push, written at once
        (a push comes every few seconds per client at most: no batching needed)."""
        client = instance.attributes
        mono_us = self._clocks.monotonic_ns() // 1000
        record = ClientTelemetryPush(
            broker_id=self.broker_id,
            connection_id=client.connection_id,
            client_id=client.client_id,
            client_instance_id=str(instance.instance_id),
            client_software_name=client.software_name,
            client_software_version=client.software_version,
            received_unix_us=mono_us + self._wall_offset_us,
            received_monotonic_us=mono_us,
            resource=dict(payload.resource),
            points=[
                TelemetryPoint(
                    name=p.name,
                    kind=p.kind,
                    value=p.value,
                    attributes=dict(p.attributes),
                    time_unix_nano=p.time_unix_nano,
                    monotonic=p.monotonic,
                    delta=p.delta,
                    count=p.count,
                )
                for p in payload.points
            ],
        )
        try:
            self.writer.write_lines(record.model_dump_json().encode() + b"\n", 1)
        except Exception:
            self._failed("client telemetry push")

    # -- on the loop: a batch at a time -------------------------------------------------

    def _arm_timer(self) -> None:
        if self._timer is None:
            self.format_pending()
            return
        self._format_later = _FormatLater(self)
        self._timer.add(self._format_later)

    def format_pending(self) -> int:
        """Write what the observer calls queued: their JSON lines, joined, to the writer
        (on the loop, when ``_BATCH`` records are queued or ``_BATCH_DELAY_MS`` after the
        first). The records written."""
        pending = self._pending
        if not pending:
            return 0
        self._pending = []
        request_line = self._request_line
        event_line = self._event_line
        lines: list[bytes] = []
        append = lines.append
        for item in pending:
            try:
                line = request_line(item) if len(item) == 3 else event_line(item)
            except Exception:  # a capture must never take the broker down
                self._failed("request" if len(item) == 3 else "delayed operation event")
                continue
            if line is not None:
                append(line)
        if not lines:
            return 0
        try:
            self.writer.write_lines(b"".join(lines), len(lines))
        except Exception:
            self._failed("batch of records")
            return 0
        return len(lines)

    def maybe_flush(self, now_monotonic: float) -> None:
        try:
            self.writer.maybe_flush(now_monotonic)
        except Exception:
            self._failed("flush")

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
            float(t.throttle_time_ms),
            max(send_start - remote_end + 500, 0) // 1000 / 1000,
            max(send_end - send_start + 500, 0) // 1000 / 1000,
            max(send_end - received + 500, 0) // 1000 / 1000,
            t.purgatory,
            t.purgatory_outcome,
            error_codes(response),
            replica_id(request),
            str(ctx.connection.principal),
            ctx.connection.listener_name,
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
        """Write what is queued and close the file."""
        self.abandoned += len(self._inflight)
        self._inflight.clear()
        if self._format_later is not None:
            self._format_later.cancel()
            self._format_later = None
        self.format_pending()
        self._operations.clear()
        self.writer.close()


class CaptureSet:
    """The captures of one cluster: a writer per broker id, all in one directory, and
    their timer — the brokers' batch delays and the flush of files that no record
    arrives to flush — on ``clock``, driven by its own ExpirationReaper between
    ``start`` and ``stop`` (a unit test drives it with ``ManualClock`` instead)."""

    def __init__(
        self,
        directory: str | Path,
        *,
        clock: Clock,
        request_clock: RequestClock | None = None,
        cluster_config: Mapping[str, str] | None = None,
        roll_bytes: int = DEFAULT_ROLL_BYTES,
        flush_interval_ms: int = DEFAULT_FLUSH_INTERVAL_MS,
    ) -> None:
        self.directory = Path(directory)
        self.roll_bytes = roll_bytes
        self.flush_interval_ms = flush_interval_ms
        self.captures: dict[int, BrokerCapture] = {}
        self.cluster_config = dict(cluster_config or {})
        self._clock = clock
        self._request_clock = request_clock or RequestClock()
        self.timer = SystemTimer(clock, name="capture")
        self._reaper = ExpirationReaper(self.timer, "capture")
        self._flusher = PeriodicTask(
            self.timer, "capture-flush", max(flush_interval_ms / 2, 10), self.flush_idle
        )

    def for_broker(self, broker_id: int) -> BrokerCapture:
        """The capture of ``broker_id``; a restarted broker continues its predecessor's
        files."""
        capture = self.captures.get(broker_id)
        if capture is None:
            clocks = self._request_clock
            writer = CaptureWriter(
                self.directory,
                broker_id,
                self.roll_bytes,
                self.flush_interval_ms,
                wall_clock_us=lambda: round(clocks.wall_ms() * 1000),
                cluster_config=self.cluster_config,
            )
            capture = self.captures[broker_id] = BrokerCapture(
                writer, broker_id, self.timer, clocks
            )
        return capture

    def start(self) -> None:
        """Run the timer on the event loop (the reaper) and the periodic flush."""
        if not self._flusher.running:
            self._flusher.start()
            self._reaper.start()

    def flush_idle(self) -> None:
        """Flush each file whose flush interval has passed (the periodic task's job)."""
        now_s = self._clock.now_ms() / 1000
        for capture in self.captures.values():
            capture.maybe_flush(now_s)

    async def stop(self) -> None:
        """Stop the timer, write what is queued and close every file (call after the
        brokers stopped)."""
        self._flusher.stop()
        await self._reaper.stop()
        for capture in self.captures.values():
            capture.close()
