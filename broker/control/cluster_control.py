"""What the control endpoint and its console may see and do of a cluster, and how it
sums up its health.

``ClusterControl`` is the narrow interface ``MiniKafka`` implements for them: the
brokers, the shared stores they show (metadata, ACLs, quotas, the capture), the fault
injector and the lifecycle and replication controls, nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from broker.cluster.controller import NO_LEADER, partition_list

if TYPE_CHECKING:
    from broker.cluster.cluster_metadata import ClusterMetadata
    from broker.control.faults import FaultInjector
    from broker.observability.capture import CaptureSet
    from broker.observability.metrics import RequestMetrics
    from broker.quota.client_quota_store import ClientQuotaStore
    from broker.remote.remote_log_metadata_manager import RemoteLogMetadataManager
    from broker.remote.storage_model import RemoteStorageModel
    from broker.security.authorizer.acl_store import AclStore
    from broker.server.broker_server import Broker

__all__ = ["ClusterControl", "overall_status", "partitions_led"]


class ClusterControl(Protocol):
    """What the control endpoint may see and do of a cluster (``MiniKafka``)."""

    @property
    def brokers(self) -> Sequence[Broker]: ...

    @property
    def cluster(self) -> ClusterMetadata: ...

    @property
    def faults(self) -> FaultInjector: ...

    @property
    def request_metrics(self) -> Mapping[int, RequestMetrics]: ...

    @property
    def bootstrap(self) -> str: ...

    @property
    def acls(self) -> AclStore: ...

    @property
    def client_quotas(self) -> ClientQuotaStore: ...

    @property
    def captures(self) -> CaptureSet | None: ...

    async def stop_broker(self, broker_id: int) -> None: ...

    async def start_broker(self, broker_id: int) -> None: ...

    def pause_replication(self, broker_id: int) -> None: ...

    def resume_replication(self, broker_id: int) -> None: ...

    def set_replication_delay_ms(self, broker_id: int, ms: int) -> None: ...

    def clear_replication_faults(self, broker_id: int | None = None) -> None: ...

    def replication_faults(self) -> Mapping[int, Mapping[str, object]]: ...

    @property
    def remote_storage(self) -> RemoteStorageModel | None:
        """The remote tier's model (its faults); None without tiered storage."""
        ...

    @property
    def remote_tier_metadata(self) -> RemoteLogMetadataManager | None:
        """What the remote tier holds; None without tiered storage."""
        ...


def partitions_led(cluster: ClusterMetadata) -> dict[int, int]:
    """Broker id -> how many partitions it leads (``/status`` and the console's overview)."""
    leads: dict[int, int] = {}
    for topic in cluster.topics.values():
        for state in topic.partitions:
            leads[state.leader] = leads.get(state.leader, 0) + 1
    return leads


def overall_status(app: ClusterControl) -> tuple[str, list[str]]:
    """("ok" | "degraded" | "down", the problems): "ok" only when nothing is broken
    -- every broker up, no fault in force, every partition led and fully in sync."""
    cluster = app.cluster
    problems: list[str] = []
    endpoints = sorted(cluster.brokers.values(), key=lambda e: e.broker_id)
    stopped = [e.broker_id for e in endpoints if not e.alive]
    for broker_id in stopped:
        problems.append(f"broker {broker_id} is stopped")
    for broker_id, fault in sorted(app.replication_faults().items()):
        if fault.get("paused"):
            problems.append(f"replication of broker {broker_id} is paused")
        if fault.get("delay_ms"):
            problems.append(
                f"replication of broker {broker_id} is delayed {fault['delay_ms']} ms per fetch"
            )
    for endpoint in endpoints:
        latency = app.faults.response_delay_ms(endpoint.broker_id)
        if latency:
            problems.append(f"broker {endpoint.broker_id} answers {latency} ms late")
    for rule in app.faults.rules():
        where = f" naming {rule.topic}" if rule.topic is not None else ""
        if rule.partition is not None:
            where += f"-{rule.partition}"
        problems.append(
            f"broker {rule.broker_id} fails its next {rule.remaining} "
            f"{rule.to_json()['api']} requests{where} with {rule.error.name.upper()}"
        )
    offline: list[str] = []
    under: list[str] = []
    for name, topic in cluster.topics.items():
        for state in topic.partitions:
            if state.leader == NO_LEADER:
                offline.append(f"{name}-{state.partition}")
            elif len(state.isr) < len(state.replicas):
                under.append(f"{name}-{state.partition}")
    if offline:
        problems.append(f"{len(offline)} partitions offline: {partition_list(offline)}")
    if under:
        problems.append(f"{len(under)} partitions under-replicated: {partition_list(under)}")
    if endpoints and len(stopped) == len(endpoints):
        return "down", problems
    return ("degraded" if problems else "ok"), problems
