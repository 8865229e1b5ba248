"""`RawCluster`: the project's own client (`client_io.ClientShell` and kio's messages) for
the simulated clients that speak what aiokafka does not (transactions v2, DeleteRecords,
client quotas): one connection per broker, metadata, coordinators, and every response's
``throttle_time`` honoured as Kafka's clients do (KIP-219: no request to that broker until
it has passed).

``authenticate``, when given, runs on every new connection before its first request (the
SASL clients log in there: a new connection after a restart or a partition logs in again);
when it raises, the connection is dropped and the request fails with `RawError`.

Any failure -- a dropped or refused connection, no answer within ``timeout_s``, a frame the
connection refuses -- closes that broker's connection and raises `RawError`; the caller
decides whether to retry. Errors in a response's body are the caller's to read.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Awaitable, Callable
from typing import Any

from kio.schema.errors import ErrorCode

from client_io import ClientShell
from protocol.builders import request_builder

METADATA, FIND_COORDINATOR = 3, 10
#: The Metadata version asked (v12: topic ids and names, no authorised operations).
METADATA_V, FIND_COORDINATOR_V = 12, 4


class RawError(Exception):
    """A request got no usable answer (its connection is gone)."""


class RawCluster:
    def __init__(
        self,
        bootstrap: str,
        client_id: str,
        *,
        timeout_s: float = 10.0,
        on_throttle: Any = None,
        authenticate: Callable[[ClientShell], Awaitable[None]] | None = None,
    ) -> None:
        self._bootstrap = [
            (host, int(port))
            for host, _, port in (address.rpartition(":") for address in bootstrap.split(","))
        ]
        self._any = 0  # which bootstrap broker node -1 is: the next one after a failure
        self._addresses: dict[int, tuple[str, int]] = {}
        self._client_id = client_id
        self._timeout_s = timeout_s
        self._shells: dict[int, ClientShell] = {}
        self._quiet_until: dict[int, float] = {}
        self._on_throttle = on_throttle  # called with the ms waited out, when there are any
        self._authenticate = authenticate

    async def call(self, node: int, api_key: int, version: int, name: str, **fields: Any) -> Any:
        """One request to ``node`` (-1: the bootstrap broker), its decoded answer."""
        loop = asyncio.get_running_loop()
        wait = self._quiet_until.get(node, 0.0) - loop.time()
        if wait > 0:
            await asyncio.sleep(wait)
        body = getattr(request_builder(api_key, version), name)(**fields)
        try:
            shell = await self._shell(node)
            response = await shell.request(api_key, version, body, timeout_s=self._timeout_s)
            answer = response.body
        except (ConnectionError, TimeoutError, OSError, ValueError) as exc:
            await self._drop(node)
            raise RawError(f"{name} to node {node}: {type(exc).__name__}") from exc
        throttle = getattr(answer, "throttle_time", None)
        if isinstance(throttle, datetime.timedelta) and throttle > datetime.timedelta(0):
            self._quiet_until[node] = loop.time() + throttle.total_seconds()
            if self._on_throttle is not None:
                self._on_throttle(int(throttle.total_seconds() * 1000))
        return answer

    async def leaders(self, topic: str) -> dict[int, int]:
        """Each partition of ``topic`` and its leader (partitions without one left out);
        the brokers' addresses are learnt on the way."""
        b = request_builder(METADATA, METADATA_V)
        answer = await self.call(
            -1,
            METADATA,
            METADATA_V,
            "MetadataRequest",
            topics=(b.MetadataRequestTopic(topic_id=None, name=topic),),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        for broker in answer.brokers:
            self._addresses[int(broker.node_id)] = (broker.host, int(broker.port))
        return {
            int(p.partition_index): int(p.leader_id)
            for t in answer.topics
            for p in t.partitions
            if p.error_code is ErrorCode.none and int(p.leader_id) >= 0
        }

    async def coordinator(self, key: str, key_type: int) -> int:
        """The broker coordinating ``key`` (0: a group, 1: a transactional id)."""
        answer = await self.call(
            -1,
            FIND_COORDINATOR,
            FIND_COORDINATOR_V,
            "FindCoordinatorRequest",
            key_type=key_type,
            coordinator_keys=(key,),
        )
        found = answer.coordinators[0]
        if found.error_code is not ErrorCode.none:
            raise RawError(f"FindCoordinator {key}: {found.error_code.name}")
        self._addresses[int(found.node_id)] = (found.host, int(found.port))
        return int(found.node_id)

    async def close(self) -> None:
        for node in list(self._shells):
            await self._drop(node)

    async def _shell(self, node: int) -> ClientShell:
        shell = self._shells.get(node)
        if shell is not None and not shell.closed:
            return shell
        if node == -1 or node not in self._addresses:
            host, port = self._bootstrap[self._any % len(self._bootstrap)]
        else:
            host, port = self._addresses[node]
        shell = await ClientShell.open(
            host, port, client_id=self._client_id, timeout_s=self._timeout_s
        )
        if self._authenticate is not None:
            try:
                await self._authenticate(shell)
            except BaseException:
                shell.abort()
                raise
        self._shells[node] = shell
        return shell

    async def _drop(self, node: int) -> None:
        shell = self._shells.pop(node, None)
        if node == -1:
            self._any += 1
        if shell is not None:
            shell.abort()
