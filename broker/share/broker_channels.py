"""Requests from a share component to other brokers over TCP, one connection each.

Kafka's share components send their inter-broker requests through a ``KafkaClient`` on a
send thread (``PersisterStateManager``'s for the share state APIs,
``ShareGroupDLQStateManager``'s for the dead-letter queue's Produce and CreateTopics).
Here each destination broker gets one ``LeaderEndpoint`` connection on the inter-broker
listener (TLS/SASL with an ``InterBrokerClient``) and a task that sends its queued
requests one at a time, in order. A request whose connection fails is answered ``None``
and the connection closed; the next request opens a new one. The caller owns retries.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable
from typing import Any

from broker.cluster.cluster_metadata import ClusterMetadata
from broker.replica.leader_endpoint import LeaderEndpoint
from broker.security.sasl_client import InterBrokerClient

log = logging.getLogger("broker.share")

OnResponse = Callable[[Any | None], None]
Request = tuple[int, int, Any, OnResponse]


class BrokerChannels:
    """One ``_Channel`` per destination broker, made on first use. ``name`` prefixes
    the client id and the sender tasks' names (``share-persister-1``)."""

    def __init__(
        self, name: str, metadata: ClusterMetadata, security: InterBrokerClient | None = None
    ) -> None:
        self.name = name
        self.metadata = metadata
        self.security = security
        self._channels: dict[int, _Channel] = {}

    def send(
        self, broker_id: int, api_key: int, version: int, body: Any, on_response: OnResponse
    ) -> None:
        """Queue one request to ``broker_id``; ``on_response`` gets the decoded response
        body, or None when the broker could not be reached."""
        channel = self._channels.get(broker_id)
        if channel is None:
            channel = self._channels[broker_id] = _Channel(self, broker_id)
        channel.send(api_key, version, body, on_response)

    async def stop(self) -> None:
        channels, self._channels = self._channels, {}
        for channel in channels.values():
            await channel.stop()


class _Channel:
    """The connection and sender task for one destination broker."""

    def __init__(self, owner: BrokerChannels, broker_id: int) -> None:
        self._owner = owner
        self.broker_id = broker_id
        self._queue: deque[Request] = deque()
        self._endpoint: LeaderEndpoint | None = None
        self._task: asyncio.Task[None] | None = None

    def send(self, api_key: int, version: int, body: Any, on_response: OnResponse) -> None:
        self._queue.append((api_key, version, body, on_response))
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"{self._owner.name}-{self.broker_id}"
            )

    async def _run(self) -> None:
        try:
            while self._queue:
                api_key, version, body, on_response = self._queue.popleft()
                on_response(await self._exchange(api_key, version, body))
        finally:
            self._task = None

    async def _exchange(self, api_key: int, version: int, body: Any) -> Any | None:
        try:
            return await self._connection().request(api_key, version, body)
        except asyncio.CancelledError:
            raise
        except (OSError, ConnectionError, TimeoutError) as exc:
            log.debug("%s request to broker %d failed: %s", self._owner.name, self.broker_id, exc)
        except Exception:
            log.exception("%s request to broker %d failed", self._owner.name, self.broker_id)
        self.close()
        return None

    def _connection(self) -> LeaderEndpoint:
        if self._endpoint is None:
            endpoint = self._owner.metadata.brokers.get(self.broker_id)
            if endpoint is None:
                raise ConnectionError(f"broker {self.broker_id} is not registered")
            security = self._owner.security
            listener = security.listener_name if security is not None else "PLAINTEXT"
            host, port = endpoint.address(listener)
            self._endpoint = LeaderEndpoint(host, port, self._owner.name, security)
        return self._endpoint

    def close(self) -> None:
        if self._endpoint is not None:
            self._endpoint.close()
            self._endpoint = None

    async def stop(self) -> None:
        task, self._task = self._task, None
        self._queue.clear()
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self.close()
