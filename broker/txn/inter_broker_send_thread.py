"""Kafka's ``InterBrokerSendThread``: one destination broker's connection, and the task that
sends it one request at a time when woken.

The transaction coordinator's marker sender (WriteTxnMarkers) and a partition leader's
AddPartitionsToTxn manager (transactions v2) each keep one per destination broker. The
connection is opened on first use over the inter-broker listener (``security``: TLS/SASL,
None for PLAINTEXT) and dropped on a failure, to be opened again for the next request; what
to send and what to do with the answer is the subclass's ``_run``.

Where we differ from Kafka: a task per destination on the event loop instead of one thread
polling a NetworkClient for every destination.
"""

from __future__ import annotations

import asyncio
import contextlib

from broker.cluster.cluster_metadata import ClusterMetadata
from broker.replica.leader_endpoint import LeaderEndpoint
from broker.security.sasl_client import InterBrokerClient

__all__ = ["InterBrokerSendThread"]


class InterBrokerSendThread:
    """The connection to ``broker_id`` and the task (``_run``) that uses it."""

    def __init__(
        self,
        broker_id: int,
        metadata: ClusterMetadata,
        security: InterBrokerClient | None,
        client_id: str,
        thread_name: str,
    ) -> None:
        self.broker_id = broker_id
        self._metadata = metadata
        self._security = security
        self._client_id = client_id
        self._wake = asyncio.Event()
        self._endpoint: LeaderEndpoint | None = None
        self._task = asyncio.get_running_loop().create_task(self._run(), name=thread_name)

    def wake(self) -> None:
        self._wake.set()

    async def stop(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._close()

    async def _run(self) -> None:
        raise NotImplementedError

    def _close(self) -> None:
        if self._endpoint is not None:
            self._endpoint.close()
            self._endpoint = None

    def _connection(self) -> LeaderEndpoint:
        if self._endpoint is None:
            endpoint = self._metadata.brokers.get(self.broker_id)
            if endpoint is None:
                raise ConnectionError(f"broker {self.broker_id} is not registered")
            security = self._security
            listener = security.listener_name if security is not None else "PLAINTEXT"
            host, port = endpoint.address(listener)
            self._endpoint = LeaderEndpoint(host, port, self._client_id, security)
        return self._endpoint
