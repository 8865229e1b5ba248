"""Where accepted pushes go: the broker's client-telemetry receiver.

Kafka hands each accepted push to a ``ClientTelemetryExporterPlugin`` (a metrics
reporter that implements ``ClientTelemetry``, named in ``metric.reporters``): what it
does with the metrics is the plugin's business. This receiver is minikafka's plugin. It
decodes the payload (``otlp_payload``) and

* keeps, per client instance, the latest value of every gauge and the running total of
  every delta sum (a cumulative sum's latest value), for ``/metrics``
  (``telemetry_metrics``), labelled with the client's id and instance id;
* tells its listeners (the broker's capture, when on) of every push with its points,
  so a capture holds the clients' own view beside their requests.

It holds at most ``MAX_INSTANCES`` client instances (the least recently pushed goes
first); an instance's metrics outlive its connection, so a client that pushed and
closed is still shown.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol

from broker.observability.client_telemetry.client_metrics_instance import ClientMetricsInstance
from broker.observability.client_telemetry.otlp_payload import (
    MetricPoint,
    TelemetryPayload,
    decode_payload,
)

__all__ = ["MAX_INSTANCES", "ClientTelemetryReceiver", "InstanceMetrics", "TelemetryListener"]

MAX_INSTANCES: Final = 1024

#: A series: the metric's name and its point's attributes.
SeriesKey = tuple[str, tuple[tuple[str, str], ...]]


class TelemetryListener(Protocol):
    """Told of every accepted push, decoded (the capture)."""

    def client_telemetry_pushed(
        self, instance: ClientMetricsInstance, payload: TelemetryPayload
    ) -> None: ...


@dataclass(slots=True)
class InstanceMetrics:
    """One client instance's pushed metrics, as ``/metrics`` shows them."""

    client_id: str
    client_instance_id: str
    software_name: str
    software_version: str
    pushes: int = 0
    #: series -> (kind, value): a gauge's latest value, a sum's total.
    series: dict[SeriesKey, tuple[str, float]] = field(default_factory=dict)

    def as_json(self) -> dict[str, object]:
        """The instance and its series (the control endpoint's ``/client-telemetry``)."""
        return {
            "client_id": self.client_id,
            "client_instance_id": self.client_instance_id,
            "client_software_name": self.software_name,
            "client_software_version": self.software_version,
            "pushes": self.pushes,
            "metrics": [
                {"name": name, "attributes": dict(attributes), "kind": kind, "value": value}
                for (name, attributes), (kind, value) in sorted(self.series.items())
            ],
        }

    def add(self, point: MetricPoint) -> None:
        key = (point.name, point.attributes)
        if point.kind == "sum":
            previous = self.series.get(key, ("sum", 0.0))[1] if point.delta else 0.0
            kind = "counter" if point.monotonic else "gauge"
            self.series[key] = (kind, previous + point.value)
        elif point.kind == "gauge":
            self.series[key] = ("gauge", point.value)
        else:
            self.series[(point.name + ".sum", point.attributes)] = ("gauge", point.value)
            self.series[(point.name + ".count", point.attributes)] = (
                "gauge",
                float(point.count or 0),
            )


class ClientTelemetryReceiver:
    """minikafka's ``ClientTelemetryExporterPlugin`` (module doc)."""

    def __init__(self, listeners: Sequence[TelemetryListener] = ()) -> None:
        self._listeners = tuple(listeners)
        self._instances: OrderedDict[str, InstanceMetrics] = OrderedDict()
        #: Pushes received with metrics, and those that could not be read.
        self.pushes = 0
        self.errors = 0

    def export(
        self,
        instance: ClientMetricsInstance,
        compression_type: int,
        metrics: bytes,
        max_bytes: int,
    ) -> None:
        """Decode one accepted push, keep its points, tell the listeners."""
        try:
            payload = decode_payload(compression_type, metrics, max_bytes)
        except Exception:
            self.errors += 1
            raise
        self.pushes += 1
        key = str(instance.instance_id)
        kept = self._instances.get(key)
        if kept is None:
            client = instance.attributes
            kept = InstanceMetrics(
                client.client_id or "",
                key,
                client.software_name or "",
                client.software_version or "",
            )
            self._instances[key] = kept
            while len(self._instances) > MAX_INSTANCES:
                self._instances.popitem(last=False)
        else:
            self._instances.move_to_end(key)
        kept.pushes += 1
        for point in payload.points:
            kept.add(point)
        for listener in self._listeners:
            listener.client_telemetry_pushed(instance, payload)

    def instances(self) -> list[InstanceMetrics]:
        """Every client instance kept, oldest push first."""
        return list(self._instances.values())
