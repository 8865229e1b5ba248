"""A follower's view of its leader: one TCP connection, one request at a time.

Kafka's name for it is ``LeaderEndpoint`` (``RemoteLeaderEndpoint`` over the network).
The transaction coordinator's marker channel (``broker/txn/marker_sender.py``) uses it
too, one per destination broker, for WriteTxnMarkers.
This is an asyncio shell on ``protocol.client.ClientConnection``, which owns correlation
ids, encoding and the pairing of responses with requests; the shell only opens the
socket, writes what the connection produced and feeds it what it reads.

The connection opens on the first request and is kept. With an ``InterBrokerClient``
(``broker/security/sasl_client.py``) it opens with TLS and authenticates (SASL) first,
as a client of the inter-broker listener. A leader that closes it, or
answers out of step, is a ``ConnectionError``; one that does not answer within
``REQUEST_TIMEOUT_MS`` a ``TimeoutError``. Either way the fetcher drops this endpoint
and makes a new one after its backoff. A request abandoned half way (cancelled, timed
out) leaves its answer owed on the socket, so the next request starts on a new one.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kio.static.protocol import RequestPayload

from broker.security.sasl_client import InterBrokerClient
from protocol.client import ClientConnection
from protocol.errors import ProtocolError

__all__ = ["REQUEST_TIMEOUT_MS", "LeaderEndpoint"]

# A leader that does not answer within this long is treated as gone (reconnect).
REQUEST_TIMEOUT_MS = 30000
_READ_SIZE = 1 << 20


class LeaderEndpoint:
    """One TCP connection to a leader broker, one request in flight."""

    def __init__(
        self, host: str, port: int, client_id: str, security: InterBrokerClient | None = None
    ) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self._security = security
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._client: ClientConnection | None = None

    async def request(self, api_key: int, version: int, payload: RequestPayload) -> Any:
        """Send one request and return the leader's decoded response."""
        if self._client is not None and self._client.in_flight:
            self.close()  # an earlier request was abandoned: its answer is still owed
        if self._reader is None or self._writer is None or self._client is None:
            await self._open()
        return await self._exchange(api_key, version, payload)

    async def _open(self) -> None:
        security = self._security
        tls = security.ssl_context if security is not None else None
        self._reader, self._writer = await asyncio.open_connection(self.host, self.port, ssl=tls)
        self._client = ClientConnection(self.client_id)
        if security is not None:
            try:
                await security.authenticate(self._exchange)
            except BaseException:
                self.close()
                raise

    async def _exchange(self, api_key: int, version: int, payload: RequestPayload) -> Any:
        reader, writer, client = self._reader, self._writer, self._client
        assert reader is not None and writer is not None and client is not None
        writer.write(client.send(api_key, version, payload).data)
        await writer.drain()
        while True:
            # asyncio.timeout, not wait_for: wait_for (3.11) can swallow a cancel that
            # lands as the read completes, and stop() must always end the task.
            async with asyncio.timeout(REQUEST_TIMEOUT_MS / 1000):
                data = await reader.read(_READ_SIZE)
            if not data:
                client.connection_lost()
                raise ConnectionError(f"leader {self.host}:{self.port} closed the connection")
            try:
                responses = client.receive(data)
            except ProtocolError as exc:
                raise ConnectionError(f"leader {self.host}:{self.port}: {exc}") from exc
            if responses:
                # One request in flight, so the client pairs at most this one answer.
                return responses[0].body

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        if self._client is not None:
            self._client.connection_lost()
        self._reader = self._writer = None
        self._client = None
