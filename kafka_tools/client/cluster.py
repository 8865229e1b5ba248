"""``KafkaClient``: connections to a cluster, the API versions to use, metadata, offsets,
group coordinators and commits -- the calls every tool makes."""

from __future__ import annotations

import asyncio
import base64
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_tools.client.connection import BrokerConnection
from protocol.api_registry import KIO_VERSIONS
from protocol.builders import Builder, request_builder

__all__ = [
    "EARLIEST",
    "LATEST",
    "AdminError",
    "ClusterView",
    "KafkaClient",
    "PartitionView",
    "TopicView",
    "error_name",
    "kafka_uuid",
]

PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR = 8, 9, 10
JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 11, 12, 13, 14
DESCRIBE_GROUPS, LIST_GROUPS, API_VERSIONS = 15, 16, 18
CREATE_TOPICS, DELETE_TOPICS, DESCRIBE_CONFIGS, DELETE_GROUPS = 19, 20, 32, 42
CONSUMER_GROUP_DESCRIBE = 69
STREAMS_GROUP_HEARTBEAT, STREAMS_GROUP_DESCRIBE = 88, 89
DESCRIBE_CLIENT_QUOTAS, ALTER_CLIENT_QUOTAS = 48, 49
DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
UPDATE_FEATURES = 57
DESCRIBE_QUORUM, ADD_RAFT_VOTER, REMOVE_RAFT_VOTER = 55, 80, 81
INCREMENTAL_ALTER_CONFIGS, LIST_CONFIG_RESOURCES = 44, 74
DESCRIBE_LOG_DIRS = 35

#: The newest version of each API this code builds, and the oldest whose shape it builds.
PREFERRED = {
    PRODUCE: 9,
    FETCH: 12,
    LIST_OFFSETS: 9,  # v8/v9: EARLIEST_LOCAL (-4), LATEST_TIERED (-5); v7's shape
    METADATA: 12,
    OFFSET_COMMIT: 8,
    OFFSET_FETCH: 7,
    FIND_COORDINATOR: 3,
    JOIN_GROUP: 7,
    HEARTBEAT: 4,
    LEAVE_GROUP: 4,
    SYNC_GROUP: 5,
    DESCRIBE_GROUPS: 5,
    LIST_GROUPS: 5,  # v5: each group's type (KIP-848)
    API_VERSIONS: 3,
    CREATE_TOPICS: 7,
    DELETE_TOPICS: 6,
    DESCRIBE_CONFIGS: 4,
    DELETE_GROUPS: 2,
    CONSUMER_GROUP_DESCRIBE: 1,
    STREAMS_GROUP_HEARTBEAT: 0,
    STREAMS_GROUP_DESCRIBE: 0,
    DESCRIBE_CLIENT_QUOTAS: 1,
    ALTER_CLIENT_QUOTAS: 1,
    DESCRIBE_ACLS: 3,
    CREATE_ACLS: 3,
    DELETE_ACLS: 3,
    UPDATE_FEATURES: 1,  # v1: upgrade types and ValidateOnly, a result per feature
    DESCRIBE_QUORUM: 2,  # v2: directory ids and the voters' endpoints (KIP-853)
    ADD_RAFT_VOTER: 1,
    REMOVE_RAFT_VOTER: 0,
    INCREMENTAL_ALTER_CONFIGS: 1,
    LIST_CONFIG_RESOURCES: 1,  # v1: any resource type (KIP-1142); v0 client metrics only
    DESCRIBE_LOG_DIRS: 4,
}
FLOOR = {
    PRODUCE: 3,
    FETCH: 4,
    LIST_OFFSETS: 1,
    METADATA: 1,
    OFFSET_COMMIT: 2,
    OFFSET_FETCH: 1,
    FIND_COORDINATOR: 1,
    JOIN_GROUP: 5,
    HEARTBEAT: 3,
    LEAVE_GROUP: 3,
    SYNC_GROUP: 3,
    DESCRIBE_GROUPS: 0,
    LIST_GROUPS: 0,
    API_VERSIONS: 0,
    CREATE_TOPICS: 2,
    DELETE_TOPICS: 1,
    DESCRIBE_CONFIGS: 1,
    DELETE_GROUPS: 0,
    CONSUMER_GROUP_DESCRIBE: 0,
    STREAMS_GROUP_HEARTBEAT: 0,
    STREAMS_GROUP_DESCRIBE: 0,
    DESCRIBE_CLIENT_QUOTAS: 0,
    ALTER_CLIENT_QUOTAS: 0,
    DESCRIBE_ACLS: 1,  # v1: pattern types (KIP-290)
    CREATE_ACLS: 1,
    DELETE_ACLS: 1,
    UPDATE_FEATURES: 0,
    DESCRIBE_QUORUM: 0,
    ADD_RAFT_VOTER: 0,
    REMOVE_RAFT_VOTER: 0,
    INCREMENTAL_ALTER_CONFIGS: 0,
    LIST_CONFIG_RESOURCES: 0,
    DESCRIBE_LOG_DIRS: 1,
}

