"""request_cost's clients: forked processes that keep requests in flight and count.

Each client process runs one event loop (uvloop when installed) with ``asyncio.Protocol``
connections that never decode a response: they read length prefixes (the long-poll
kinds also one int64 at a fixed place, or nothing but the arrival time) and write the
pre-encoded frame again. The parent drives them over a pipe: ``start``, ``mark`` (twice:
the measured window), ``stop``; they answer with their counters.
"""

from __future__ import annotations

import asyncio
import os
import random
import socket
import struct
import time
from array import array
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from multiprocessing.connection import Connection

from bench.request_cost.kinds import CONNECT_CONCURRENCY, INT64, LENGTH, Address, LongPoll


class ClientStats:
    """Counters of one client process."""

    __slots__ = ("lost", "lost_error", "nbytes", "recording", "responses", "with_data")

    def __init__(self) -> None:
        self.responses = 0
        self.nbytes = 0
        self.lost = 0  # connections the broker closed while we ran
        self.lost_error = ""  # why the first of them was lost
        self.with_data = 0  # long-poll responses that brought new records
        self.recording = False  # inside the measured window

    def connection_lost(self, exc: Exception | None) -> None:
        """The broker closed one of our connections while we ran."""
        self.lost += 1
        if not self.lost_error:
            self.lost_error = repr(exc) if exc else "closed by the peer"


class PipelinedProtocol(asyncio.Protocol):
    """Keeps ``window`` copies of one frame in flight; counts length prefixes only."""

    transport: asyncio.Transport

    def __init__(self, multiples: list[bytes], stats: ClientStats) -> None:
        self.multiples = multiples  # multiples[k] = the frame k times
        self.window = len(multiples) - 1
        self.stats = stats
        self.running = False
        self.skip = 0  # bytes still to come of a response whose length has been read
        self.head = b""  # a length prefix cut by the end of the last read

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def start(self) -> None:
        self.running = True
        self.transport.write(self.multiples[self.window])

    def data_received(self, data: bytes) -> None:
        stats = self.stats
        n = len(data)
        stats.nbytes += n
        if self.head:
            data = self.head + data
            n = len(data)
            self.head = b""
        pos = self.skip
        if pos > n:
            self.skip = pos - n
            return
        done = 1 if pos else 0
        unpack = LENGTH.unpack_from
        while pos + 4 <= n:
            end = pos + 4 + unpack(data, pos)[0]
            if end > n:
                self.skip = end - n
                break
            done += 1
            pos = end
        else:
            self.skip = 0
            if pos < n:
                self.head = data[pos:]
        if done:
            stats.responses += done
            if self.running:
                self.transport.write(
                    self.multiples[done] if done <= self.window else self.multiples[1] * done
                )

    def connection_lost(self, exc: Exception | None) -> None:
        if self.running:
            self.stats.connection_lost(exc)
        self.running = False


class LongPollProtocol(asyncio.Protocol):
    """One fetch in flight at the log end; the next one asks for the HW just read."""

    transport: asyncio.Transport

    def __init__(
        self,
        longpoll: LongPoll,
        offset: int,
        stats: ClientStats,
        offsets: array[int],
        times: array[float],
    ) -> None:
        self.frame = bytearray(longpoll.template)
        self.offset_pos = longpoll.offset_pos
        self.hw_end = longpoll.hw_pos + 8
        self.hw_pos = longpoll.hw_pos
        self.offset = offset
        self.stats = stats
        self.offsets = offsets  # samples: the offset a response brought first ...
        self.times = times  # ... and when it arrived
        self.buf = bytearray()
        self.running = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def start(self) -> None:
        self.running = True
        self._send()

    def _send(self) -> None:
        INT64.pack_into(self.frame, self.offset_pos, self.offset)
        self.transport.write(bytes(self.frame))

    def data_received(self, data: bytes) -> None:
        stats = self.stats
        stats.nbytes += len(data)
        buf = self.buf
        buf += data
        while len(buf) >= 4:
            end = 4 + LENGTH.unpack_from(buf, 0)[0]
            if len(buf) < end:
                return
            hw = INT64.unpack_from(buf, self.hw_pos)[0] if end >= self.hw_end else -1
            del buf[:end]
            stats.responses += 1
            if hw > self.offset:
                stats.with_data += 1
                if stats.recording:
                    self.offsets.append(self.offset)
                    self.times.append(time.perf_counter())
                self.offset = hw
            if self.running:
                self._send()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.running:
            self.stats.connection_lost(exc)
        self.running = False


