"""``BrokerConnection``: one TCP connection to one broker, an asyncio shell on
``protocol.client.ClientConnection``. Several requests may be in flight; a reader task
pairs each response with its request (the client connection checks the order) and
resolves that request's future. A broker that closes the connection, or answers out
of step, fails every request in flight with ``ConnectionError``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kio.static.protocol import RequestPayload

from protocol.client import ClientConnection
from protocol.errors import ProtocolError

__all__ = ["REQUEST_TIMEOUT_S", "BrokerConnection"]

REQUEST_TIMEOUT_S = 30.0
_READ_SIZE = 1 << 20


class BrokerConnection:
    """One TCP connection to one broker; requests may overlap, answers come in order."""

    def __init__(self, host: str, port: int, client_id: str) -> None:
        self.host = host
        self.port = port
        self._client = ClientConnection(client_id)
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._task: asyncio.Task[None] | None = None

    async def open(self, timeout_s: float = 10.0) -> None:
        try:
            async with asyncio.timeout(timeout_s):
                self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        except TimeoutError:
            raise ConnectionError(f"timed out connecting to {self.host}:{self.port}") from None
        self._task = asyncio.get_running_loop().create_task(self._read_loop())

    async def request(
        self, api_key: int, version: int, payload: RequestPayload, timeout_s: float | None = None
    ) -> Any:
        """Send one request and return the decoded response (None for acks=0)."""
        if self._writer is None or self._client.closed:
            raise ConnectionError(f"connection to {self.host}:{self.port} is closed")
        outgoing = self._client.send(api_key, version, payload)
        future: asyncio.Future[Any] | None = None
        if outgoing.expects_response:
            future = asyncio.get_running_loop().create_future()
            self._waiting[outgoing.correlation_id] = future
        self._writer.write(outgoing.data)
        await self._writer.drain()
        if future is None:
            return None
        try:
            async with asyncio.timeout(timeout_s or REQUEST_TIMEOUT_S):
                return await future
        except TimeoutError:
            self.close()
            raise ConnectionError(
                f"{self.host}:{self.port} did not answer within {timeout_s or REQUEST_TIMEOUT_S} s"
            ) from None

    async def _read_loop(self) -> None:
        assert self._reader is not None
        error: Exception = ConnectionError(f"{self.host}:{self.port} closed the connection")
        try:
            while True:
                data = await self._reader.read(_READ_SIZE)
                if not data:
                    break
                for response in self._client.receive(data):
                    future = self._waiting.pop(response.correlation_id, None)
                    if future is not None and not future.done():
                        try:
                            future.set_result(response.body)
                        except ProtocolError as exc:
                            future.set_exception(ConnectionError(str(exc)))
        except (OSError, ProtocolError) as exc:
            error = ConnectionError(f"{self.host}:{self.port}: {exc}")
        finally:
            self._client.connection_lost()
            for future in self._waiting.values():
                if not future.done():
                    future.set_exception(error)
            self._waiting.clear()

    @property
    def closed(self) -> bool:
        return self._writer is None or self._client.closed

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self._task is not None:
            self._task.cancel()
            self._task = None
        self._client.connection_lost()
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(ConnectionError("connection closed"))
        self._waiting.clear()