EARLIEST, LATEST = -2, -1
#: Errors a producer or consumer answers with a metadata refresh and a retry.
RETRIABLE = frozenset(
    {
        ErrorCode.not_leader_or_follower,
        ErrorCode.leader_not_available,
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.fenced_leader_epoch,
        ErrorCode.unknown_leader_epoch,
        ErrorCode.request_timed_out,
        ErrorCode.not_enough_replicas,
        ErrorCode.not_enough_replicas_after_append,
        ErrorCode.coordinator_not_available,
        ErrorCode.not_coordinator,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.network_exception,
    }
)


class AdminError(Exception):
    """A command that cannot be done; the message says why, in one line."""


def error_name(code: ErrorCode) -> str:
    return code.name.upper()


def kafka_uuid(value: uuid.UUID | None) -> str:
    """A topic id as Kafka prints it: URL-safe base64 of its 16 bytes, no padding."""
    if value is None:
        return ""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


# -- the cluster as Metadata tells it ---------------------------------------------------


@dataclass
class PartitionView:
    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]
    error: ErrorCode = ErrorCode.none


@dataclass
class TopicView:
    name: str
    error: ErrorCode
    topic_id: uuid.UUID | None
    internal: bool
    partitions: dict[int, PartitionView] = field(default_factory=dict)


@dataclass
class ClusterView:
    brokers: dict[int, tuple[str, int]]
    controller: int
    cluster_id: str | None
    topics: dict[str, TopicView]


def _bootstrap_addresses(bootstrap: str) -> list[tuple[str, int]]:
    addresses = []
    for item in bootstrap.split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not port.isdigit() or not 0 < int(port) <= 65535:
            raise AdminError(f"bootstrap server {item!r} is not HOST:PORT")
        addresses.append((host.strip("[]") or "127.0.0.1", int(port)))
    if not addresses:
        raise AdminError("no bootstrap server given")
    return addresses


