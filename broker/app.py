"""The composition root: builds the cluster's parts, starts and stops them in order.

Nothing in the broker reaches for a global: the clock, the shared metadata, each
broker's purgatories, logs and coordinator are made here and passed down. Tests use the
same entry point (``MiniKafka``) as the command line, on port 0.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from broker.broker import Broker
from broker.cluster_metadata import ClusterMetadata
from broker.config import BrokerConfig
from broker.group.coordinator_service import GroupCoordinatorService
from broker.replica.replica_manager import ReplicaManager
from purgatory import LoopClock

log = logging.getLogger("broker.app")


class MiniKafka:
    """N brokers in one process sharing one cluster metadata."""

    def __init__(
        self,
        config: BrokerConfig | None = None,
        *,
        brokers: int = 1,
        host: str = "127.0.0.1",
        port: int = 0,
        data_dir: Path | None = None,
    ) -> None:
        if brokers < 1:
            raise ValueError("--brokers must be at least 1")
        self.config = config or BrokerConfig.model_validate({})
        self.host = host
        self.base_port = port
        self.data_dir = data_dir
        if data_dir is None and self.config.log_dirs:
            self.data_dir = Path(self.config.log_dirs.split(",")[0])
        self.num_brokers = brokers
        self.cluster = ClusterMetadata(data_dir=self.data_dir)
        self.brokers: list[Broker] = []
        self._started = False

    def _build_broker(self, broker_id: int) -> Broker:
        loop = asyncio.get_running_loop()
        port = 0 if self.base_port == 0 else self.base_port + broker_id
        broker_dir = self.data_dir / f"broker-{broker_id}" if self.data_dir is not None else None
        config = self.config.model_copy(update={"broker_id": broker_id})
        broker = Broker(
            broker_id, self.host, port, config, self.cluster, LoopClock(loop.time), broker_dir
        )
        replica_manager = ReplicaManager(broker)
        broker.replica_manager = replica_manager
        broker.components.append(replica_manager)
        group_service = GroupCoordinatorService(broker)
        broker.group_service = group_service
        broker.components.append(group_service)
        return broker

    async def start(self) -> None:
        for broker_id in range(self.num_brokers):
            broker = self._build_broker(broker_id)
            self.brokers.append(broker)
        # Register every broker before any starts, so placement sees the whole cluster.
        for broker in self.brokers:
            self.cluster.register_broker(broker.broker_id, broker.host, broker.port)
        for broker in self.brokers:
            await broker.start()
        self._started = True

    async def stop(self) -> None:
        for broker in reversed(self.brokers):
            await broker.stop()
        self._started = False

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{b.host}:{b.port}" for b in self.brokers)

    async def __aenter__(self) -> MiniKafka:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
