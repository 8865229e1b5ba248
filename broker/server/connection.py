"""One client connection: frames in, one request at a time, responses out in order.

Built on ``asyncio.Protocol`` rather than streams: there is no per-request coroutine and
no reader task, so a request costs one callback from the event loop. What happens to a
request is the dispatcher's business (``broker/server/dispatch.py``); this module only cuts
frames, keeps the order, writes, and decides when to read.

**One request in progress, as Kafka.** Kafka's SocketServer *mutes* a channel once it
has read a request and unmutes it only when that request's response is sent: a
connection never has two requests in the broker at once. The same here: frames that
arrive while a request is parked in a purgatory wait in this connection's backlog, and
reading from the socket stops (``pause_reading``) until the parked request is answered;
TCP's own flow control then holds the client back. So whatever a client sends, it
costs the broker one request in progress and at most one socket read of buffered
bytes (plus the one frame being assembled, up to ``socket.request.max.bytes``).
Requests answered at once cost nothing extra: a pipelined batch is handled frame after
frame in one callback. A produce with acks=0 has nothing to wait for.

**Throttled, as Kafka (KIP-219).** A client over a quota gets its response at once
with its throttle time, and the connection is then muted for that long: the quota
managers make a ``ThrottledChannel`` (``broker/quota/throttled_channel.py``) that calls
``start_throttling`` here (mute: nothing more is read) and, from its timer, when the
time has passed, ``end_throttling`` (unmute, unless a request is still parked). The
same backlog and ``pause_reading`` as for a parked request: a client that keeps sending
while throttled costs what it costs while parked.

A peer that sends bytes we cannot read is the peer's problem: we log why and close that
one connection, as Kafka does, and nothing it sent after the bad frame is processed; no
other connection notices. A client that stops reading its responses is not read from
either (``pause_writing``). A connection with nothing in flight for
``connections.max.idle.ms`` is closed by the broker's idle check (``idle_since_ms``).

**Listeners.** A connection on a TLS or SASL listener is given that listener's
``ChannelBuilder`` (``broker/security/listeners.py``): its principal (a client
certificate's) and, on SASL listeners, an authenticator that sees every frame before the
dispatcher until the exchange is complete, as Kafka's channel is not ready before it. A
failed authentication writes its answer (if any) and closes the connection. Once
authenticated, a SaslHandshake from a client that supports re-authentication (KIP-368)
starts a new exchange, and any other request after the session expired closes the
connection, as Kafka's SocketServer does.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections import deque
from collections.abc import Callable
from typing import cast

from broker.security.listeners import ChannelBuilder
from broker.security.sasl_server import AuthenticationFailed, SaslServerAuthenticator
from broker.server.context import ConnectionInfo
from broker.server.dispatch import CloseConnection, HandlerPool, InFlight, RequestDispatcher
from broker.server.request_timing import RequestClock
from protocol.errors import ProtocolError
from protocol.frames import FrameDecoder
from protocol.service_times import service_key_of
from purgatory import Clock

log = logging.getLogger("broker.connection")  # the name its log lines have always carried

SASL_HANDSHAKE_KEY = (17).to_bytes(2, "big")  # a request frame starts with its API key


class KafkaConnection(asyncio.Protocol):
    """asyncio protocol speaking Kafka's request/response framing for one listener."""

    def __init__(
        self,
        dispatcher: RequestDispatcher,
        request_clock: RequestClock,
        clock: Clock,
        max_request_bytes: int,
        connection_index: int,
        on_close: Callable[[KafkaConnection], None],
        channel: ChannelBuilder | None = None,
    ) -> None:
        self._channel = channel
        self._authenticator: SaslServerAuthenticator | None = None
        self._session: SaslServerAuthenticator | None = None  # the completed one
        self._dispatcher = dispatcher
        self._request_clock = request_clock
        self._clock = clock
        self._decoder = FrameDecoder(max_request_bytes)
        self._max_request_bytes = max_request_bytes
        self._index = connection_index
        self._on_close = on_close
        self._pending: deque[InFlight] = deque()
        self._backlog: deque[bytes] = deque()
        self._fatal: str | None = None  # a bad frame read: close once the backlog is done
        self._transport: asyncio.Transport | None = None
        self._closed = False
        self._muted = False
        self._throttled = False  # KIP-219: muted until a ThrottledChannel ends
        self._write_paused = False
        self._reading_paused = False
        self._last_active_ms = clock.now_ms()
        self._info = ConnectionInfo("", "", 0, 0)
        # Responses encoded while a read is handled, written together at its end.
        self._in_read = False
        self._out: list[tuple[InFlight, bytes | None]] = []
        # The request parked now (muting: at most one) and the context its future's
        # callback runs in: one per connection, not one per parked request.
        self._parked: InFlight | None = None
        self._callback_context = contextvars.copy_context()

    # -- asyncio callbacks -------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self._transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername") or ("?", 0)
        sock = transport.get_extra_info("sockname") or ("?", 0)
        self._info = ConnectionInfo(
            connection_id=f"{sock[0]}:{sock[1]}-{peer[0]}:{peer[1]}-{self._index}",
            client_host=str(peer[0]),
            client_port=int(peer[1]),
            listener_port=int(sock[1]),
            close=self.abort,
            throttle_callback=self,
        )
        channel = self._channel
        if channel is not None:
            self._info.listener_name = channel.listener_name
            self._info.security_protocol = channel.security_protocol
            self._info.principal = channel.principal(transport.get_extra_info("ssl_object"))
            self._authenticator = channel.new_authenticator()
            if self._authenticator is not None:  # Kafka's sasl.server.max.receive.size
                self._decoder.max_frame_bytes = channel.listener.sasl_max_receive_size

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        for in_flight in self._pending:
            if in_flight.future is not None and not in_flight.future.done():
                in_flight.future.cancel()
        self._pending.clear()
        self._backlog.clear()
        self._parked = None
        # Break the cycles through this connection (its ConnectionInfo's ``close`` is a
        # bound method of it; uvloop's transport refers back to its protocol), so it is
        # freed now by reference counting, not at the next full garbage collection.
        self._info.close = None
        self._info.throttle_callback = None
        self._transport = None
        self._on_close(self)

    def pause_writing(self) -> None:
        # The client is not reading its responses: stop reading its requests.
        self._write_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        self._update_reading()

    def data_received(self, data: bytes) -> None:
        if self._closed:
            return
        received_ns = self._request_clock.monotonic_ns()
        self._last_active_ms = self._clock.now_ms()
        try:
            frames = self._decoder.feed(data)
        except ProtocolError as exc:
            # What arrived whole before the bad length prefix is still answered, in
            # order; then the connection closes.
            frames = list(getattr(exc, "complete_frames", ()))
            self._fatal = f"bad frame: {exc}"
        if self._backlog or self._muted:
            self._backlog.extend(frames)
        else:
            self._in_read = True
            try:
                for frame in frames:
                    if self._closed:
                        return
                    if self._muted:
                        self._backlog.append(frame)
                    else:
                        self._on_frame(frame, received_ns)
            finally:
                self._in_read = False
                self._write_out()
        self._after_requests()

    # -- requests ----------------------------------------------------------------------

    def _on_frame(self, frame: bytes, received_ns: int) -> None:
        if self._authenticator is not None and self._authenticate(frame):
            return
        if self._session is not None and self._check_session(frame):
            return
        try:
            in_flight = self._dispatcher.dispatch(frame, received_ns, self._info)
        except CloseConnection as exc:
            self.abort(str(exc))
            return
        self._pending.append(in_flight)
        future = in_flight.future
        if future is not None:
            self._muted = True  # Kafka's mute: the next request waits for this answer
            self._parked = in_flight
            future.add_done_callback(self._on_parked_done, context=self._callback_context)
        elif self._pending[0] is in_flight:
            self._flush()

    def _authenticate(self, frame: bytes) -> bool:
        """SASL before any request; True when the frame was the authenticator's."""
        authenticator = self._authenticator
        assert authenticator is not None
        try:
            answer = authenticator.on_frame(frame)
        except AuthenticationFailed as exc:
            if exc.response is not None and self._transport is not None:
                self._flush()
                self._write_out()
                self._transport.write(exc.response)
            self.abort(str(exc), level=logging.INFO)
            return True
        if answer is None:
            return False  # ApiVersions: the dispatcher's
        if authenticator.complete and authenticator.principal is not None:
            self._info.principal = authenticator.principal
            self._authenticator = None
            self._session = authenticator
            self._decoder.max_frame_bytes = self._max_request_bytes
        in_flight = InFlight(None)
        in_flight.raw = answer
        in_flight.ready = True
        self._pending.append(in_flight)
        if self._pending[0] is in_flight:
            self._flush()
        return True

    def _check_session(self, frame: bytes) -> bool:
        """KIP-368 on an authenticated connection; True when the frame was handled."""
        session = self._session
        channel = self._channel
        assert session is not None and channel is not None
        if frame[:2] == SASL_HANDSHAKE_KEY and session.supports_reauthentication:
            self._authenticator = channel.new_authenticator(previous=session)
            return self._authenticate(frame)
        if session.session_expired():
            self.abort(
                "authentication session expired and not re-authenticated", level=logging.INFO
            )
            return True
        return False

    def _on_parked_done(self, _future: object = None) -> None:
        in_flight = self._parked
        self._parked = None
        if self._closed or in_flight is None:
            return
        try:
            self._dispatcher.settle(in_flight)
        except CloseConnection as exc:
            self.abort(str(exc))
            return
        if not in_flight.ready:
            return
        self._in_read = True
        try:
            self._flush()
            if not self._pending and not self._throttled:
                self._muted = False
                self._drain_backlog()
        finally:
            self._in_read = False
            self._write_out()
        self._after_requests()

    # -- KIP-219 throttling (Kafka's ThrottleCallback) ---------------------------------------

    def start_throttling(self) -> None:
        """A ThrottledChannel began: read nothing more until ``end_throttling``."""
        self._throttled = True
        self._muted = True
        self._update_reading()

    def end_throttling(self) -> None:
        """The throttle time has passed: read again unless a request is still parked."""
        self._throttled = False
        if self._closed or self._parked is not None:
            return
        self._muted = False
        self._in_read = True
        try:
            self._drain_backlog()
        finally:
            self._in_read = False
            self._write_out()
        self._after_requests()

    def _drain_backlog(self) -> None:
        """Handle waiting frames, one request in progress at a time."""
        backlog = self._backlog
        while backlog and not self._muted and not self._closed:
            self._on_frame(backlog.popleft(), self._request_clock.monotonic_ns())

    def _after_requests(self) -> None:
        if self._closed:
            return
        if self._fatal is not None and not self._backlog and not self._pending:
            self.abort(self._fatal)
            return
        self._update_reading()

    def _update_reading(self) -> None:
        """Read while nothing waits; stop while muted, backlogged, or not read from."""
        transport = self._transport
        if transport is None or self._closed:
            return
        pause = self._muted or self._write_paused or self._fatal is not None
        if pause != self._reading_paused:
            self._reading_paused = pause
            if pause:
                transport.pause_reading()
            else:
                transport.resume_reading()

    def _flush(self) -> None:
        """Encode every ready response at the head of the queue, in request order.

        While a read is being handled (``data_received``) the bytes are only collected:
        the responses to one read of pipelined requests leave in one write, one system
        call instead of one per response. Otherwise they are written at once.
        """
        queue = self._pending
        dispatcher = self._dispatcher
        now_ns = self._request_clock.monotonic_ns
        out = self._out
        while queue and queue[0].ready:
            in_flight = queue.popleft()
            ctx = in_flight.ctx
            if ctx is not None:
                ctx.timing.send_start_ns = now_ns()
            try:
                data = dispatcher.encode(in_flight)
            except CloseConnection as exc:
                self.abort(str(exc))
                return
            out.append((in_flight, data))
        if not self._in_read:
            self._write_out()

    def _write_out(self) -> None:
        """Write what ``_flush`` collected, then tell the observers (send time ends)."""
        out = self._out
        if not out:
            return
        self._out = []
        pool = self._dispatcher.handler_pool
        if pool is not None:
            self._send_modelled(pool, out)
            return
        transport = self._transport
        if transport is not None and not self._closed:
            if len(out) == 1:
                data = out[0][1]
                if data is not None:
                    transport.write(data)
            else:
                transport.write(b"".join(data for _, data in out if data is not None))
        end_ns = self._request_clock.monotonic_ns()
        completed = self._dispatcher.completed
        for in_flight, data in out:
            ctx = in_flight.ctx
            if ctx is not None:
                ctx.timing.send_end_ns = end_ns
            completed(in_flight, len(data) if data is not None else 0)
        self._last_active_ms = self._clock.now_ms()

    def _send_modelled(self, pool: HandlerPool, out: list[tuple[InFlight, bytes | None]]) -> None:
        """Virtual time: each response waits for this connection's network thread and
        leaves once its modelled send time is over (``HandlerPool.send``), in order."""
        loop = asyncio.get_running_loop()
        now_ns = self._request_clock.monotonic_ns()
        connection_id = self._info.connection_id
        for in_flight, data in out:
            ctx = in_flight.ctx
            size = len(data) if data is not None else 0
            key = service_key_of(ctx.header.api_key, in_flight.request) if ctx is not None else 0
            start_ns, end_ns = pool.send(connection_id, key, size, now_ns)
            if ctx is not None:
                ctx.timing.send_start_ns, ctx.timing.send_end_ns = start_ns, end_ns
            loop.call_later(max(0, end_ns - now_ns) / 1e9, self._sent, in_flight, data)

    def _sent(self, in_flight: InFlight, data: bytes | None) -> None:
        transport = self._transport
        if transport is not None and not self._closed and data is not None:
            transport.write(data)
        self._dispatcher.completed(in_flight, len(data) if data is not None else 0)
        self._last_active_ms = self._clock.now_ms()

    # -- the broker's view -------------------------------------------------------------

    def idle_since_ms(self) -> int | None:
        """When this connection last read or wrote, or None while a request is in
        flight (a long-poll is not idleness)."""
        if self._pending or self._backlog:
            return None
        return self._last_active_ms

    def abort(self, reason: str, *, level: int = logging.WARNING) -> None:
        """Close this connection because of what its peer did; others are untouched."""
        if self._closed:
            return
        log.log(level, "closing connection %s: %s", self._info.connection_id, reason)
        self._closed = True
        self._backlog.clear()
        if self._transport is not None:
            self._transport.close()

    @property
    def info(self) -> ConnectionInfo:
        return self._info
