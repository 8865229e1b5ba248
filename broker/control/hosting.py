"""Where the control endpoint lives in a cluster's life: up after the brokers, down first.

``MiniKafka`` owns one ``ControlEndpoint``; it serves only when given a port, and imports
aiohttp (``broker/control/server.py``) only then, so a cluster without it costs nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker.control.server import ClusterControl, ControlServer


class ControlEndpoint:
    """The control endpoint of one cluster on ``host:port``; off when ``port`` is None."""

    def __init__(self, host: str, port: int | None) -> None:
        self.host = host
        self.port = port
        self._server: ControlServer | None = None

    async def start(self, cluster: ClusterControl) -> None:
        """Serve ``cluster`` (its brokers already started), if a port was given."""
        if self.port is None:
            return
        from broker.control.server import ControlServer  # aiohttp only when asked

        self._server = ControlServer(cluster, self.host, self.port)
        await self._server.start()

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop()
            self._server = None

    @property
    def url(self) -> str | None:
        """``http://HOST:PORT`` of the endpoint, None when it does not run."""
        return self._server.url if self._server is not None else None
