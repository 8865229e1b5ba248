"""`ClientShell`: ``protocol.client.ClientConnection`` on an asyncio stream.

The sans-IO connection owns correlation ids, encoding and the pairing of responses with
requests; this shell only opens the stream, writes what the connection produced and feeds
it what it reads. It is the one asyncio shell of the project: the followers' and the
marker sender's ``LeaderEndpoint``, the command line tools' ``BrokerConnection``, the
replay, the workload's raw member, the tests' ``RawClient`` and ``bench/`` sit on it.

Transports. `ClientShell.open` calls ``asyncio.open_connection`` on the running loop, so
the same code runs over TCP, over TLS (``ssl``: an ``SSLContext`` passed through, with
``server_hostname``) and, in a simulation, over the simulated network (the simulated loop's
``create_connection``). A shell can also wrap a stream the caller opened (`ClientShell(...)`).

Two ways to use it, not both on one shell:

- *one at a time*: `request` writes a request and reads until its answer arrives
  (`send` and `next_response` are the two halves, for callers that write several requests
  before reading, or bytes of their own with `write`);
- *pipelined*: `start_reading` runs a reader task that hands every response, as soon as it
  is read, to a `ResponseHandler` (the replay stamps arrival times there), and `submit`
  sends a request and returns a future of its response on top of that.

Failures are ``ConnectionError`` (the peer closed the stream, reset it, or answered out of
step: a ``ProtocolError`` of the connection) or ``TimeoutError`` (no answer in time);
either way the connection is finished: `ClientConnection` refuses to go on after an error,
and a request abandoned half way leaves its answer owed on the stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl as _ssl
from collections import deque
from typing import Protocol

from kio.static.protocol import RequestPayload

from protocol.client import ClientConnection, Outgoing, Response
from protocol.errors import ProtocolError
from protocol.frames import DEFAULT_MAX_FRAME_BYTES

__all__ = ["READ_SIZE", "ClientShell", "PeerClosed", "ResponseHandler"]

#: Bytes asked of the stream per read (a Fetch answer of a few MiB takes a few reads).
READ_SIZE = 1 << 20


class PeerClosed(ConnectionError):
    """The broker closed the stream (end of file)."""


class ResponseHandler(Protocol):
    """What a pipelined shell's reader task tells (on the loop, in arrival order)."""

    def on_response(self, response: Response) -> None:
        """A response just read (paired with its request by the client connection)."""

    def on_connection_lost(self, error: ConnectionError) -> None:
        """The stream ended (`PeerClosed`) or broke (the cause says how); called once,
        after the last `on_response`, and not when the owner closes the shell itself."""


