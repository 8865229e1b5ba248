"""One Kafka broker's life: its listener, its connections, and the order things start in.

Several of these may run in one process (the simulated cluster); they share only the
``ClusterMetadata`` and talk to each other over TCP like real brokers. Everything a
broker runs is built whole by the composition root (``broker/app.py``) and handed in:
the dispatcher that owns the request path, the purgatories (with their reapers), and
the components (replica manager, group coordinator) in the order they start. The broker
starts them, opens its listener, and at stop undoes it all in reverse order.

Besides its primary PLAINTEXT listener a broker opens one server per TLS/SASL listener
(``channels``, ``broker/security/listeners.py``), each on its own port (0: ephemeral; else
the configured port + broker id), registered in the cluster metadata under the listener's
name. A TLS handshake that stalls or fails costs its connection only: it is abandoned after
``SSL_HANDSHAKE_TIMEOUT_S`` (Kafka has no such setting; its idle check closes it instead).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Mapping, Sequence
from typing import Protocol

from broker.cluster.cluster_metadata import ClusterMetadata
from broker.config.broker_config import BrokerConfig
from broker.replica.replica_manager import ReplicaManager
from broker.security.listeners import ChannelBuilder
from broker.server.connection import KafkaConnection
from broker.server.dispatch import RequestDispatcher
from broker.server.purgatories import PurgatorySet
from broker.server.request_timing import RequestClock
from broker.server.scheduler import PeriodicTask
from broker.server.services import BrokerServices

log = logging.getLogger("broker")

SSL_HANDSHAKE_TIMEOUT_S = 10.0


class Component(Protocol):
    """A part of a broker with a life: started before the listener opens, stopped after."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


class Broker:
    """A broker of the cluster; ``start()`` opens its listener."""

    def __init__(
        self,
        *,
        host: str,
        port: int,
        advertised_host: str,
        metadata: ClusterMetadata,
        dispatcher: RequestDispatcher,
        purgatories: PurgatorySet,
        components: Sequence[Component],
        request_clock: RequestClock,
        channels: Sequence[ChannelBuilder] = (),
        listener_ports: Mapping[str, int] | None = None,
    ) -> None:
        services = dispatcher.services
        self._channels = tuple(channels)
        # The port of each TLS/SASL listener once open (kept across a restart).
        self.listener_ports: dict[str, int] = dict(listener_ports or {})
        self._listener_servers: list[asyncio.Server] = []
        self.services = services
        self.broker_id = services.broker_id
        self.host = host
        self.port = port
        self.advertised_host = advertised_host
        self._metadata = metadata
        self.dispatcher = dispatcher
        self.purgatories = purgatories
        self._components = tuple(components)
        self._request_clock = request_clock
        self._server: asyncio.Server | None = None
        # Open connections in the order they were accepted (a dict, not a set: a set of
        # objects iterates by address, and `stop` aborts them in that order).
        self._connections: dict[KafkaConnection, None] = {}
        self._connection_index = itertools.count()
        idle_ms = services.config.connections_max_idle_ms
        self._idle_ms = idle_ms
        # Kafka's Selector closes connections idle for connections.max.idle.ms; checked
        # on the scheduler, so a closed one is at most half that period late.
        self._idle_check = PeriodicTask(
            purgatories.scheduler_timer,
            f"idle-connections-{self.broker_id}",
            max(1, min(idle_ms // 2, 10_000)),
            self.close_idle_connections,
        )

    # -- what tests and the control endpoint read ---------------------------------------

    @property
    def config(self) -> BrokerConfig:
        return self.services.config

    @property
    def replica_manager(self) -> ReplicaManager:
        return self.services.replica_manager

    # -- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self.purgatories.start()
        for component in self._components:
            await component.start()
        self._server = await loop.create_server(
            self._new_connection,
            self.host,
            self.port,
            reuse_address=True,
            backlog=self.services.config.socket_listen_backlog_size,
        )
        sock = self._server.sockets[0]
        self.port = int(sock.getsockname()[1])
        self._idle_check.start()
        self._metadata.register_broker(self.broker_id, self.advertised_host, self.port)
        log.info("broker %d listening on %s:%d", self.broker_id, self.host, self.port)
        for channel in self._channels:
            await self._open_listener(channel)

    async def _open_listener(self, channel: ChannelBuilder) -> None:
        listener = channel.listener
        port = self.listener_ports.get(listener.name)
        if port is None:
            port = 0 if listener.port == 0 else listener.port + self.broker_id
        host = listener.host or None  # Kafka: an empty host binds every interface
        server = await asyncio.get_running_loop().create_server(
            lambda: self._new_connection(channel),
            host,
            port,
            reuse_address=True,
            backlog=self.services.config.socket_listen_backlog_size,
            ssl=listener.ssl_context,
            ssl_handshake_timeout=SSL_HANDSHAKE_TIMEOUT_S if listener.uses_tls else None,
        )
        self._listener_servers.append(server)
        port = int(server.sockets[0].getsockname()[1])
        self.listener_ports[listener.name] = port
        advertised = listener.advertised_host or self.advertised_host
        self._metadata.register_listener(self.broker_id, listener.name, advertised, port)
        log.info(
            "broker %d listening on %s://%s:%d", self.broker_id, listener.name, host or "", port
        )

    async def stop(self) -> None:
        """Stop accepting, drop connections, stop components and reapers, close logs."""
        self._idle_check.stop()
        for server in self._listener_servers:
            server.close()
        if self._server is not None:
            self._server.close()
        for connection in list(self._connections):
            connection.abort("broker shutting down", level=logging.DEBUG)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None
        for server in self._listener_servers:
            await server.wait_closed()
        self._listener_servers = []
        for component in reversed(self._components):
            await component.stop()
        await self.purgatories.stop()
        self._metadata.mark_broker_stopped(self.broker_id)

    # -- connections -------------------------------------------------------------------

    def _new_connection(self, channel: ChannelBuilder | None = None) -> KafkaConnection:
        connection = KafkaConnection(
            self.dispatcher,
            self._request_clock,
            self.services.clock,
            self.services.config.socket_request_max_bytes,
            next(self._connection_index),
            self._connection_closed,
            channel,
        )
        self._connections[connection] = None
        return connection

    def _connection_closed(self, connection: KafkaConnection) -> None:
        self._connections.pop(connection, None)
        # KIP-932: the share sessions the connection opened end with it
        self.services.share_partition_manager.connection_closed(connection.info.connection_id)
        # KIP-714: a client instance goes with its connection (Kafka's disconnect listener)
        telemetry = self.services.client_telemetry
        if telemetry is not None:
            telemetry.manager.connection_closed(connection.info.connection_id)

    def close_idle_connections(self) -> int:
        """Close every connection with nothing in flight for ``connections.max.idle.ms``."""
        deadline = self.services.clock.now_ms() - self._idle_ms
        closed = 0
        for connection in list(self._connections):
            since = connection.idle_since_ms()
            if since is not None and since < deadline:
                connection.abort(
                    f"idle for more than connections.max.idle.ms={self._idle_ms}",
                    level=logging.INFO,
                )
                closed += 1
        return closed

    @property
    def connection_count(self) -> int:
        return len(self._connections)


__all__ = ["Broker", "BrokerServices", "Component"]
