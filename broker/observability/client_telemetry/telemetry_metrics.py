"""The clients' pushed metrics in Prometheus form, for ``/metrics``.

An OTLP metric name becomes a Prometheus name under the ``client_telemetry_`` prefix,
so no client metric can take a broker metric's name: the dots and every other character
Prometheus refuses become ``_`` (``org.apache.kafka.producer.node.request.latency.avg``
is ``client_telemetry_org_apache_kafka_producer_node_request_latency_avg``). Labels: the
broker that received it, the client's ``client_id`` and ``client_instance_id``, and the
point's own attributes (``node.id`` as ``node_id``). Monotonic sums are counters
(``_total``), everything else a gauge. ``minikafka_client_telemetry_pushes`` counts the
pushes each broker received, per client instance.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from broker.observability.client_telemetry.client_telemetry_receiver import (
    ClientTelemetryReceiver,
)

__all__ = ["PREFIX", "client_telemetry_families", "prometheus_name"]

PREFIX = "client_telemetry_"
_NOT_ALLOWED = re.compile(r"[^a-zA-Z0-9_]")
_BASE_LABELS = ("broker", "client_id", "client_instance_id")


def prometheus_name(otlp_name: str) -> str:
    """``client_telemetry_`` + the name with every character Prometheus refuses as ``_``."""
    return PREFIX + _NOT_ALLOWED.sub("_", otlp_name)


def client_telemetry_families(
    receivers: Iterable[tuple[int, ClientTelemetryReceiver]],
) -> Iterator[Metric]:
    """One family per pushed metric name over every broker's receiver."""
    # name -> (kind, [(labels, value)]), labels as a dict of our names.
    series: dict[str, tuple[str, list[tuple[dict[str, str], float]]]] = {}
    pushes = CounterMetricFamily(
        "minikafka_client_telemetry_pushes",
        "Client telemetry pushes (PushTelemetry with metrics) received, per client instance.",
        labels=list(_BASE_LABELS),
    )
    for broker_id, receiver in receivers:
        for instance in receiver.instances():
            base = {
                "broker": str(broker_id),
                "client_id": instance.client_id,
                "client_instance_id": instance.client_instance_id,
            }
            pushes.add_metric([base[k] for k in _BASE_LABELS], instance.pushes)
            for (name, attributes), (kind, value) in instance.series.items():
                labels = dict(base)
                for key, text in attributes:
                    labels.setdefault(_NOT_ALLOWED.sub("_", key), text)
                entry = series.setdefault(prometheus_name(name), (kind, []))
                entry[1].append((labels, value))
    yield pushes
    for name in sorted(series):
        kind, points = series[name]
        label_names = sorted({k for labels, _ in points for k in labels} - set(_BASE_LABELS))
        names = [*_BASE_LABELS, *label_names]
        family: GaugeMetricFamily | CounterMetricFamily
        if kind == "counter":
            family = CounterMetricFamily(name, "Client telemetry (KIP-714) sum.", labels=names)
        else:
            family = GaugeMetricFamily(name, "Client telemetry (KIP-714) gauge.", labels=names)
        for labels, value in points:
            family.add_metric([labels.get(k, "") for k in names], value)
        yield family
