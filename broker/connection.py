"""One client connection: frames in, responses out in request order.

Built on ``asyncio.Protocol`` rather than streams: there is no per-request coroutine and
no reader task, so a request costs one callback from the event loop. What happens to a
request is the dispatcher's business (``broker/dispatch.py``); this module only cuts
frames, keeps the order and writes. Requests are handled as they arrive (pipelining),
but responses leave strictly in request order, as Kafka guarantees: a response that is
ready waits behind an earlier one that is parked in a purgatory. A produce with acks=0
takes its place in that order and sends nothing.

A peer that sends bytes we cannot read is the peer's problem: we log why and close that
one connection, as Kafka does, and nothing it sent after the bad frame is processed; no
other connection notices.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections import deque
from collections.abc import Callable
from typing import cast

from broker.context import ConnectionInfo
from broker.dispatch import CloseConnection, InFlight, RequestDispatcher
from broker.request_timing import RequestClock
from protocol.errors import ProtocolError
from protocol.frames import FrameDecoder

log = logging.getLogger("broker.connection")


class KafkaConnection(asyncio.Protocol):
    """asyncio protocol speaking Kafka's request/response framing for one listener."""

    def __init__(
        self,
        dispatcher: RequestDispatcher,
        request_clock: RequestClock,
        max_request_bytes: int,
        connection_index: int,
        on_close: Callable[[KafkaConnection], None],
    ) -> None:
        self._dispatcher = dispatcher
        self._clock = request_clock
        self._decoder = FrameDecoder(max_request_bytes)
        self._index = connection_index
        self._on_close = on_close
        self._pending: deque[InFlight] = deque()
        self._transport: asyncio.Transport | None = None
        self._closed = False
        self._info = ConnectionInfo("", "", 0, 0)

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
        )

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        for in_flight in self._pending:
            if in_flight.future is not None and not in_flight.future.done():
                in_flight.future.cancel()
        self._pending.clear()
        self._on_close(self)

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
        received_ns = self._clock.monotonic_ns()
        try:
            frames = self._decoder.feed(data)
        except ProtocolError as exc:
            # Answer what arrived whole before the bad length prefix, then close.
            for frame in getattr(exc, "complete_frames", ()):
                if self._closed:
                    return
                self._on_frame(frame, received_ns)
            self.abort(f"bad frame: {exc}")
            return
        for frame in frames:
            if self._closed:
                return
            self._on_frame(frame, received_ns)

    # -- requests ----------------------------------------------------------------------

    def _on_frame(self, frame: bytes, received_ns: int) -> None:
        try:
            in_flight = self._dispatcher.dispatch(frame, received_ns, self._info)
        except CloseConnection as exc:
            self.abort(str(exc))
            return
        self._pending.append(in_flight)
        future = in_flight.future
        if future is not None:
            future.add_done_callback(functools.partial(self._on_parked_done, in_flight))
        elif self._pending[0] is in_flight:
            self._flush()

    def _on_parked_done(self, in_flight: InFlight, _future: object = None) -> None:
        if self._closed:
            return
        try:
            self._dispatcher.settle(in_flight)
        except CloseConnection as exc:
            self.abort(str(exc))
            return
        if in_flight.ready:
            self._flush()

    def _flush(self) -> None:
        """Write every ready response at the head of the queue, in request order."""
        transport = self._transport
        queue = self._pending
        dispatcher = self._dispatcher
        now_ns = self._clock.monotonic_ns
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
            size = 0
            if data is not None and transport is not None and not self._closed:
                transport.write(data)
                size = len(data)
            if ctx is not None:
                ctx.timing.send_end_ns = now_ns()
            dispatcher.completed(in_flight, size)

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