class KafkaClient:
    """Connections to a cluster, the API versions to use, and the calls the tools make."""

    def __init__(self, bootstrap: str, client_id: str = "minikafka-cli") -> None:
        self.bootstrap = _bootstrap_addresses(bootstrap)
        self.client_id = client_id
        self._connections: dict[int, BrokerConnection] = {}
        self._bootstrap_connection: BrokerConnection | None = None
        self._versions: dict[int, tuple[int, int]] = {}
        self.cluster = ClusterView({}, -1, None, {})

    async def __aenter__(self) -> KafkaClient:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    async def connect(self) -> None:
        """Reach the first bootstrap server that answers and learn its API versions."""
        problems = []
        for host, port in self.bootstrap:
            connection = BrokerConnection(host, port, self.client_id)
            try:
                await connection.open()
                await self._api_versions(connection)
            except (OSError, ConnectionError) as exc:
                connection.close()
                problems.append(f"{host}:{port}: {getattr(exc, 'strerror', None) or exc}")
                continue
            self._bootstrap_connection = connection
            await self.refresh_metadata([])
            return
        raise AdminError(f"cannot connect to the bootstrap servers ({'; '.join(problems)})")

    async def _api_versions(self, connection: BrokerConnection) -> None:
        b = request_builder(API_VERSIONS, 3)
        response = await connection.request(
            API_VERSIONS,
            3,
            b.ApiVersionsRequest(
                client_software_name="minikafka-cli", client_software_version="1.0"
            ),
        )
        if response.error_code is not ErrorCode.none and not response.api_keys:
            raise ConnectionError(f"ApiVersions failed: {error_name(response.error_code)}")
        self._versions = {
            int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys
        }

    def close(self) -> None:
        for connection in self._connections.values():
            connection.close()
        self._connections.clear()
        if self._bootstrap_connection is not None:
            self._bootstrap_connection.close()
            self._bootstrap_connection = None

    def version(self, api_key: int) -> int:
        """The version of ``api_key`` to use with this cluster."""
        ours = min(PREFERRED[api_key], KIO_VERSIONS[api_key].max_version)
        theirs = self._versions.get(api_key)
        if theirs is None:
            raise AdminError(f"the broker does not support API key {api_key}")
        chosen = min(ours, theirs[1])
        if chosen < max(FLOOR[api_key], theirs[0]):
            raise AdminError(
                f"no common version of API key {api_key}: the broker serves "
                f"{theirs[0]}..{theirs[1]}, this tool {FLOOR[api_key]}..{ours}"
            )
        return chosen

    async def call(
        self,
        api_key: int,
        build: Callable[[Builder, int], Any],
        broker: int | None = None,
        timeout_s: float | None = None,
    ) -> Any:
        """Build a request for the version in use, send it (to ``broker``, or to any
        broker), return the response."""
        version = self.version(api_key)
        payload = build(request_builder(api_key, version), version)
        connection = await self.connection(broker)
        return await connection.request(api_key, version, payload, timeout_s)

    async def connection(self, broker: int | None = None) -> BrokerConnection:
        if broker is None:
            if self._bootstrap_connection is not None and not self._bootstrap_connection.closed:
                return self._bootstrap_connection
            broker = next(iter(sorted(self.cluster.brokers)), None)
            if broker is None:
                await self.connect()
                assert self._bootstrap_connection is not None
                return self._bootstrap_connection
        existing = self._connections.get(broker)
        if existing is not None and not existing.closed:
            return existing
        address = self.cluster.brokers.get(broker)
        if address is None:
            await self.refresh_metadata([])
            address = self.cluster.brokers.get(broker)
            if address is None:
                raise ConnectionError(f"broker {broker} is not in the cluster's metadata")
        connection = BrokerConnection(address[0], address[1], self.client_id)
        await connection.open()
        self._connections[broker] = connection
        return connection

    def forget(self, broker: int | None) -> None:
        """Drop the connection to ``broker`` (it failed); the next call reconnects."""
        connection = self._connections.pop(broker, None) if broker is not None else None
        if connection is not None:
            connection.close()

    # -- metadata -----------------------------------------------------------------------

    async def refresh_metadata(
        self, topics: Sequence[str] | None = None, auto_create: bool = False
    ) -> ClusterView:
        """Metadata of ``topics`` (None: every topic; []: brokers only)."""

        def build(b: Builder, version: int) -> Any:
            return b.MetadataRequest(
                topics=None
                if topics is None
                else tuple(b.MetadataRequestTopic(name=t, topic_id=None) for t in topics),
                allow_auto_topic_creation=auto_create,
                include_topic_authorized_operations=False,
                include_cluster_authorized_operations=False,
            )

        response = await self._call_any(METADATA, build)
        brokers = {int(b.node_id): (str(b.host), int(b.port)) for b in response.brokers}
        views: dict[str, TopicView] = {}
        for topic in response.topics:
            view = TopicView(
                name=str(topic.name),
                error=topic.error_code,
                topic_id=getattr(topic, "topic_id", None),
                internal=bool(getattr(topic, "is_internal", False)),
            )
            for p in topic.partitions:
                view.partitions[int(p.partition_index)] = PartitionView(
                    partition=int(p.partition_index),
                    leader=int(p.leader_id),
                    replicas=[int(r) for r in p.replica_nodes],
                    isr=[int(r) for r in p.isr_nodes],
                    error=p.error_code,
                )
            views[view.name] = view
        cluster = ClusterView(
            brokers,
            int(getattr(response, "controller_id", -1)),
            getattr(response, "cluster_id", None),
            views,
        )
        if topics is None:
            self.cluster = cluster
        else:
            self.cluster.brokers = brokers
            self.cluster.controller = cluster.controller
            self.cluster.cluster_id = cluster.cluster_id
            self.cluster.topics.update(views)
        return cluster

    async def _call_any(self, api_key: int, build: Callable[[Builder, int], Any]) -> Any:
        """A call any broker can answer; tries the others when one is gone."""
        candidates: list[int | None] = [None, *sorted(self.cluster.brokers)]
        last: Exception | None = None
        for broker in candidates:
            try:
                return await self.call(api_key, build, broker)
            except (OSError, ConnectionError) as exc:
                last = exc
                if broker is None and self._bootstrap_connection is not None:
                    self._bootstrap_connection.close()
                else:
                    self.forget(broker)
        raise AdminError(f"no broker answers: {last}")

    async def partitions_of(self, topic: str, auto_create: bool = False) -> TopicView:
        """The topic's metadata, waiting a little for leaders (a topic just created);
        AdminError when it does not exist."""
        view: TopicView | None = None
        for attempt in range(10):
            cluster = await self.refresh_metadata([topic], auto_create=auto_create)
            view = cluster.topics.get(topic)
            error = view.error if view is not None else ErrorCode.unknown_topic_or_partition
            if view is not None and error is ErrorCode.none and view.partitions:
                if all(p.leader >= 0 for p in view.partitions.values()):
                    return view
            elif error is ErrorCode.unknown_topic_or_partition and not auto_create:
                raise AdminError(f"topic {topic!r} does not exist")
            elif error not in (
                ErrorCode.none,
                ErrorCode.leader_not_available,
                ErrorCode.unknown_topic_or_partition,
            ):
                raise AdminError(f"topic {topic!r}: {error_name(error)}")
            await asyncio.sleep(0.05 * (attempt + 1))
        if view is not None and view.error is ErrorCode.none and view.partitions:
            return view  # some partition has no leader now; the caller retries on it
        raise AdminError(f"topic {topic!r} is not available")

    # -- offsets ------------------------------------------------------------------------

    async def list_offsets(
        self, partitions: Iterable[tuple[str, int]], timestamp: int
    ) -> dict[tuple[str, int], int]:
        """Offsets at ``timestamp`` (EARLIEST, LATEST) from each partition's leader."""
        by_leader: dict[int, list[tuple[str, int]]] = {}
        for topic, partition in partitions:
            view = self.cluster.topics.get(topic)
            if view is None or partition not in view.partitions:
                view = await self.partitions_of(topic)
            by_leader.setdefault(view.partitions[partition].leader, []).append((topic, partition))
        result: dict[tuple[str, int], int] = {}
        for leader, tps in by_leader.items():
            by_topic: dict[str, list[int]] = {}
            for topic, partition in tps:
                by_topic.setdefault(topic, []).append(partition)

            def build(b: Builder, version: int, by_topic: dict[str, list[int]] = by_topic) -> Any:
                return b.ListOffsetsRequest(
                    replica_id=-1,
                    isolation_level=0,
                    topics=tuple(
                        b.ListOffsetsTopic(
                            name=t,
                            partitions=tuple(
                                b.ListOffsetsPartition(
                                    partition_index=p, current_leader_epoch=-1, timestamp=timestamp
                                )
                                for p in ps
                            ),
                        )
                        for t, ps in by_topic.items()
                    ),
                )

            response = await self.call(LIST_OFFSETS, build, leader)
            for topic_response in response.topics:
                for p in topic_response.partitions:
                    if p.error_code is not ErrorCode.none:
                        raise AdminError(
                            f"ListOffsets {topic_response.name}-{p.partition_index}: "
                            f"{error_name(p.error_code)}"
                        )
                    result[(str(topic_response.name), int(p.partition_index))] = int(p.offset)
        return result

    # -- groups -------------------------------------------------------------------------

    async def find_coordinator(self, group: str) -> int:
        for attempt in range(20):

            def build(b: Builder, version: int) -> Any:
                return b.FindCoordinatorRequest(key=group, key_type=0)

            response = await self._call_any(FIND_COORDINATOR, build)
            if response.error_code is ErrorCode.none:
                node = int(response.node_id)
                self.cluster.brokers.setdefault(node, (str(response.host), int(response.port)))
                return node
            if response.error_code not in RETRIABLE:
                raise AdminError(f"FindCoordinator {group}: {error_name(response.error_code)}")
            await asyncio.sleep(0.1 * min(attempt + 1, 5))
        raise AdminError(f"no coordinator for group {group!r}")

    async def committed_offsets(
        self, group: str, coordinator: int, partitions: Sequence[tuple[str, int]] | None = None
    ) -> dict[tuple[str, int], int]:
        """The group's committed offsets (of ``partitions``, or all); -1 for none."""
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions or ():
            by_topic.setdefault(topic, []).append(partition)

        def build(b: Builder, version: int) -> Any:
            return b.OffsetFetchRequest(
                group_id=group,
                topics=None
                if partitions is None
                else tuple(
                    b.OffsetFetchRequestTopic(name=t, partition_indexes=tuple(ps))
                    for t, ps in by_topic.items()
                ),
                require_stable=False,
            )

        response = await self.call(OFFSET_FETCH, build, coordinator)
        top = getattr(response, "error_code", ErrorCode.none)
        if top is not ErrorCode.none:
            raise AdminError(f"OffsetFetch {group}: {error_name(top)}")
        result: dict[tuple[str, int], int] = {}
        for topic in response.topics:
            for p in topic.partitions:
                if p.error_code is ErrorCode.none:
                    result[(str(topic.name), int(p.partition_index))] = int(p.committed_offset)
        return result

    async def commit_offsets(
        self,
        group: str,
        coordinator: int,
        offsets: dict[tuple[str, int], int],
        generation: int = -1,
        member_id: str = "",
    ) -> None:
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append((partition, offset))

        def build(b: Builder, version: int) -> Any:
            return b.OffsetCommitRequest(
                group_id=group,
                generation_id_or_member_epoch=generation,
                generation_id=generation,
                member_id=member_id,
                group_instance_id=None,
                retention_time_ms=-1,
                topics=tuple(
                    b.OffsetCommitRequestTopic(
                        name=t,
                        partitions=tuple(
                            b.OffsetCommitRequestPartition(
                                partition_index=p,
                                committed_offset=o,
                                committed_leader_epoch=-1,
                                committed_metadata="",
                                commit_timestamp=-1,
                            )
                            for p, o in ps
                        ),
                    )
                    for t, ps in by_topic.items()
                ),
            )

        response = await self.call(OFFSET_COMMIT, build, coordinator)
        for topic in response.topics:
            for p in topic.partitions:
                if p.error_code is not ErrorCode.none:
                    raise AdminError(
                        f"OffsetCommit {topic.name}-{p.partition_index}: {error_name(p.error_code)}"
                    )