class ClientShell:
    """One Kafka client connection on an asyncio stream; see the module docstring."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        client: ClientConnection,
        peer: str,
    ) -> None:
        self.client = client
        #: ``host:port`` of the broker, for messages.
        self.peer = peer
        self._reader = reader
        self._writer = writer
        self._ready: deque[Response] = deque()  # read, not yet taken (one at a time)
        self._reading: asyncio.Task[None] | None = None  # the pipelined reader task
        self._waiting: dict[int, asyncio.Future[Response]] = {}  # submit()'s futures
        self._futures = _Futures(self._waiting)  # submit()'s handler
        self._handler: ResponseHandler | None = None

    @classmethod
    async def open(
        cls,
        host: str,
        port: int,
        *,
        client_id: str | None = None,
        ssl: _ssl.SSLContext | None = None,
        server_hostname: str | None = None,
        timeout_s: float | None = None,
        no_delay: bool = False,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    ) -> ClientShell:
        """Connect (TLS with ``ssl``) within ``timeout_s``; a timeout is a ``ConnectionError``."""
        hostname = server_hostname if ssl is not None else None
        try:
            async with asyncio.timeout(timeout_s):
                reader, writer = await asyncio.open_connection(
                    host, port, ssl=ssl, server_hostname=hostname
                )
        except TimeoutError:
            raise ConnectionError(f"timed out connecting to {host}:{port}") from None
        if no_delay:
            sock = writer.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        client = ClientConnection(client_id, max_frame_bytes=max_frame_bytes)
        return cls(reader, writer, client, f"{host}:{port}")

    # -- state -------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """True once closed here, or once the connection failed."""
        return self.client.closed or self._writer.is_closing()

    @property
    def name(self) -> str | None:
        """``broker-host:port-our-host:port`` (Kafka's connection id without its index),
        None on a transport without addresses. Read from the transport's ``peername`` and
        ``sockname``, which the simulated network's transports give too (they have no
        socket), so a replay in virtual time names its connections as a real one does."""
        broker = self._writer.get_extra_info("peername")
        ours = self._writer.get_extra_info("sockname")
        if not isinstance(broker, tuple) or not isinstance(ours, tuple):
            return None
        return f"{broker[0]}:{broker[1]}-{ours[0]}:{ours[1]}"

    # -- writing -----------------------------------------------------------------------

    def send(
        self,
        api_key: int,
        version: int,
        body: RequestPayload,
        *,
        expect_response: bool | None = None,
    ) -> Outgoing:
        """Encode a request under the next correlation id and write it (no drain)."""
        outgoing = self.client.send(api_key, version, body, expect_response=expect_response)
        self._writer.write(outgoing.data)
        return outgoing

    def send_frame(
        self, frame: bytes | bytearray | memoryview, *, expect_response: bool
    ) -> Outgoing:
        """Write an encoded request (length prefix removed) under the next correlation id."""
        outgoing = self.client.send_frame(frame, expect_response=expect_response)
        self._writer.write(outgoing.data)
        return outgoing

    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Bytes straight to the stream, behind the client connection's back (tests)."""
        self._writer.write(data)

    async def drain(self) -> None:
        await self._writer.drain()

    # -- one at a time -----------------------------------------------------------------

    async def request(
        self, api_key: int, version: int, body: RequestPayload, timeout_s: float | None = None
    ) -> Response:
        """Send one request and read until its response (which has not been decoded yet:
        ``.body`` decodes). A request that gets no answer (an acks=0 Produce) is refused."""
        outgoing = self.send(api_key, version, body)
        if not outgoing.expects_response:
            raise ValueError("request() waits for an answer an acks=0 Produce never gets: send()")
        await self.drain()
        while True:
            response = await self.next_response(timeout_s)
            if response.correlation_id == outgoing.correlation_id:
                return response

    async def next_response(self, timeout_s: float | None = None) -> Response:
        """The next response in request order, reading as needed (``timeout_s`` per read)."""
        while not self._ready:
            self._ready.extend(await self.read_responses(timeout_s))
        return self._ready.popleft()

    async def read_responses(
        self, timeout_s: float | None = None, *, keep: bool = False
    ) -> list[Response]:
        """One read of the stream: the responses it completed (maybe none); with ``keep``
        they also stay queued for `next_response`."""
        if self._reading is not None:
            raise RuntimeError("a pipelined shell's reader task owns the stream")
        # asyncio.timeout, not wait_for: wait_for (3.11) can swallow a cancel that lands
        # as the read completes, and a stopping owner must always end its task.
        async with asyncio.timeout(timeout_s):
            data = await self._read_or_fail()
        responses = self._receive(data)
        if keep:
            self._ready.extend(responses)
        return responses

    # -- pipelined ---------------------------------------------------------------------

    def start_reading(self, handler: ResponseHandler) -> None:
        """Run a reader task that hands each response to ``handler`` as it is read."""
        if self._reading is not None:
            raise RuntimeError("the reader task is already running")
        self._handler = handler
        self._reading = asyncio.get_running_loop().create_task(
            self._read_loop(handler), name=f"client-shell {self.peer}"
        )

    async def submit(
        self, api_key: int, version: int, body: RequestPayload
    ) -> asyncio.Future[Response] | None:
        """Send a request and return a future of its response (None when it expects
        none: an acks=0 Produce); the reader task starts on first use."""
        if self._reading is None:
            self.start_reading(self._futures)
        elif self._handler is not self._futures:
            raise RuntimeError("the reader task hands responses to another handler")
        if self.client.closed:
            raise ConnectionError(f"connection to {self.peer} is closed")
        outgoing = self.send(api_key, version, body)
        future: asyncio.Future[Response] | None = None
        if outgoing.expects_response:
            future = asyncio.get_running_loop().create_future()
            self._waiting[outgoing.correlation_id] = future
        await self.drain()
        return future

    async def _read_loop(self, handler: ResponseHandler) -> None:
        try:
            while True:
                for response in self._receive(await self._read_or_fail()):
                    handler.on_response(response)
        except ConnectionError as error:
            handler.on_connection_lost(error)

    # -- both ----------------------------------------------------------------------------

    async def _read_or_fail(self) -> bytes:
        try:
            data = await self._reader.read(READ_SIZE)
        except OSError as exc:  # reset, TLS failure: the stream is gone
            self.client.connection_lost()
            raise ConnectionError(f"{self.peer}: {exc}") from exc
        if not data:
            self.client.connection_lost()
            raise PeerClosed(f"{self.peer} closed the connection")
        return data

    def _receive(self, data: bytes) -> list[Response]:
        try:
            return self.client.receive(data)
        except ProtocolError as exc:  # out of step: the connection is finished
            raise ConnectionError(f"{self.peer}: {exc}") from exc

    async def close(self) -> None:
        """Close the stream; a reader task ends (its handler is not told: the owner knows),
        `submit`'s pending futures fail."""
        self.abort()
        with contextlib.suppress(Exception):
            await self._writer.wait_closed()
        task, self._reading = self._reading, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task

    def abort(self) -> None:
        """Close without waiting (from synchronous code): the requests in flight are lost."""
        self._writer.close()
        self.client.connection_lost()
        task = self._reading
        if task is not None:
            task.cancel()
        self._futures.on_connection_lost(ConnectionError(f"connection to {self.peer} closed"))


class _Futures:
    """`submit`'s handler: each response resolves its request's future."""

    def __init__(self, waiting: dict[int, asyncio.Future[Response]]) -> None:
        self._waiting = waiting

    def on_response(self, response: Response) -> None:
        future = self._waiting.pop(response.correlation_id, None)
        if future is not None and not future.done():
            future.set_result(response)

    def on_connection_lost(self, error: ConnectionError) -> None:
        waiting = list(self._waiting.values())
        self._waiting.clear()
        for future in waiting:
            if not future.done():
                future.set_exception(error)
