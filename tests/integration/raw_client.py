"""One raw Kafka connection for tests: requests no installed client sends as we need."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from typing import Any, Self

from protocol.builders import request_builder
from protocol.codec import decode_response, encode_request
from protocol.frames import FrameDecoder


class RawClient:
    """Build a request from a kio class name and fields, send it, await its answer."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, timeout_s: float = 30
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._timeout_s = timeout_s
        self._decoder = FrameDecoder()
        self._frames: list[bytes] = []
        self._correlation = itertools.count(1)

    @classmethod
    async def connect(cls, host_or_bootstrap: str, port: int | None = None) -> Self:
        """``connect("h:p,h2:p2")`` (the first broker) or ``connect(host, port)``."""
        if port is None:
            host, raw_port = host_or_bootstrap.split(",")[0].rsplit(":", 1)
            port = int(raw_port)
        else:
            host = host_or_bootstrap
        return cls(*await asyncio.open_connection(host, port))

    async def request(self, api_key: int, version: int, message: str, **fields: Any) -> Any:
        payload = getattr(request_builder(api_key, version), message)(**fields)
        correlation_id = next(self._correlation)
        self._writer.write(encode_request(api_key, version, correlation_id, "raw-test", payload))
        await self._writer.drain()
        while not self._frames:
            data = await asyncio.wait_for(self._reader.read(65536), timeout=self._timeout_s)
            assert data, "broker closed the connection"
            self._frames.extend(self._decoder.feed(data))
        got, response = decode_response(api_key, version, self._frames.pop(0))
        assert got == correlation_id
        return response

    async def close(self) -> None:
        self._writer.close()
        with contextlib.suppress(ConnectionError):
            await self._writer.wait_closed()
