"""One client connection: frames in, handlers run, responses out in request order.

Built on ``asyncio.Protocol`` rather than streams: there is no per-request coroutine and
no reader task, so a request costs one callback from the event loop. Requests are
handled as they arrive (pipelining), but responses leave strictly in request order, as
Kafka guarantees: a response that is ready waits behind an earlier one that is parked in
a purgatory. A produce with acks=0 takes its place in that order and sends nothing.

A peer that sends bytes we cannot read is the peer's problem: we log why and close that
one connection, as Kafka does; no other connection notices.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections import deque
from typing import TYPE_CHECKING, Any, cast

from broker.context import ConnectionInfo, RequestContext, RequestTiming
from protocol.codec import (
    encode_response,
    parse_request_header,
    unsupported_version_api_versions_response,
)
from protocol.errors import ProtocolError
from protocol.frames import FrameDecoder

if TYPE_CHECKING:
    from broker.broker import Broker

log = logging.getLogger("broker.connection")

API_VERSIONS_KEY = 18


class _Pending:
    """A request whose response has not been written yet."""

    __slots__ = ("ctx", "future", "raw", "ready", "response")

    def __init__(self, ctx: RequestContext | None) -> None:
        self.ctx = ctx
        self.future: asyncio.Future[Any] | None = None
        self.ready = False
        self.response: Any = None
        self.raw: bytes | None = None  # pre-encoded answer (version probing)


class KafkaConnection(asyncio.Protocol):
    """asyncio protocol speaking Kafka's request/response framing for one broker."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self._decoder = FrameDecoder(broker.config.socket_request_max_bytes)
        self._pending: deque[_Pending] = deque()
        self._transport: asyncio.Transport | None = None
        self._closed = False
        self._info = ConnectionInfo("", "", 0, broker.port)
        # Responses held back by injected latency: (due perf_counter ns, bytes, ctx, response).
        self._delayed: deque[tuple[int, bytes, RequestContext | None, Any]] = deque()
        self._delayed_timer: asyncio.TimerHandle | None = None

    # -- asyncio callbacks -------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self._transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername") or ("?", 0)
        sock = transport.get_extra_info("sockname") or ("?", self._broker.port)
        self._info = ConnectionInfo(
            connection_id=f"{sock[0]}:{sock[1]}-{peer[0]}:{peer[1]}-{self._broker.next_connection_index()}",
            client_host=str(peer[0]),
            client_port=int(peer[1]),
            listener_port=int(sock[1]),
            close=self.abort,
        )
        self._broker.connection_opened(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        if self._delayed_timer is not None:
            self._delayed_timer.cancel()
            self._delayed_timer = None
        self._delayed.clear()
        for pending in self._pending:
            if pending.future is not None and not pending.future.done():
                pending.future.cancel()
        self._pending.clear()
        self._broker.connection_closed(self)

    def pause_writing(self) -> None:
        # The client is not reading its responses: stop reading its requests.
        if self._transport is not None:
            self._transport.pause_reading()

    def resume_writing(self) -> None:
        if self._transport is not None and not self._closed:
            self._transport.resume_reading()

    def data_received(self, data: bytes) -> None:
        if self._closed:
            return
        received_ns = time.perf_counter_ns()
        try:
            frames = self._decoder.feed(data)
        except ProtocolError as exc:
            # Answer what arrived whole before the bad length prefix, then close.
            for frame in getattr(exc, "complete_frames", ()):
                self._on_frame(frame, received_ns)
            self.abort(f"bad frame: {exc}")
            return
        for frame in frames:
            if self._closed:
                return
            self._on_frame(frame, received_ns)

    # -- requests ----------------------------------------------------------------------

    def _on_frame(self, frame: bytes, received_ns: int) -> None:
        broker = self._broker
        try:
            header, body_offset = parse_request_header(frame)
        except ProtocolError as exc:
            self.abort(f"malformed request header: {exc}")
            return
        handler = broker.handlers.get(header.api_key)
        if handler is None:
            self.abort(f"unknown API key {header.api_key}")
            return
        if not handler.min_version <= header.api_version <= handler.max_version:
            if header.api_key == API_VERSIONS_KEY:
                # Kafka's rule: answer in v0 with UNSUPPORTED_VERSION and our ranges, so
                # the client can retry with a version we speak.
                self._write_raw(
                    unsupported_version_api_versions_response(
                        header.correlation_id, broker.api_specs()
                    )
                )
                return
            self.abort(
                f"unsupported version {header.api_version} of {handler.name} "
                f"(supported {handler.min_version}..{handler.max_version})"
            )
            return
        try:
            request = broker.decode_request(header, frame, body_offset)
        except ProtocolError as exc:
            self.abort(f"malformed {handler.name} v{header.api_version} request: {exc}")
            return

        info = self._info
        info.sequence += 1
        timing = RequestTiming(received_ns=received_ns, wall_received_ms=time.time() * 1000.0)
        ctx = RequestContext(header, info, broker, timing, len(frame) + 4)
        pending = _Pending(ctx)
        self._pending.append(pending)
        timing.local_start_ns = time.perf_counter_ns()
        try:
            # An injected fault answers with an error instead of running the handler.
            injected = broker.faults.intercept(ctx, request)
            result = handler.handle(ctx, request) if injected is None else injected
        except Exception:
            log.exception(
                "handler %s v%d failed on %s", handler.name, header.api_version, info.connection_id
            )
            self.abort("internal error while handling a request")
            return
        finally:
            timing.local_end_ns = time.perf_counter_ns()
        broker.request_received(ctx, request, frame)
        if isinstance(result, asyncio.Future):
            pending.future = result
            result.add_done_callback(functools.partial(self._on_parked_done, pending))
        else:
            pending.response = result
            pending.ready = True
            if self._pending[0] is pending:
                self._flush()

    def _on_parked_done(self, pending: _Pending, _future: object = None) -> None:
        future = pending.future
        assert future is not None
        assert pending.ctx is not None
        pending.ctx.timing.remote_end_ns = time.perf_counter_ns()
        if future.cancelled() or self._closed:
            return
        exc = future.exception()
        if exc is not None:
            log.error("parked request failed: %r", exc)
            self.abort("internal error while completing a request")
            return
        pending.response = future.result()
        pending.ready = True
        self._flush()

    def _flush(self) -> None:
        """Write every ready response at the head of the queue, in request order."""
        transport = self._transport
        queue = self._pending
        broker = self._broker
        while queue and queue[0].ready:
            pending = queue.popleft()
            ctx = pending.ctx
            if ctx is None:
                if self._delayed and pending.raw is not None:
                    self._delayed.append((0, pending.raw, None, None))  # keep its place
                elif transport is not None and pending.raw is not None and not self._closed:
                    transport.write(pending.raw)
                continue
            timing = ctx.timing
            if pending.response is None:  # acks=0: nothing is sent, order is kept
                timing.send_start_ns = timing.send_end_ns = time.perf_counter_ns()
                broker.request_completed(ctx, None, 0)
                continue
            header = ctx.header
            delay_ms = broker.faults.response_delay_ms(broker.broker_id)
            if delay_ms > 0 or self._delayed:
                self._write_later(delay_ms, ctx, pending.response)
                continue
            timing.send_start_ns = time.perf_counter_ns()
            data = encode_response(
                header.api_key, header.api_version, header.correlation_id, pending.response
            )
            if transport is not None and not self._closed:
                transport.write(data)
            timing.send_end_ns = time.perf_counter_ns()
            broker.request_completed(ctx, pending.response, len(data))

    # -- injected response latency (broker/control/faults.py) ---------------------------

    def _write_later(self, delay_ms: int, ctx: RequestContext, response: Any) -> None:
        """Queue a response to be written ``delay_ms`` from now, behind every response
        already delayed: one queue and one timer per connection keep request order even
        when the delay changes between responses."""
        header = ctx.header
        data = encode_response(header.api_key, header.api_version, header.correlation_id, response)
        due_ns = time.perf_counter_ns() + delay_ms * 1_000_000
        self._delayed.append((due_ns, data, ctx, response))
        if self._delayed_timer is None:
            self._arm_delayed(due_ns)

    def _arm_delayed(self, due_ns: int) -> None:
        # Timers may fire early (uvloop rounds to whole ms), so the due time is checked
        # against perf_counter on firing and the timer re-armed for what is left.
        wait_s = max(due_ns - time.perf_counter_ns(), 0) / 1e9 + 0.0005
        self._delayed_timer = asyncio.get_running_loop().call_later(wait_s, self._write_delayed)

    def _write_delayed(self) -> None:
        self._delayed_timer = None
        delayed = self._delayed
        broker = self._broker
        transport = self._transport
        while delayed:
            due_ns, data, ctx, response = delayed[0]
            now = time.perf_counter_ns()
            if due_ns > now:
                self._arm_delayed(due_ns)
                return
            delayed.popleft()
            if ctx is not None:
                ctx.timing.send_start_ns = now
            if transport is not None and not self._closed:
                transport.write(data)
            if ctx is not None:
                ctx.timing.send_end_ns = time.perf_counter_ns()
                broker.request_completed(ctx, response, len(data))

    def _write_raw(self, data: bytes) -> None:
        """Queue pre-encoded bytes behind every response still in flight."""
        pending = _Pending(None)
        pending.raw = data
        pending.ready = True
        self._pending.append(pending)
        self._flush()

    def abort(self, reason: str) -> None:
        """Close this connection because of what its peer sent; others are untouched."""
        if self._closed:
            return
        log.warning("closing connection %s: %s", self._info.connection_id, reason)
        self._closed = True
        if self._transport is not None:
            self._transport.close()

    @property
    def info(self) -> ConnectionInfo:
        return self._info
