"""`ClusterLink`: a client's connections to a simulated cluster, one request at a time each.

What aiokafka's client does for its consumers, reduced to what the protocol clients need:
the cluster's metadata (brokers, each partition's leader, topic ids both ways), a group's
coordinator (FindCoordinator v4), and one `ClientShell` per broker, opened on first use.
Requests on one connection are serialised (a lock per broker): a member's heartbeat task
and its fetch task each hold a link of their own, as Kafka's consumer has a network thread
apart from its application thread.

A connection that fails (reset, closed by a dying broker, no answer in ``timeout_s``) is
closed and forgotten; the caller gets ``ConnectionError`` and tries again later. Each
connection has a serial; ``on_opened(serial, broker)`` and ``on_closed(serial, broker)``
are told when one starts and ends: the share checker ends what a member held through it
there (Kafka 4.1 releases a closed connection's share sessions), and trusts a connection
that stayed open to show that its broker did not restart.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from client_io import ClientShell
from protocol.builders import Builder, request_builder
from protocol.errors import ProtocolError

__all__ = ["ClusterLink", "Leader"]

METADATA, FIND_COORDINATOR = 3, 10
RETRIABLE_COORDINATOR = (
    ErrorCode.coordinator_not_available,
    ErrorCode.coordinator_load_in_progress,
    ErrorCode.not_coordinator,
)


@dataclass(frozen=True, slots=True)
class Leader:
    broker: int
    epoch: int


@dataclass(slots=True)
class _Connection:
    shell: ClientShell
    serial: int
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class ClusterLink:
    """Connections, metadata and coordinators for one client task; see the module doc."""

    def __init__(
        self,
        bootstrap: str,
        client_id: str,
        *,
        timeout_s: float = 30.0,
        on_opened: Callable[[int, int], None] | None = None,
        on_closed: Callable[[int, int], None] | None = None,
    ) -> None:
        self._bootstrap = [
            (host, int(port)) for host, port in (a.rsplit(":", 1) for a in bootstrap.split(","))
        ]
        self.client_id = client_id
        self._timeout_s = timeout_s
        self._on_opened = on_opened
        self._on_closed = on_closed
        self._connections: dict[int, _Connection] = {}
        self._serials = 0
        self.brokers: dict[int, tuple[str, int]] = {}
        self.leaders: dict[tuple[str, int], Leader] = {}
        self.topic_ids: dict[str, uuid.UUID] = {}
        self.topic_names: dict[uuid.UUID, str] = {}
        self.partitions: dict[str, int] = {}

    # -- requests ------------------------------------------------------------------------

    async def call(
        self,
        broker: int,
        api_key: int,
        version: int,
        build: Callable[[Builder], Any],
        timeout_s: float | None = None,
    ) -> tuple[Any, int]:
        """Send what ``build`` makes to ``broker``; its decoded answer and the connection's
        serial. ConnectionError when the broker cannot be reached or does not answer."""
        connection = await self._connection(broker)
        payload = build(request_builder(api_key, version))
        async with connection.lock:
            try:
                response = await connection.shell.request(
                    api_key, version, payload, timeout_s or self._timeout_s
                )
                return response.body, connection.serial
            except (ConnectionError, TimeoutError, OSError, ProtocolError) as exc:
                self.forget(broker)
                raise ConnectionError(f"broker {broker}: {exc}") from exc

    async def _connection(self, broker: int) -> _Connection:
        existing = self._connections.get(broker)
        if existing is not None and not existing.shell.closed:
            return existing
        if existing is not None:
            self.forget(broker)
        address = self.brokers.get(broker)
        if address is None:
            raise ConnectionError(f"broker {broker} is not in the metadata")
        try:
            shell = await ClientShell.open(*address, client_id=self.client_id, timeout_s=10)
        except OSError as exc:
            raise ConnectionError(f"broker {broker}: {exc}") from exc
        self._serials += 1
        opened = _Connection(shell, self._serials)
        self._connections[broker] = opened
        if self._on_opened is not None:
            self._on_opened(opened.serial, broker)
        return opened

    def forget(self, broker: int) -> None:
        """Close the connection to ``broker`` (it failed, or the owner is done with it)."""
        connection = self._connections.pop(broker, None)
        if connection is None:
            return
        connection.shell.abort()
        if self._on_closed is not None:
            self._on_closed(connection.serial, broker)

    def close(self) -> None:
        for broker in sorted(self._connections):
            self.forget(broker)

    # -- metadata and coordinators -------------------------------------------------------

    async def refresh(self, topics: tuple[str, ...]) -> None:
        """Brokers, leaders and topic ids of ``topics`` from any broker that answers."""

        def build(b: Builder) -> Any:
            return b.MetadataRequest(
                topics=tuple(b.MetadataRequestTopic(name=t, topic_id=None) for t in topics),
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )

        response = await self._any(METADATA, 12, build)
        self.brokers = {int(b.node_id): (str(b.host), int(b.port)) for b in response.brokers}
        for gone in [b for b in self._connections if b not in self.brokers]:
            self.forget(gone)  # a bootstrap address's connection, by its stand-in id
        for topic in response.topics:
            if topic.error_code is not ErrorCode.none or topic.name is None:
                continue
            name = str(topic.name)
            if topic.topic_id is not None:
                self.topic_ids[name] = topic.topic_id
                self.topic_names[topic.topic_id] = name
            self.partitions[name] = len(topic.partitions)
            for p in topic.partitions:
                key = (name, int(p.partition_index))
                if int(p.leader_id) >= 0:
                    self.leaders[key] = Leader(int(p.leader_id), int(p.leader_epoch))
                else:
                    self.leaders.pop(key, None)

    async def coordinator(self, key: str) -> int:
        """The broker that coordinates group ``key`` (ConnectionError while none does)."""

        def build(b: Builder) -> Any:
            return b.FindCoordinatorRequest(key_type=0, coordinator_keys=(key,))

        response = await self._any(FIND_COORDINATOR, 4, build)
        found = response.coordinators[0]
        if found.error_code is not ErrorCode.none:
            raise ConnectionError(f"FindCoordinator {key}: {found.error_code.name}")
        node = int(found.node_id)
        self.brokers.setdefault(node, (str(found.host), int(found.port)))
        return node

    async def _any(self, api_key: int, version: int, build: Callable[[Builder], Any]) -> Any:
        """A request any broker can answer: the known brokers first, then the bootstrap."""
        if not self.brokers:
            self.brokers = dict(enumerate(self._bootstrap, start=-len(self._bootstrap)))
        last: Exception | None = None
        for broker in sorted(self.brokers, key=lambda b: (b not in self._connections, b)):
            try:
                body, _ = await self.call(broker, api_key, version, build)
                return body
            except ConnectionError as exc:
                last = exc
        self.brokers = {}
        raise ConnectionError(f"no broker answers: {last}")
