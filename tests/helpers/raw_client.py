"""One raw Kafka connection for tests: requests no installed client sends as we need.

An asyncio shell on ``protocol.client.ClientConnection`` (correlation ids, encoding,
pairing responses with requests in order). ``write`` puts bytes on the socket behind
the client connection's back -- garbage, attacks, half frames -- for tests of what the
broker does with them; ``client`` is there for requests built by hand
(``client.send_frame``) whose answers the test then reads with ``response``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from typing import Any, Self

from protocol.builders import request_builder
from protocol.client import ClientConnection, Response

_READ_SIZE = 1 << 16


class RawClient:
    """Build a request from a kio class name and fields, send it, await its answer."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        timeout_s: float = 30,
        client_id: str = "raw-test",
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._timeout_s = timeout_s
        self.client = ClientConnection(client_id)
        self._responses: deque[Response] = deque()

    @classmethod
    async def connect(
        cls,
        host_or_bootstrap: str,
        port: int | None = None,
        *,
        timeout_s: float = 30,
        client_id: str = "raw-test",
    ) -> Self:
        """``connect("h:p,h2:p2")`` (the first broker) or ``connect(host, port)``."""
        if port is None:
            host, raw_port = host_or_bootstrap.split(",")[0].rsplit(":", 1)
            port = int(raw_port)
        else:
            host = host_or_bootstrap
        reader, writer = await asyncio.open_connection(host, port)
        return cls(reader, writer, timeout_s, client_id)

    def write(self, data: bytes) -> None:
        """Bytes straight to the socket; the client connection knows nothing of them."""
        self._writer.write(data)

    async def drain(self) -> None:
        await self._writer.drain()

    def send(self, api_key: int, version: int, message: str, **fields: Any) -> int:
        """Write a request without waiting for anything; return its correlation id."""
        payload = getattr(request_builder(api_key, version), message)(**fields)
        outgoing = self.client.send(api_key, version, payload)
        self._writer.write(outgoing.data)
        return outgoing.correlation_id

    async def response(self) -> Response:
        """The next response, in request order (the client connection checks it)."""
        while not self._responses:
            data = await self._read()
            assert data, "the broker closed the connection"
            self._responses.extend(self.client.receive(data))
        return self._responses.popleft()

    async def request(self, api_key: int, version: int, message: str, **fields: Any) -> Any:
        """Send a request and return the decoded body of its answer."""
        correlation_id = self.send(api_key, version, message, **fields)
        await self._writer.drain()
        response = await self.response()
        assert response.correlation_id == correlation_id
        return response.body

    async def closed_by_broker(self) -> bool:
        """True once the broker has closed the connection (EOF or reset); False if it
        is still open after the timeout. Responses read meanwhile are kept."""
        try:
            while True:
                data = await self._read()
                if not data:
                    return True
                self._responses.extend(self.client.receive(data))
        except ConnectionError:
            return True
        except TimeoutError:
            return False

    async def close(self) -> None:
        self.client.connection_lost()
        self._writer.close()
        with contextlib.suppress(ConnectionError):
            await self._writer.wait_closed()

    async def _read(self) -> bytes:
        async with asyncio.timeout(self._timeout_s):
            return await self._reader.read(_READ_SIZE)
