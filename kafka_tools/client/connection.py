"""``BrokerConnection``: one TCP connection to one broker for the command line tools.

It is the project's one asyncio client shell (``client_io.shell.ClientShell``) used
pipelined: several requests may be in flight; the shell's reader task pairs each response
with its request (the client connection checks the order) and resolves that request's
future. A broker that closes the connection, or answers out of step, fails every request
in flight with ``ConnectionError``; one that does not answer in time closes it.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kio.static.protocol import RequestPayload

from client_io import ClientShell
from protocol.errors import ProtocolError

__all__ = ["REQUEST_TIMEOUT_S", "BrokerConnection"]

REQUEST_TIMEOUT_S = 30.0


class BrokerConnection:
    """One TCP connection to one broker; requests may overlap, answers come in order."""

    def __init__(self, host: str, port: int, client_id: str) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self._shell: ClientShell | None = None

    async def open(self, timeout_s: float = 10.0) -> None:
        self._shell = await ClientShell.open(
            self.host, self.port, client_id=self.client_id, timeout_s=timeout_s
        )

    async def request(
        self, api_key: int, version: int, payload: RequestPayload, timeout_s: float | None = None
    ) -> Any:
        """Send one request and return the decoded response (None for acks=0)."""
        shell = self._shell
        if shell is None or shell.closed:
            raise ConnectionError(f"connection to {self.host}:{self.port} is closed")
        future = await shell.submit(api_key, version, payload)
        if future is None:
            return None
        limit = timeout_s or REQUEST_TIMEOUT_S
        try:
            async with asyncio.timeout(limit):
                response = await future
        except TimeoutError:
            self.close()
            raise ConnectionError(
                f"{self.host}:{self.port} did not answer within {limit} s"
            ) from None
        try:
            return response.body
        except ProtocolError as exc:
            raise ConnectionError(str(exc)) from exc

    @property
    def closed(self) -> bool:
        return self._shell is None or self._shell.closed

    def close(self) -> None:
        shell, self._shell = self._shell, None
        if shell is not None:
            shell.abort()
