"""A follower's view of its leader: one TCP connection, one request at a time.

Kafka's name for it is ``LeaderEndpoint`` (``RemoteLeaderEndpoint`` over the network).
The transaction coordinator's marker channel (``broker/txn/marker_sender.py``) uses it
too, one per destination broker, for WriteTxnMarkers.
It sits on the project's one asyncio client shell (``client_io.shell.ClientShell``,
over ``protocol.client.ClientConnection``), used one request at a time.

The connection opens on the first request and is kept. With an ``InterBrokerClient``
(``broker/security/sasl_client.py``) it opens with TLS and authenticates (SASL) first,
as a client of the inter-broker listener. A leader that closes it, or
answers out of step, is a ``ConnectionError``; one that does not answer within
``REQUEST_TIMEOUT_MS`` a ``TimeoutError``. Either way the fetcher drops this endpoint
and makes a new one after its backoff. A request abandoned half way (cancelled, timed
out) leaves its answer owed on the socket, so the next request starts on a new one.
"""

from __future__ import annotations

from typing import Any

from kio.static.protocol import RequestPayload

from broker.security.sasl_client import InterBrokerClient
from client_io import ClientShell

__all__ = ["REQUEST_TIMEOUT_MS", "LeaderEndpoint"]

# A leader that does not answer within this long is treated as gone (reconnect).
REQUEST_TIMEOUT_MS = 30000


class LeaderEndpoint:
    """One TCP connection to a leader broker, one request in flight."""

    def __init__(
        self, host: str, port: int, client_id: str, security: InterBrokerClient | None = None
    ) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self._security = security
        self._shell: ClientShell | None = None

    async def request(self, api_key: int, version: int, payload: RequestPayload) -> Any:
        """Send one request and return the leader's decoded response."""
        shell = self._shell
        if shell is not None and (shell.client.in_flight or shell.closed):
            self.close()  # an earlier request was abandoned (its answer is owed) or failed
        if self._shell is None:
            await self._open()
        return await self._exchange(api_key, version, payload)

    async def _open(self) -> None:
        security = self._security
        tls = security.ssl_context if security is not None else None
        self._shell = await ClientShell.open(
            self.host, self.port, client_id=self.client_id, ssl=tls
        )
        if security is not None:
            try:
                await security.authenticate(self._exchange)
            except BaseException:
                self.close()
                raise

    async def _exchange(self, api_key: int, version: int, payload: RequestPayload) -> Any:
        shell = self._shell
        assert shell is not None
        try:
            response = await shell.request(
                api_key, version, payload, timeout_s=REQUEST_TIMEOUT_MS / 1000
            )
        except ConnectionError as exc:
            raise ConnectionError(f"leader {exc}") from exc  # "leader host:port closed ..."
        return response.body

    def close(self) -> None:
        shell, self._shell = self._shell, None
        if shell is not None:
            shell.abort()
