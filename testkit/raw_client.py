"""One raw Kafka connection for tests: requests no installed client sends as we need.

The project's asyncio client shell (``client_io.ClientShell``, over
``protocol.client.ClientConnection``: correlation ids, encoding, pairing responses with
requests in order), used one request at a time. ``write`` puts bytes on the socket behind
the client connection's back -- garbage, attacks, half frames -- for tests of what the
broker does with them; ``client`` is there for requests built by hand
(``client.send_frame``) whose answers the test then reads with ``response``.
"""

from __future__ import annotations

from typing import Any, Self

from client_io import ClientShell
from protocol.builders import request_builder
from protocol.client import ClientConnection, Response
from protocol.errors import ProtocolError


class RawClient:
    """Build a request from a kio class name and fields, send it, await its answer."""

    def __init__(self, shell: ClientShell, timeout_s: float = 30) -> None:
        self.shell = shell
        self._timeout_s = timeout_s

    @property
    def client(self) -> ClientConnection:
        return self.shell.client

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
        return cls(await ClientShell.open(host, port, client_id=client_id), timeout_s)

    def write(self, data: bytes) -> None:
        """Bytes straight to the socket; the client connection knows nothing of them."""
        self.shell.write(data)

    async def drain(self) -> None:
        await self.shell.drain()

    def send(self, api_key: int, version: int, message: str, **fields: Any) -> int:
        """Write a request without waiting for anything; return its correlation id."""
        payload = getattr(request_builder(api_key, version), message)(**fields)
        return self.shell.send(api_key, version, payload).correlation_id

    async def response(self) -> Response:
        """The next response, in request order (the client connection checks it)."""
        return await self.shell.next_response(self._timeout_s)

    async def request(self, api_key: int, version: int, message: str, **fields: Any) -> Any:
        """Send a request and return the decoded body of its answer."""
        correlation_id = self.send(api_key, version, message, **fields)
        await self.drain()
        response = await self.response()
        assert response.correlation_id == correlation_id
        return response.body

    async def closed_by_broker(self) -> bool:
        """True once the broker has closed the connection (EOF or reset); False if it
        is still open after the timeout. Responses read meanwhile are kept."""
        try:
            while True:
                await self.shell.read_responses(self._timeout_s, keep=True)
        except ConnectionError as exc:
            if isinstance(exc.__cause__, ProtocolError):
                raise  # the broker answered out of step: a finding, not a close
            return True
        except TimeoutError:
            return False

    async def close(self) -> None:
        await self.shell.close()


async def answered_later(host_or_bootstrap: str, port: int | None = None) -> None:
    """One ApiVersions asked and answered on a fresh connection.

    The positive event a test waits for instead of a fixed sleep when it asserts that
    something did NOT happen: the broker has read, handled and answered a request sent
    after the moment in question, so whatever it would have done with what came before
    (bytes already on its sockets, a follower's fetch) it has had its turn to do.
    """
    raw = await RawClient.connect(host_or_bootstrap, port, client_id="answered-later")
    try:
        await raw.request(
            18,
            3,
            "ApiVersionsRequest",
            client_software_name="answered-later",
            client_software_version="1",
        )
    finally:
        await raw.close()