class SteadyProducer(asyncio.Protocol):
    """Appends one record every 1/rate s (acks=1) and notes when each was sent."""

    transport: asyncio.Transport

    def __init__(self, frame: bytes, rate: float, sent: array[float]) -> None:
        self.frame = frame
        self.interval = 1.0 / rate
        self.sent = sent
        self.running = False
        self.next_at = 0.0
        self.handle: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def start(self) -> None:
        self.running = True
        self.next_at = asyncio.get_running_loop().time()
        self._tick()

    def _tick(self) -> None:
        if not self.running:
            return
        self.sent.append(time.perf_counter())
        self.transport.write(self.frame)
        self.next_at += self.interval
        self.handle = asyncio.get_running_loop().call_at(self.next_at, self._tick)

    def stop(self) -> None:
        self.running = False
        if self.handle is not None:
            self.handle.cancel()


class ParkedProtocol(asyncio.Protocol):
    """One fetch that waits its max_wait in the broker, again and again: notes how long
    each took to be answered. The first is sent at a random moment within one max_wait,
    so that the connections' fetches expire spread out, not all in one instant."""

    transport: asyncio.Transport

    def __init__(self, frame: bytes, wait_s: float, stats: ClientStats, waits: array[float]):
        self.frame = frame
        self.wait_s = wait_s
        self.stats = stats
        self.waits = waits  # samples: ms from sending a fetch to its answer
        self.sent_at = 0.0
        self.pending = 0  # bytes of the response still to come
        self.head = b""
        self.running = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def start(self) -> None:
        self.running = True
        asyncio.get_running_loop().call_later(random.uniform(0, self.wait_s), self._send)

    def _send(self) -> None:
        if self.running:
            self.sent_at = time.perf_counter()
            self.transport.write(self.frame)

    def data_received(self, data: bytes) -> None:
        stats = self.stats
        stats.nbytes += len(data)
        if self.head:
            data = self.head + data
            self.head = b""
        pos, n = 0, len(data)
        while pos < n:
            if self.pending:
                take = min(self.pending, n - pos)
                self.pending -= take
                pos += take
                if self.pending:
                    return
                self._answered()
                continue
            if n - pos < 4:
                self.head = data[pos:]
                return
            self.pending = LENGTH.unpack_from(data, pos)[0]
            pos += 4
            if not self.pending:
                self._answered()

    def _answered(self) -> None:
        self.stats.responses += 1
        if self.stats.recording:
            self.waits.append((time.perf_counter() - self.sent_at) * 1000)
        self._send()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.running:
            self.stats.connection_lost(exc)
        self.running = False


