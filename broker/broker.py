"""One Kafka broker: its listener, its purgatories, its partitions, its handlers.

Several of these may run in one process (the simulated cluster); they share only the
``ClusterMetadata`` and talk to each other over TCP like real brokers. Everything a
broker owns is built by the composition root (``broker/app.py``) and handed in, and
the broker starts and stops what it owns in order.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from broker.cluster_metadata import ClusterMetadata, TopicInfo
from broker.config import BrokerConfig
from broker.control.faults import NoFaults
from broker.handlers.base import ApiHandler
from broker.handlers.registry import build_registry
from protocol.api_registry import ApiSpec
from protocol.codec import RequestHeader, decode_request
from purgatory import Clock, DelayedOperationPurgatory, ExpirationReaper, SystemTimer

if TYPE_CHECKING:
    from broker.connection import KafkaConnection
    from broker.context import RequestContext
    from broker.group.coordinator_service import GroupCoordinatorService
    from broker.replica.replica_manager import ReplicaManager

log = logging.getLogger("broker")

# Kafka's purgatory names (DelayedOperationPurgatory purgatoryName).
PRODUCE = "Produce"
FETCH = "Fetch"
HEARTBEAT = "Heartbeat"
REBALANCE = "Rebalance"


class PurgatorySet:
    """A broker's purgatories, each with its own timer and reaper as in Kafka."""

    def __init__(self, clock: Clock, config: BrokerConfig) -> None:
        purge = {
            PRODUCE: config.producer_purgatory_purge_interval_requests,
            FETCH: config.fetch_purgatory_purge_interval_requests,
            HEARTBEAT: 1000,
            REBALANCE: 1000,
        }
        self.timers: dict[str, SystemTimer] = {}
        self.purgatories: dict[str, DelayedOperationPurgatory[Any]] = {}
        self.reapers: list[ExpirationReaper] = []
        for name, interval in purge.items():
            timer = SystemTimer(clock, name=name)
            self.timers[name] = timer
            self.purgatories[name] = DelayedOperationPurgatory(name, timer, purge_interval=interval)
            self.reapers.append(ExpirationReaper(timer, name=f"ExpirationReaper-{name}"))

    def __getitem__(self, name: str) -> DelayedOperationPurgatory[Any]:
        return self.purgatories[name]

    def start(self) -> None:
        for reaper in self.reapers:
            reaper.start()

    async def stop(self) -> None:
        for reaper in self.reapers:
            await reaper.stop()


class Broker:
    """A broker of the cluster; ``start()`` opens its listener."""

    def __init__(
        self,
        broker_id: int,
        host: str,
        port: int,
        config: BrokerConfig,
        cluster: ClusterMetadata,
        clock: Clock,
        data_dir: Path | None,
    ) -> None:
        self.broker_id = broker_id
        self.host = host
        self.advertised_host = host  # what Metadata advertises; see MiniKafka
        self.port = port
        self.config = config
        self.cluster = cluster
        self.clock = clock
        self.data_dir = data_dir
        self.handlers: dict[int, ApiHandler] = build_registry()
        self._api_specs = [
            ApiSpec(h.api_key, h.name, h.min_version, h.max_version)
            for h in sorted(self.handlers.values(), key=lambda h: h.api_key)
        ]
        self.purgatories = PurgatorySet(clock, config)
        self._server: asyncio.Server | None = None
        self._connections: set[KafkaConnection] = set()
        self._connection_index = itertools.count()
        self.observers: list[Any] = []  # capture, metrics: request_completed(ctx, ...)
        self.components: list[Any] = []  # started/stopped in order: replica manager, ...
        self.faults: NoFaults = NoFaults()  # the cluster's FaultInjector, set by the app
        self.replica_manager: ReplicaManager  # set by the composition root
        self.group_service: GroupCoordinatorService  # set by the composition root

    # -- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        from broker.connection import KafkaConnection

        loop = asyncio.get_running_loop()
        self.purgatories.start()
        for component in self.components:
            await component.start()
        self._server = await loop.create_server(
            lambda: KafkaConnection(self), self.host, self.port, reuse_address=True
        )
        sock = self._server.sockets[0]
        self.port = int(sock.getsockname()[1])
        self.cluster.register_broker(self.broker_id, self.advertised_host, self.port)
        log.info("broker %d listening on %s:%d", self.broker_id, self.host, self.port)

    async def stop(self) -> None:
        """Stop accepting, drop connections, stop components and reapers, close logs."""
        if self._server is not None:
            self._server.close()
        for connection in list(self._connections):
            connection.abort("broker shutting down")
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None
        for component in reversed(self.components):
            await component.stop()
        await self.purgatories.stop()
        if self.broker_id in self.cluster.brokers:
            self.cluster.brokers[self.broker_id].alive = False

    # -- connection hooks --------------------------------------------------------------

    def next_connection_index(self) -> int:
        return next(self._connection_index)

    def connection_opened(self, connection: KafkaConnection) -> None:
        self._connections.add(connection)

    def connection_closed(self, connection: KafkaConnection) -> None:
        self._connections.discard(connection)

    def api_specs(self) -> list[ApiSpec]:
        return self._api_specs

    def decode_request(self, header: RequestHeader, frame: bytes, body_offset: int) -> Any:
        return decode_request(header, frame, body_offset)

    def request_received(self, ctx: RequestContext, request: Any, frame: bytes) -> None:
        for observer in self.observers:
            observer.request_received(ctx, request, frame)

    def request_completed(self, ctx: RequestContext, response: Any, size: int) -> None:
        for observer in self.observers:
            observer.request_completed(ctx, response, size)

    # -- topics ------------------------------------------------------------------------

    def auto_create_topic(self, name: str) -> TopicInfo:
        """Create a topic with the broker's defaults (``auto.create.topics.enable``)."""
        alive = len(self.cluster.alive_brokers())
        return self.cluster.create_topic(
            name,
            self.config.num_partitions,
            min(self.config.default_replication_factor, max(alive, 1)),
            {},
        )
