"""The cluster as the console shows it: brokers, topics, and one topic's partitions.

Offsets and sizes come from each broker's own ``Partition`` (the leader's high
watermark and log start, each replica's log end), read between two requests. A
partition whose leader is stopped shows what the metadata says and no offsets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.cluster.controller import NO_LEADER
from broker.control.cluster_control import ClusterControl, overall_status, partitions_led
from broker.handlers.broker_configs import layers_for
from broker.handlers.topic_configs import topic_config_entries

if TYPE_CHECKING:
    from broker.replica.partition import Partition
    from broker.server.broker_server import Broker

__all__ = ["local_partition", "overview", "topic_detail", "topics"]


def _running(app: ClusterControl, broker_id: int) -> Broker | None:
    endpoint = app.cluster.brokers.get(broker_id)
    if endpoint is None or not endpoint.alive:
        return None
    for broker in app.brokers:
        if broker.broker_id == broker_id:
            return broker
    return None


def local_partition(
    app: ClusterControl, broker_id: int, topic: str, index: int
) -> Partition | None:
    """``broker_id``'s replica of ``topic-index`` when that broker runs and has it."""
    broker = _running(app, broker_id)
    if broker is None:
        return None
    return broker.services.replica_manager.online_partition((topic, index))


def overview(app: ClusterControl) -> dict[str, Any]:
    cluster = app.cluster
    status, problems = overall_status(app)
    replication = app.replication_faults()
    leads = partitions_led(cluster)
    brokers = []
    for endpoint in sorted(cluster.brokers.values(), key=lambda e: e.broker_id):
        b = endpoint.broker_id
        fault = replication.get(b, {})
        brokers.append(
            {
                "id": b,
                "address": f"{endpoint.host}:{endpoint.port}",
                "alive": endpoint.alive,
                "controller": b == cluster.controller_id,
                "leader_of": leads.get(b, 0),
                "latency_ms": app.faults.response_delay_ms(b),
                "replication": "paused"
                if fault.get("paused")
                else f"delayed {fault['delay_ms']} ms"
                if fault.get("delay_ms")
                else "running",
            }
        )
    return {
        "status": status,
        "problems": problems,
        "bootstrap": app.bootstrap,
        "cluster_id": cluster.cluster_id,
        "controller": cluster.controller_id,
        "brokers": brokers,
        "topics": len(cluster.topics),
        "partitions": sum(len(t.partitions) for t in cluster.topics.values()),
        "failures": [rule.to_json() for rule in app.faults.rules()],
    }


def topics(app: ClusterControl) -> list[dict[str, Any]]:
    out = []
    for name, topic in sorted(
        app.cluster.topics.items(), key=lambda item: (item[0].startswith("__"), item[0])
    ):
        states = topic.partitions
        out.append(
            {
                "name": name,
                "internal": name.startswith("__"),
                "partitions": len(states),
                "replication_factor": len(states[0].replicas) if states else 0,
                "offline": sum(s.leader == NO_LEADER for s in states),
                "under_replicated": sum(len(s.isr) < len(s.replicas) for s in states),
            }
        )
    return out


def topic_detail(app: ClusterControl, name: str) -> dict[str, Any] | None:
    info = app.cluster.topics.get(name)
    if info is None:
        return None
    partitions = []
    tier = app.remote_tier_metadata
    for state in info.partitions:
        leader = local_partition(app, state.leader, name, state.partition)
        replicas = []
        for replica_id in state.replicas:
            local = local_partition(app, replica_id, name, state.partition)
            replicas.append(
                {
                    "id": replica_id,
                    "in_sync": replica_id in state.isr,
                    "log_end": local.log_end_offset if local is not None else None,
                    "local_bytes": local.log.size_bytes if local is not None else None,
                }
            )
        partitions.append(
            {
                "partition": state.partition,
                "leader": state.leader,
                "leader_epoch": state.leader_epoch,
                "replicas": state.replicas,
                "isr": state.isr,
                "replica_logs": replicas,
                "high_watermark": leader.high_watermark if leader is not None else None,
                "log_start": leader.log_start_offset if leader is not None else None,
                "log_end": leader.log_end_offset if leader is not None else None,
                "local_bytes": leader.log.size_bytes if leader is not None else None,
                # What the remote tier holds (KIP-405), None without tiered storage.
                "remote_bytes": tier.remote_size_bytes((name, state.partition))
                if tier is not None
                else None,
            }
        )
    configs = []
    some_broker = next((b for b in app.brokers if _running(app, b.broker_id)), None)
    if some_broker is not None:
        for entry in topic_config_entries(layers_for(some_broker.services), info.configs):
            configs.append({"name": entry.name, "value": entry.value, "source": entry.source.name})
    return {
        "name": name,
        "topic_id": str(info.topic_id),
        "partitions": partitions,
        "configs": configs,
    }