class IdleProtocol(asyncio.Protocol):
    """A client that said hello (one ApiVersions) and then says nothing."""

    transport: asyncio.Transport

    def __init__(self, frame: bytes, stats: ClientStats) -> None:
        self.frame = frame
        self.stats = stats
        self.running = True

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.transport.write(self.frame)

    def start(self) -> None:
        pass

    def data_received(self, data: bytes) -> None:
        self.stats.nbytes += len(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.running:
            self.stats.connection_lost(exc)
        self.running = False


Client = PipelinedProtocol | LongPollProtocol | ParkedProtocol | IdleProtocol


@dataclass
class ClientSpec:
    """What one client process does."""

    target: Address
    connections: int
    window: int
    frame: bytes
    longpoll: LongPoll | None = None
    start_offset: int = 0
    producer_rate: float = 0.0  # > 0 in the one process that appends for the long-poll
    producer_target: Address | None = None
    parked_wait_s: float = 0.0  # > 0: fetch-parked (ParkedProtocol)
    idle: bool = False  # connections that say hello, then nothing (IdleProtocol)


def _close_hard(transport: asyncio.Transport) -> None:
    # SO_LINGER 0: the close sends RST, so thousands of closed connections leave no
    # TIME_WAIT behind to run the next measurement out of ephemeral ports.
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


async def _client_main(conn: Connection, spec: ClientSpec) -> None:
    loop = asyncio.get_running_loop()
    stats = ClientStats()
    offsets: array[int] = array("q")
    times: array[float] = array("d")
    sent: array[float] = array("d")
    waits: array[float] = array("d")
    protocols: list[Client] = []
    errors: list[str] = []
    gate = asyncio.Semaphore(CONNECT_CONCURRENCY)
    longpoll = spec.longpoll
    multiples = [spec.frame * k for k in range(spec.window + 1)]

    def factory() -> Client:
        if spec.idle:
            return IdleProtocol(spec.frame, stats)
        if spec.parked_wait_s > 0:
            return ParkedProtocol(spec.frame, spec.parked_wait_s, stats, waits)
        if longpoll is not None:
            return LongPollProtocol(longpoll, spec.start_offset, stats, offsets, times)
        return PipelinedProtocol(multiples, stats)

    async def open_one() -> None:
        async with gate:
            try:
                _transport, protocol = await loop.create_connection(factory, *spec.target)
            except OSError as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
            else:
                protocols.append(protocol)

    await asyncio.gather(*(open_one() for _ in range(spec.connections)))
    producer: SteadyProducer | None = None
    if longpoll is not None and spec.producer_rate > 0 and spec.producer_target is not None:
        rate = spec.producer_rate
        _t, producer = await loop.create_connection(
            lambda: SteadyProducer(longpoll.produce_frame, rate, sent), *spec.producer_target
        )
    conn.send(("ready", len(protocols), len(errors), errors[0] if errors else ""))

    marks: list[tuple[int, int, int, float, float]] = []
    stopped = loop.create_future()

    def on_command() -> None:
        try:
            command = conn.recv()
        except (EOFError, OSError):
            command = "stop"
        if command == "start":
            for protocol in protocols:
                protocol.start()
            if producer is not None:
                producer.start()
        elif command == "mark":
            marks.append(
                (
                    stats.responses,
                    stats.nbytes,
                    stats.with_data,
                    time.process_time(),
                    time.perf_counter(),
                )
            )
            stats.recording = len(marks) == 1
        elif not stopped.done():
            stopped.set_result(None)

    loop.add_reader(conn.fileno(), on_command)
    await stopped
    loop.remove_reader(conn.fileno())
    # The loop made the pipe non-blocking: a long row's report is larger than the pipe's
    # buffer, and would fail with EAGAIN while the parent reads another client's first.
    os.set_blocking(conn.fileno(), True)
    for protocol in protocols:
        protocol.running = False
        _close_hard(protocol.transport)
    if producer is not None:
        producer.stop()
        _close_hard(producer.transport)
    await asyncio.sleep(0)
    conn.send(
        {
            "marks": marks,
            "lost": stats.lost,
            "lost_error": stats.lost_error,
            "offsets": offsets,
            "times": times,
            "sent": sent,
            "waits": waits,
        }
    )


def client_process(conn: Connection, spec: ClientSpec) -> None:
    """A client process's body (the target of a forked ``multiprocessing.Process``)."""
    loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None
    try:
        import uvloop

        loop_factory = uvloop.new_event_loop
    except ImportError:
        pass
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        runner.run(_client_main(conn, spec))
    conn.close()
