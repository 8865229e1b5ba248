"""The quota managers' metrics in ``/metrics``, with Kafka's names.

Kafka registers, per quota type (the metric group ``Produce``, ``Fetch``, ``Request``,
``ControllerMutation``) and per sensor's tags (``user``, ``client-id``), the measured rate
(``byte-rate``; ``request-time`` for Request) and the average throttle time
(``throttle-time``), and per type the throttled channels waiting (``queue-size``). As
JMX ``kafka.server:type=Produce,user=,client-id=c`` attribute ``byte-rate``, through the
usual exporter rules: ``kafka_server_produce_byte_rate{user="",client_id="c"}``. Read at
scrape time: nothing per request.

The replication quotas (``kafka.server:type=LeaderReplication,name=byte-rate`` and
``FollowerReplication``) have one ``byte-rate`` per broker, with no tags:
``kafka_server_leaderreplication_byte_rate{broker="0"}``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

from broker.quota.client_quota_manager import QuotaType
from broker.quota.quota_managers import QuotaManagers
from broker.quota.replication_quota_manager import ReplicationQuotas

_RATE_NAMES = {
    QuotaType.PRODUCE: "byte_rate",
    QuotaType.FETCH: "byte_rate",
    QuotaType.REQUEST: "request_time",
    QuotaType.CONTROLLER_MUTATION: "mutation_rate",
}


def quota_families(brokers: Iterable[tuple[int, QuotaManagers | None]]) -> Iterator[Metric]:
    """Gauges for every quota type of every broker with quota managers."""
    labels = ["user", "client_id", "broker"]
    families: dict[QuotaType, tuple[GaugeMetricFamily, GaugeMetricFamily, GaugeMetricFamily]]
    families = {}
    for quota_type in QuotaType:
        group = quota_type.value.lower()
        rate_name = _RATE_NAMES[quota_type]
        families[quota_type] = (
            GaugeMetricFamily(
                f"kafka_server_{group}_{rate_name}",
                f"Kafka {quota_type.value} {rate_name.replace('_', '-')} per user/client-id.",
                labels=labels,
            ),
            GaugeMetricFamily(
                f"kafka_server_{group}_throttle_time",
                f"Kafka {quota_type.value} throttle-time: average ms per user/client-id.",
                labels=labels,
            ),
            GaugeMetricFamily(
                f"kafka_server_{group}_queue_size",
                f"Kafka {quota_type.value} queue-size: throttled channels waiting.",
                labels=["broker"],
            ),
        )
    for broker_id, quotas in brokers:
        if quotas is None:
            continue
        b = str(broker_id)
        for manager in quotas.managers():
            rate, throttle, queue = families[manager.quota_type]
            for tags, sensors in sorted(manager.sensors.items()):
                rate.add_metric([tags[0], tags[1], b], manager.measured_rate(tags))
                throttle.add_metric([tags[0], tags[1], b], sensors.throttle_time_avg())
            queue.add_metric([b], quotas.reaper.queue_size.get(manager.quota_type, 0))
    for triple in families.values():
        yield from triple


def replication_quota_families(
    brokers: Iterable[tuple[int, ReplicationQuotas | None]],
) -> Iterator[Metric]:
    """Each broker's LeaderReplication and FollowerReplication byte-rate."""
    leader = GaugeMetricFamily(
        "kafka_server_leaderreplication_byte_rate",
        "Kafka LeaderReplication byte-rate: throttled partitions' bytes served to followers.",
        labels=["broker"],
    )
    follower = GaugeMetricFamily(
        "kafka_server_followerreplication_byte_rate",
        "Kafka FollowerReplication byte-rate: throttled partitions' bytes fetched.",
        labels=["broker"],
    )
    for broker_id, quotas in brokers:
        if quotas is None:
            continue
        leader.add_metric([str(broker_id)], quotas.leader.byte_rate())
        follower.add_metric([str(broker_id)], quotas.follower.byte_rate())
    yield leader
    yield follower
