"""The composition root: builds the cluster's parts, starts and stops them in order.

Nothing in the broker reaches for a global: the clock, the shared metadata, each
broker's purgatories, logs and coordinator are made here and passed down. Tests use the
same entry point (``MiniKafka``) as the command line, on port 0.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from broker.broker import Broker
from broker.cluster_metadata import ClusterMetadata
from broker.config import BrokerConfig
from broker.control.faults import FaultInjector
from broker.controller import Controller
from broker.group.coordinator_service import GroupCoordinatorService
from broker.log import LogManager
from broker.metrics import RequestMetrics
from broker.replica.replica_manager import ReplicaManager
from purgatory import LoopClock

if TYPE_CHECKING:
    from broker.capture import CaptureSet
    from broker.control.server import ControlServer

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
        control_port: int | None = None,
        control_host: str = "127.0.0.1",
        capture_dir: Path | None = None,
        advertised_host: str | None = None,
    ) -> None:
        if brokers < 1:
            raise ValueError("--brokers must be at least 1")
        self.config = config or BrokerConfig.model_validate({})
        self.host = host
        # What Metadata tells clients (Kafka's advertised.listeners): by default the
        # listen address; a container listening on 0.0.0.0 advertises its service name.
        self.advertised_host = advertised_host or host
        self.base_port = port
        self.data_dir = data_dir
        if data_dir is None and self.config.log_dirs:
            self.data_dir = Path(self.config.log_dirs.split(",")[0])
        self.num_brokers = brokers
        self.cluster = ClusterMetadata(data_dir=self.data_dir)
        self.brokers: list[Broker] = []
        self._started = False
        # The in-process controller (leader election, ISR changes) shared by all brokers.
        self.controller = Controller(self.cluster)
        self.stopped_brokers: set[int] = set()
        # Without a data dir, a broker's memory logs are its "disk": kept across a
        # stop_broker/start_broker so a restarted follower has something to truncate.
        self._memory_logs: dict[int, LogManager] = {}
        # Control endpoint (broker/control/): faults and metrics are per broker id, so
        # they outlive a broker's restart; the HTTP server runs only with a port.
        self.control_port = control_port
        self.control_host = control_host
        self.faults = FaultInjector()
        self.request_metrics: dict[int, RequestMetrics] = {}
        self._control: ControlServer | None = None
        # Capture (broker/capture.py): every request and delayed-operation event of every
        # broker, into rolling files under capture_dir; off when None.
        self.capture_dir = capture_dir
        self.captures: CaptureSet | None = None

    def _build_broker(self, broker_id: int, port: int | None = None) -> Broker:
        loop = asyncio.get_running_loop()
        if port is None:
            port = 0 if self.base_port == 0 else self.base_port + broker_id
        broker_dir = self.data_dir / f"broker-{broker_id}" if self.data_dir is not None else None
        config = self.config.model_copy(update={"broker_id": broker_id})
        broker = Broker(
            broker_id, self.host, port, config, self.cluster, LoopClock(loop.time), broker_dir
        )
        broker.advertised_host = self.advertised_host
        replica_manager = ReplicaManager(broker, self.controller, self._memory_logs.get(broker_id))
        if self.data_dir is None:
            self._memory_logs[broker_id] = replica_manager.log_manager
        broker.replica_manager = replica_manager
        broker.components.append(replica_manager)
        group_service = GroupCoordinatorService(broker)
        broker.group_service = group_service
        broker.components.append(group_service)
        broker.faults = self.faults
        broker.observers.append(
            self.request_metrics.setdefault(broker_id, RequestMetrics(broker_id))
        )
        if self.capture_dir is not None:
            if self.captures is None:
                from broker.capture import CaptureSet

                self.captures = CaptureSet(self.capture_dir)
            self.captures.attach(broker)
        return broker

    async def start(self) -> None:
        for broker_id in range(self.num_brokers):
            broker = self._build_broker(broker_id)
            self.brokers.append(broker)
        # Register every broker before any starts, so placement sees the whole cluster.
        for broker in self.brokers:
            self.cluster.register_broker(broker.broker_id, broker.advertised_host, broker.port)
        for broker in self.brokers:
            await broker.start()
        if self.captures is not None:
            self.captures.start()
        if self.control_port is not None:
            from broker.control.server import ControlServer  # aiohttp only when asked

            self._control = ControlServer(self, self.control_host, self.control_port)
            await self._control.start()
        self._started = True

    async def stop(self) -> None:
        if self._control is not None:
            await self._control.stop()
            self._control = None
        for broker in reversed(self.brokers):
            if broker.broker_id not in self.stopped_brokers:
                await broker.stop()
        if self.captures is not None:
            await self.captures.stop()
            self.captures = None
        self._started = False

    async def stop_broker(self, broker_id: int) -> None:
        """Stop one broker as if its process died; the controller fails its leaders over.

        Its listener closes and its connections drop (clients refresh metadata and
        retry elsewhere); then the controller removes it from every ISR and elects new
        leaders from the remaining ISR members (leader epoch + 1). No-op if stopped.
        """
        if broker_id in self.stopped_brokers:
            return
        broker = self.brokers[broker_id]
        self.stopped_brokers.add(broker_id)
        await broker.stop()
        self.controller.on_broker_failure(broker_id)

    async def start_broker(self, broker_id: int) -> None:
        """Restart a stopped broker on the same port with the same data (dir or memory).

        Its replicas come back as followers: they truncate to what the leader's epochs
        prove (OffsetForLeaderEpoch), catch up, and rejoin the ISR. Partitions that had
        no live ISR member are led by it again. No-op if it is running.
        """
        if broker_id not in self.stopped_brokers:
            return
        old = self.brokers[broker_id]
        broker = self._build_broker(broker_id, port=old.port)
        self.brokers[broker_id] = broker
        await broker.start()
        self.stopped_brokers.discard(broker_id)
        self.controller.on_broker_startup(broker_id)

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{b.advertised_host}:{b.port}" for b in self.brokers)

    @property
    def control_url(self) -> str | None:
        """``http://HOST:PORT`` of the control endpoint, None when it does not run."""
        return self._control.url if self._control is not None else None

    async def __aenter__(self) -> MiniKafka:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
