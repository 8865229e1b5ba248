"""Where the control endpoint lives in a cluster's life: up after the brokers, down first.

``MiniKafka`` owns one ``ControlEndpoint``; it serves only when given a port, and imports
aiohttp (``broker/control/server.py``) only then, so a cluster without it costs nothing.
It holds the token state changes need (``broker/control/guard.py``): given, or made
here; an endpoint bound beyond loopback without a given token is refused.
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING

from broker.control.guard import is_loopback

if TYPE_CHECKING:
    from broker.control.cluster_control import ClusterControl
    from broker.control.server import ControlServer


class ControlEndpoint:
    """The control endpoint of one cluster on ``host:port``; off when ``port`` is None."""

    def __init__(self, host: str, port: int | None, token: str | None = None) -> None:
        if port is not None and token is None and not is_loopback(host):
            raise ValueError(
                f"the control endpoint on {host} (not a loopback address) needs a token "
                "given (--control-token or MINIKAFKA_CONTROL_TOKEN): anyone who can reach "
                "it could stop brokers"
            )
        self.host = host
        self.port = port
        # The token state changes must carry: given, or drawn here from the OS (a
        # secret, not a simulated id: it never reaches a broker's behaviour).
        self.token = token if token is not None else secrets.token_urlsafe(18)
        self._server: ControlServer | None = None

    async def start(self, cluster: ClusterControl) -> None:
        """Serve ``cluster`` (its brokers already started), if a port was given."""
        if self.port is None:
            return
        from broker.control.server import ControlServer  # aiohttp only when asked

        self._server = ControlServer(cluster, self.token, self.host, self.port)
        await self._server.start()

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop()
            self._server = None

    @property
    def url(self) -> str | None:
        """``http://HOST:PORT`` of the endpoint, None when it does not run."""
        return self._server.url if self._server is not None else None
